"""The Ascend path (ops/_ascend.py) through MindSpore on CPU: every primitive and function
on the AKG hybrid kernels, forced by MS_SCATTER_KERNELS=hybrid.

On an Ascend device target this path is taken by default; here the very same Python code
and hybrid kernel sources run, compiled by AKG's CPU backend (the only verification these
kernels have: they have never run on an Ascend chip). The switch is set per test by the
``hybrid`` fixture (monkeypatch), so it does not leak into other test files: primitives
are constructed inside the tests, functions decide at each call / compile.

* every seed example, both forms, PYNATIVE and GRAPH;
* each of the 21 primitives and 21 functions on a seeded oracle case with duplicate
  indices, PYNATIVE and GRAPH (value and index dtypes rotate over the operators);
* the policies: out-of-range/negative index and integer division by zero raise, in
  PYNATIVE, ScatterIndexError / ScatterZeroDivisionError with exactly the aot CPU kernel's
  message; in GRAPH the step fails (ops.Assert); the Parameter / input_x is unchanged;
  with Ascend's graph (no Assert) nothing is written and the step goes on;
* inference errors and implicit conversion as on the aot path; jit; the switch itself.

Compiles are shared: one (shape, dtype) per operator, reused by both forms and modes.
"""
import os
import zlib

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn

import ms_scatter
from ms_scatter import _ascend
from ms_scatter._lib import DIVISION_BY_ZERO, INDEX_OUT_OF_RANGE
from ms_scatter.seed_examples import SEED_EXAMPLES
from ms_scatter.testing import call_kernel, oracle, random_case, split_op

from .helpers import assert_same, assert_unchanged, call_in_mode, function_name, in_place, target_for
from .test_ordering import TwiceCell, _case as _ordering_case
from .test_seeds import _check_printed, _ids, _other_form, _run

OPS = list(ms_scatter.PRIMITIVES)
ROTATE = ("float32", "int32", "float16", "int64", "uint8", "float64", "int8", "int16")
SCATTER_SHAPE = (5, 3)  # Scatter*: indices (3, 2), updates (3, 2, 3)
ND_SHAPE = (4, 3, 2)    # ScatterNd*/TensorScatter*: depth 2, indices (3, 2, 2), updates (3, 2, 2)


@pytest.fixture(scope="module", autouse=True)
def _akg_kernel_cache(tmp_path_factory):
    """AKG's kernel cache outside the checkout (as tests/test_ascend_hybrid.py: it stays set
    for the process, so that the build server and this process agree where kernels are)."""
    os.environ.setdefault("MS_COMPILER_CACHE_PATH", str(tmp_path_factory.mktemp("akg_cache")))


@pytest.fixture
def hybrid(monkeypatch):
    """MS_SCATTER_KERNELS=hybrid for this test only."""
    monkeypatch.setenv(_ascend.ENV, "hybrid")
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")  # the aot reference calls' stderr


def _rng(case):
    return np.random.default_rng(zlib.crc32(repr(case).encode()))


def _dtypes(op):
    n = OPS.index(op)
    return ROTATE[n % len(ROTATE)], ("int32", "int64")[(n // 4) % 2]


def _case(op, with_duplicate=True):
    """The seeded case of `op`: x, indices, updates; one index vector repeated."""
    family = split_op(op)[0]
    dtype, index_dtype = _dtypes(op)
    shape = SCATTER_SHAPE if family == "Scatter" else ND_SHAPE
    x, indices, updates = random_case(_rng(op), op, shape, 6, dtype, index_dtype, duplicates=True)
    if with_duplicate:
        vectors = indices.reshape(6, -1)
        vectors[-1] = vectors[0]
    return x, indices, updates


def _callable(op, kind):
    if kind == "primitive":
        prim = getattr(ms_scatter, op)()
        assert prim.func_type == "hybrid" and prim._hybrid is not None  # pylint: disable=protected-access
        return prim
    assert _ascend.hybrid_selected()
    return getattr(ms_scatter, function_name(op))


# ------------------------------------------------------------------ seed examples

EXAMPLES = pytest.mark.parametrize("example", SEED_EXAMPLES, ids=_ids())


@EXAMPLES
def test_seed_example(example, mode, hybrid, capsys):
    call = getattr(ms_scatter, example["op"])
    if example["kind"] == "primitive":
        call = call()
        assert call.func_type == "hybrid"
    output, input_x = _run(example, mode, call)
    _check_printed(example, output, input_x, capsys)


@EXAMPLES
def test_seed_example_other_form(example, mode, hybrid, capsys):
    output, input_x = _run(example, mode, _other_form(example))
    _check_printed(example, output, input_x, capsys)


# ------------------------------------------------------------------ against the oracle

@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("op", OPS)
def test_matches_oracle(op, kind, mode, hybrid):
    x, indices, updates = _case(op)
    target = target_for(op, x)
    out = call_in_mode(mode, _callable(op, kind), op, target, indices, updates)
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected, f"{op} {kind} {mode}")
    if in_place(op):
        assert_same(target.asnumpy(), expected, f"{op} {kind} {mode}: the Parameter")
    else:
        assert_unchanged(target, x)


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("kind", ["primitive", "function"])
def test_program_order_in_graph(kind, mode, hybrid):
    """As st/test_ordering.py on the aot path: `a = op(p); b = p * 1; c = op(p)`; the
    primitive and the function return the Parameter itself."""
    x, i, u, after1, after2 = _ordering_case("ScatterAdd")
    cell = TwiceCell(x, _callable("ScatterAdd", kind))
    a, a_inside, b, c = cell(Tensor(i), Tensor(u))
    assert_same(a_inside.asnumpy(), after1)
    assert_same(b.asnumpy(), after1)
    assert_same(c.asnumpy(), after2)
    assert_same(cell.p.asnumpy(), after2)
    assert_same(a.asnumpy(), after2)


@pytest.mark.parametrize("mode", ["JIT"], indirect=True)
@pytest.mark.parametrize("op", ["ScatterNdSub", "TensorScatterMin"])
def test_jit(op, mode, hybrid):
    x, indices, updates = _case(op)
    target = target_for(op, x)
    out = call_in_mode(mode, _callable(op, "function"), op, target, indices, updates)
    assert_same(out.asnumpy(), oracle(op, x, indices, updates))


@pytest.mark.parametrize("kind", ["primitive", "function"])
def test_float16_updates_converted_into_float32_parameter(kind, mode, hybrid):
    op = "ScatterNdAdd"
    x, indices, updates = random_case(_rng("f16"), op, ND_SHAPE, 6, "float32", "int32")
    updates16 = (updates * 1.37).astype(np.float16)
    p = Parameter(Tensor(x), name="p")
    out = call_in_mode(mode, _callable(op, kind), op, p, indices, updates16)
    expected = oracle(op, x, indices, updates16.astype(np.float32))
    assert out.dtype == ms.float32
    assert_same(out.asnumpy(), expected)
    assert_same(p.asnumpy(), expected)


@pytest.mark.parametrize("op,x_dtype,updates_dtype,error,match", [
    ("TensorScatterAdd", "float32", "float16", TypeError, "For 'TensorScatterAdd', the dtype of 'updates' must be"),
    ("ScatterSub", "int32", "float32", TypeError, "Data type conversion is not supported for a 'Parameter'"),
    ("ScatterNdMax", "float32", "float32", ValueError, "For 'ScatterNdMax', the shape of 'updates' must be"),
])
def test_inference_errors_as_on_the_aot_path(op, x_dtype, updates_dtype, error, match, mode, hybrid):
    x, indices, updates = random_case(_rng(op), op, SCATTER_SHAPE if op == "ScatterSub" else ND_SHAPE, 6, x_dtype,
                                      "int32")
    updates = updates.astype(updates_dtype)
    if error is ValueError:
        updates = updates[:2]
    target = target_for(op, x)
    with pytest.raises(error, match=match):
        call_in_mode(mode, _callable(op, "primitive"), op, target, indices, updates)
    assert_unchanged(target, x)


EDGE_CASES = {  # op: x, indices, updates
    "0-d indices": ("ScatterUpdate", np.arange(15, dtype=np.float32).reshape(5, 3), np.array(2, np.int32),
                    np.array([7, 8, 9], np.float32)),
    "no index": ("ScatterAdd", np.ones((4, 3), np.float32), np.zeros((0,), np.int32), np.zeros((0, 3), np.float32)),
    "depth 0": ("ScatterNdDiv", np.full((2, 3), 12, np.int32), np.zeros((2, 0), np.int64),
                np.array([[[2, 3, 4], [1, 2, 3]], [[1, 5, 1], [2, 2, -2]]], np.int32)),
    "1-d x": ("ScatterMax", np.ones((7,), np.float32), np.array([1, 1, 6], np.int64), np.array([3, 2, 3], np.float32)),
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_edge_shapes(case, mode, hybrid):
    op, x, indices, updates = EDGE_CASES[case]
    p = Parameter(Tensor(x), name="p")
    out = call_in_mode(mode, _callable(op, "primitive"), op, p, indices, updates)
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected)
    assert_same(p.asnumpy(), expected)


# ------------------------------------------------------------------ the policies

def _aot_message(op, x, indices, updates, code):
    """The aot CPU kernel's message for the same call (ctypes, no MindSpore)."""
    rc, _, _ = call_kernel(op, x, indices, updates, "tensor" if not in_place(op) else "token")
    assert rc == code
    return ms_scatter.last_error()[1]


def _with_bad_index(op, value_of, where):
    x, indices, updates = _case(op)
    depth = 1 if split_op(op)[0] == "Scatter" else indices.shape[-1]
    value = value_of(x.shape[where % depth])
    if not np.iinfo(indices.dtype).min <= value <= np.iinfo(indices.dtype).max:
        indices = indices.astype(np.int64)
    indices.reshape(-1)[where] = value
    return x, indices, updates


INDEX_ERRORS = [  # op, kind, bad value from the dimension's size, flat position in indices
    ("ScatterAdd", "primitive", lambda n: n, 3),
    ("ScatterMul", "function", lambda n: -1, 0),
    ("ScatterNdMin", "primitive", lambda n: -n, 5),
    ("ScatterNdUpdate", "function", lambda n: 2 ** 40 + 1, 11),
    ("TensorScatterSub", "primitive", lambda n: n, 1),
    ("TensorScatterMax", "function", lambda n: -1, 10),
]


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("op,kind,bad,where", INDEX_ERRORS, ids=[f"{c[0]}-{c[1]}" for c in INDEX_ERRORS])
def test_index_error_pynative_same_message_as_aot(op, kind, bad, where, mode, hybrid):
    x, indices, updates = _with_bad_index(op, bad, where)
    expected = _aot_message(op, x, indices, updates, INDEX_OUT_OF_RANGE)
    fn = _callable(op, kind)
    target = target_for(op, x)
    with pytest.raises(ms_scatter.ScatterIndexError) as info:
        call_in_mode(mode, fn, op, target, indices, updates)
    assert str(info.value) == expected
    assert isinstance(info.value, IndexError) and isinstance(info.value, RuntimeError)
    assert_unchanged(target, x)
    good = indices.copy()
    good.reshape(-1)[where] = 0
    out = call_in_mode(mode, fn, op, target, good, updates)  # the same callable and target still work
    assert_same(out.asnumpy(), oracle(op, x, good, updates))


ZERO_DIVISIONS = [("ScatterDiv", "primitive", "int32"), ("ScatterNdDiv", "function", "int8"),
                  ("TensorScatterDiv", "primitive", "uint8")]


def _with_zero_divisor(op, dtype):
    family = split_op(op)[0]
    x, indices, updates = random_case(_rng(("zero", op)), op, SCATTER_SHAPE if family == "Scatter" else ND_SHAPE,
                                      6, dtype, "int64")
    updates.reshape(-1)[4] = 0
    return x, indices, updates


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("op,kind,dtype", ZERO_DIVISIONS)
def test_zero_division_pynative_same_message_as_aot(op, kind, dtype, mode, hybrid):
    x, indices, updates = _with_zero_divisor(op, dtype)
    expected = _aot_message(op, x, indices, updates, DIVISION_BY_ZERO)
    target = target_for(op, x)
    with pytest.raises(ms_scatter.ScatterZeroDivisionError) as info:
        call_in_mode(mode, _callable(op, kind), op, target, indices, updates)
    assert str(info.value) == expected
    assert isinstance(info.value, ZeroDivisionError)
    assert_unchanged(target, x)


GRAPH_ERRORS = [("ScatterAdd", "primitive", "index"), ("ScatterNdUpdate", "function", "index"),
                ("TensorScatterMax", "primitive", "index"), ("ScatterDiv", "function", "zero"),
                ("TensorScatterDiv", "function", "zero")]


def _graph_error_case(op, what):
    if what == "index":
        return _with_bad_index(op, lambda n: n + 2, 3), INDEX_OUT_OF_RANGE
    return _with_zero_divisor(op, "int32"), DIVISION_BY_ZERO


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("op,kind,what", GRAPH_ERRORS)
def test_error_graph_fails_the_step(op, kind, what, mode, hybrid, capfd):
    (x, indices, updates), code = _graph_error_case(op, what)
    fn = _callable(op, kind)
    target = target_for(op, x)
    count = ms_scatter.last_error()[2]
    with pytest.raises(RuntimeError, match="assert failed"):
        call_in_mode(mode, fn, op, target, indices, updates)
    assert f"[{code} " in capfd.readouterr().out  # Assert prints [code position value]
    assert ms_scatter.last_error()[2] == count  # no aot kernel ran
    assert_unchanged(target, x)
    if what == "index":
        indices.reshape(-1)[3] = 0
    else:
        updates.reshape(-1)[4] = 1
    out = call_in_mode(mode, fn, op, target, indices, updates)  # a fresh Cell on the same target
    assert_same(out.asnumpy(), oracle(op, x, indices, updates))


class _AscendGraph(nn.Cell):
    """The graph the Ascend target builds (GraphScatter with target "Ascend": no Assert)."""

    def __init__(self, op, x):
        super().__init__()
        self.p = Parameter(Tensor(x), name="p")
        self.scatter = _ascend.GraphScatter(op, split_op(op)[0], target="Ascend")

    def construct(self, indices, updates):
        return self.scatter(self.p, indices, updates)


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("op,what", [("ScatterAdd", "index"), ("ScatterNdUpdate", "index"), ("ScatterDiv", "zero")])
def test_ascend_graph_invalid_call_writes_nothing(op, what, mode, hybrid):
    (x, indices, updates), _ = _graph_error_case(op, what)
    if what == "index":
        x, updates = x.astype(np.float32), updates.astype(np.float32)  # dtypes registered for Ascend
    net = _AscendGraph(op, x)
    assert not net.scatter.use_assert
    out = net(Tensor(indices), Tensor(updates))  # no error: gated
    assert_unchanged(net.p, x)
    assert_same(out.asnumpy(), x)
    if what == "index":
        indices.reshape(-1)[3] = 0
    else:
        updates.reshape(-1)[4] = 1
    net = _AscendGraph(op, x)
    out = net(Tensor(indices), Tensor(updates))
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected)
    assert_same(net.p.asnumpy(), expected)


# ------------------------------------------------------------------ the switch

def test_default_is_aot_on_cpu(monkeypatch):
    monkeypatch.delenv(_ascend.ENV, raising=False)
    assert not _ascend.use_hybrid() and not _ascend.hybrid_selected()
    prim = ms_scatter.ScatterAdd()
    assert prim.func_type == "aot" and prim._hybrid is None  # pylint: disable=protected-access
    assert _ascend.use_hybrid("Ascend")


def test_switch_read_at_construction(monkeypatch):
    monkeypatch.setenv(_ascend.ENV, "hybrid")
    hybrid_prim = ms_scatter.TensorScatterAdd()
    monkeypatch.setenv(_ascend.ENV, "auto")
    aot_prim = ms_scatter.TensorScatterAdd()
    assert hybrid_prim.func_type == "hybrid" and aot_prim.func_type == "aot"
    assert not _ascend.hybrid_selected()  # the functions follow the setting of the moment
    x, indices, updates = _case("TensorScatterAdd")
    expected = oracle("TensorScatterAdd", x, indices, updates)
    for prim in (hybrid_prim, aot_prim):
        assert_same(prim(Tensor(x), Tensor(indices), Tensor(updates)).asnumpy(), expected)


def test_bad_setting(monkeypatch):
    monkeypatch.setenv(_ascend.ENV, "tbe")
    with pytest.raises(ValueError, match="MS_SCATTER_KERNELS must be one of auto, hybrid, but got 'tbe'"):
        ms_scatter.ScatterAdd()


def test_ascend_dtype_registration_enforced():
    shapes = ((5, 3), (2,), (2, 3))
    with pytest.raises(TypeError, match="on Ascend the hybrid kernels are registered for input_x of"):
        _ascend.static_plan("ScatterAdd", "Scatter", True, *shapes, "int8", "int32", "int8", ascend=True)
    for dtype in ("float16", "float32", "int32", "uint8"):
        _ascend.static_plan("ScatterAdd", "Scatter", True, *shapes, dtype, "int64", dtype, ascend=True)
    _ascend.static_plan("ScatterAdd", "Scatter", True, *shapes, "int8", "int32", "int8", ascend=False)
    with pytest.raises(ValueError, match="the hybrid kernels need static shapes"):
        _ascend.static_plan("ScatterAdd", "Scatter", True, (-1, 3), (2,), (2, 3), "float32", "int32", "float32")
