"""The kernel library's shape inference for dynamic-shape graphs, called directly.

MindSpore calls ``<entry>InferShape(ndims, shapes, extra)`` (a std::vector return, errors as
C++ exceptions) for a node with the attribute ``cpp_infer_shape``: while compiling, with -1
for an unknown dimension and (-2) for an unknown rank, and again at each launch with the
actual shapes. ``ms_scatter_infer_shape(entry, ...)`` is the same function with a C
signature, which these tests call through ctypes:

* every entry exports its InferShape symbol;
* shapes with unknown parts are passed through unchecked (our Python inference checks the
  known parts right after, with its ValueError): the token entries give (1,), the others
  input_x's shape, unknown parts included;
* known shapes follow the kernels' own rule (the same function as make_plan): each
  mismatch returns the kernel's message naming the op, and agrees with infer/ on which
  shapes are valid.
"""
import ctypes

import pytest

from ms_scatter import infer
from ms_scatter.testing import entry_name, kernel_library, split_op

ENTRIES = [(op, out) for op in (f + r for f in infer.FAMILIES for r in infer.REDUCTIONS)
           for out in (("tensor",) if op.startswith("TensorScatter") else ("token", "return"))]


def infer_shape(entry, *shapes):
    """(output shape, None) or (None, message) from the library, for 3 input shapes."""
    fn = kernel_library().ms_scatter_infer_shape
    fn.restype = ctypes.c_int
    ndims = (ctypes.c_int * 3)(*[len(s) for s in shapes])
    bufs = [(ctypes.c_int64 * max(len(s), 1))(*s) for s in shapes]
    ptrs = (ctypes.POINTER(ctypes.c_int64) * 3)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in bufs])
    out = (ctypes.c_int64 * 64)()
    msg = ctypes.create_string_buffer(1024)
    rank = fn(entry.encode(), ndims, ptrs, out, 64, msg, len(msg))
    if rank < 0:
        return None, msg.value.decode()
    return tuple(out[:rank]), None


def _valid(op):
    family = split_op(op)[0]
    if family == "Scatter":
        return (5, 3), (2,), (2, 3)
    return (5, 3), (2, 1), (2, 3)


@pytest.mark.parametrize("op, output", ENTRIES)
def test_every_entry_has_an_infer_shape_symbol(op, output):
    assert hasattr(kernel_library(), entry_name(op, output) + "InferShape")


@pytest.mark.parametrize("op, output", ENTRIES)
def test_known_shapes(op, output):
    x, i, u = _valid(op)
    shape, err = infer_shape(entry_name(op, output), x, i, u)
    assert err is None
    assert shape == ((1,) if output == "token" else x)
    shape, err = infer_shape(entry_name(op, output), x, i, (3, 3))
    assert shape is None
    assert err == (f"For '{op}', the shape of 'updates' must match 'indices' {i} and 'input_x' (5, 3), "
                   f"but got (3, 3).")


@pytest.mark.parametrize("op, output", ENTRIES)
@pytest.mark.parametrize("unknown", ["dimension", "rank"])
def test_unknown_parts_pass_unchecked(op, output, unknown):
    x, i, u = _valid(op)
    if unknown == "dimension":
        x, i, u = (-1,) + x[1:], (-1,) + i[1:], (-1, 7)  # 7: a mismatch, left to infer/
    else:
        x, i, u = (-2,), (-2,), (-2,)
    shape, err = infer_shape(entry_name(op, output), x, i, u)
    assert err is None
    assert shape == ((1,) if output == "token" else x)


KNOWN_CASES = [  # (family, x, indices, updates)
    ("Scatter", (5,), (), ()), ("Scatter", (5, 2), (2, 2), (2, 2, 2)), ("Scatter", (), (2,), (2,)),
    ("Scatter", (5, 2), (2,), (2, 3)), ("Scatter", (5, 2), (2,), (2,)),
    ("ScatterNd", (5, 2), (2, 2), (2,)), ("ScatterNd", (5, 2), (2, 0), (2, 5, 2)), ("ScatterNd", (5, 2), (), ()),
    ("ScatterNd", (5, 2), (3,), (2,)), ("ScatterNd", (5, 2), (2, 3), (2,)), ("ScatterNd", (5, 2), (2,), ()),
    ("TensorScatter", (5, 2), (2, 2), (2,)), ("TensorScatter", (5, 2), (1,), (2,)),
    ("TensorScatter", (5, 2), (3, 1), (3, 2)), ("TensorScatter", (5, 2), (3, 1), (3, 3)),
]


@pytest.mark.parametrize("family, x, i, u", KNOWN_CASES)
def test_known_shapes_agree_with_infer(family, x, i, u):
    """The library's rule and infer/ accept and refuse the same known shapes."""
    op = family + "Max"
    rule, kwargs = infer.family_shape_rule(family)
    try:
        rule(op, x, i, u, **kwargs)
        expected_ok = True
    except ValueError:
        expected_ok = False
    for output in (("tensor",) if family == "TensorScatter" else ("token", "return")):
        shape, err = infer_shape(entry_name(op, output), x, i, u)
        assert (err is None) == expected_ok, (x, i, u, err)
        if err is not None:
            assert err.startswith(f"For '{op}', ") and "but got" in err, err


def test_unknown_entry():
    shape, err = infer_shape("NoSuchEntry", (5, 3), (2,), (2, 3))
    assert shape is None and err == "no such entry"


def test_invalid_known_shape():
    shape, err = infer_shape("ScatterAdd_token", (2 ** 40, 2 ** 40), (1,), (1, 2 ** 40))
    assert shape is None and err == ("For 'ScatterAdd', argument 0 has an invalid shape (negative or too large "
                                     "dimensions).")
