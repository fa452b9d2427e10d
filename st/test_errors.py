"""Every error path, each leaving the Parameter (or TensorScatter's input_x) exactly as
it was, byte for byte; after an error a following valid call still works.

PYNATIVE: the kernel's errors are raised as ms_scatter.ScatterIndexError (also an
IndexError and a RuntimeError) / ScatterZeroDivisionError (also a ZeroDivisionError and a
RuntimeError) with the kernel's message. GRAPH / jit: MindSpore raises its generic
RuntimeError for the kernel's return code; ms_scatter.last_error() has the message. A
graph whose kernel failed is not run again by MindSpore (the same holds for its built-in
scatter ops), so in GRAPH mode the following valid call uses a fresh Cell on the same
Parameter. Inference errors (TypeError, ValueError) happen before anything runs.
"""
import re

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, ops

import ms_scatter
from ms_scatter import infer
from ms_scatter._lib import DIVISION_BY_ZERO, INDEX_OUT_OF_RANGE
from ms_scatter.testing import oracle

from .helpers import (assert_same, assert_unchanged, call_in_mode, callable_for, in_place,
                      settle_pynative_signature, target_for)

FAMILIES = ("Scatter", "ScatterNd", "TensorScatter")
KINDS = ("primitive", "function")
IN_PLACE_OPS = [op for op in ms_scatter.primitives.PRIMITIVES if in_place(op)]
PARAM_CONVERSION = "Data type conversion is not supported for a 'Parameter'"
ROWS_HINT = "To index rows with a 1-D tensor, pass indices.reshape(-1, 1)."


def _values(rng, shape, dtype):
    """Random values of `dtype`, never zero (safe for integer Div, any reduction)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        v = rng.standard_normal(shape) * 3
        return np.where(np.abs(v) < 0.25, 1.5, v).astype(dtype)
    return rng.integers(1, 6, size=shape).astype(dtype)


def _valid_case(family, rng, dtype="float32", index_dtype="int32"):
    """x, indices, updates; Scatter: x (5, 3), indices (3, 3); ScatterNd/TensorScatter:
    x (5, 4, 3), indices (3, 2, 2) (depth 2)."""
    if family == "Scatter":
        x_shape, indices = (5, 3), rng.integers(0, 5, size=(3, 3))
        u_shape = (3, 3, 3)
    else:
        x_shape = (5, 4, 3)
        indices = np.stack([rng.integers(0, 5, size=(3, 2)), rng.integers(0, 4, size=(3, 2))], axis=-1)
        u_shape = (3, 2, 3)
    return _values(rng, x_shape, dtype), indices.astype(index_dtype), _values(rng, u_shape, dtype)


# ------------------------------------------------------------------ out-of-range indices

POSITIONS = {"Scatter": {"first": (0, 0), "middle": (1, 1), "last": (2, 2)},
             "ScatterNd": {"first": (0, 0, 0), "middle": (1, 0, 1), "last": (2, 1, 1)}}
BAD_VALUES = ("N", "huge", "-1", "-N")
ROTATE_DTYPES = ("float32", "int32", "float16", "int64", "uint8", "float64", "int8", "int16")


def _oob_case(op, position, bad, n):
    """A valid case with one index made out of range. Returns (x, indices, updates,
    value, position, dimension size N)."""
    family = ms_scatter.testing.split_op(op)[0]
    rng = np.random.default_rng(1000 + n)
    index_dtype = ("int32", "int64")[n % 2]
    x, indices, updates = _valid_case(family, rng, ROTATE_DTYPES[n % len(ROTATE_DTYPES)], index_dtype)
    pos = POSITIONS["Scatter" if family == "Scatter" else "ScatterNd"][position]
    dim = 0 if family == "Scatter" else pos[-1]
    size = x.shape[dim]
    huge = 2 ** 31 - 1 if index_dtype == "int32" else 2 ** 32 + 1  # 2**32 + 1 wraps to 1 in 32 bits
    value = {"N": size, "huge": huge, "-1": -1, "-N": -size}[bad]
    indices[pos] = value
    return x, indices, updates, value, pos, size


def _oob_params():
    params = []
    n = 0
    for family in FAMILIES:
        for kind in KINDS:
            for position in ("first", "middle", "last"):
                for bad in BAD_VALUES:
                    op = family + infer.REDUCTIONS[n % 7]
                    params.append(pytest.param(op, kind, position, bad, n, id=f"{op}-{kind}-{position}-{bad}"))
                    n += 1
    return params


def _check_message(message, op, value, pos, size):
    assert f"'{op}'" in message
    assert f"got {value} " in message
    assert f"position {pos}" in message  # e.g. "(1, 0, 1)", numpy's tuple notation
    assert f"[0, {size})" in message


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("op, kind, position, bad, n", _oob_params())
def test_out_of_range_index_pynative(mode, op, kind, position, bad, n):
    x, indices, updates, value, pos, size = _oob_case(op, position, bad, n)
    fn = callable_for(op, kind)
    target = target_for(op, x)
    before = ms_scatter.last_error()[2]
    with pytest.raises(ms_scatter.ScatterIndexError) as info:
        fn(target, Tensor(indices), Tensor(updates))
    err = info.value
    assert isinstance(err, IndexError) and isinstance(err, RuntimeError)
    _check_message(str(err), op, value, pos, size)
    code, message, count = ms_scatter.last_error()
    assert (code, message, count) == (INDEX_OUT_OF_RANGE, str(err), before + 1)
    assert_unchanged(target, x)
    # the same callable on the same target still works
    indices[pos] = 0
    out = fn(target, Tensor(indices), Tensor(updates))
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected)
    if in_place(op):
        assert_same(target.asnumpy(), expected)
    else:
        assert_unchanged(target, x)


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("catch_as", [IndexError, RuntimeError, ms_scatter.ScatterIndexError])
@pytest.mark.parametrize("kind", KINDS)
def test_index_error_catchable_as(mode, catch_as, kind):
    x, indices, updates, *_ = _oob_case("ScatterAdd", "middle", "N", 1)
    p = Parameter(Tensor(x), name="p")
    try:
        callable_for("ScatterAdd", kind)(p, Tensor(indices), Tensor(updates))
    except catch_as:
        pass
    else:
        pytest.fail("no error")
    assert_unchanged(p, x)


GRAPH_OOB = [("ScatterAdd", "primitive", "middle", "N", 0), ("ScatterNdMul", "function", "last", "-1", 1),
             ("TensorScatterMax", "primitive", "first", "huge", 3), ("TensorScatterUpdate", "function", "middle", "-N", 2),
             ("ScatterDiv", "function", "first", "-1", 4), ("ScatterNdMin", "primitive", "last", "huge", 5)]


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("op, kind, position, bad, n", GRAPH_OOB)
def test_out_of_range_index_graph(mode, op, kind, position, bad, n):
    x, indices, updates, value, pos, size = _oob_case(op, position, bad, n)
    fn = callable_for(op, kind)
    target = target_for(op, x)
    before = ms_scatter.last_error()[2]
    with pytest.raises(RuntimeError):
        call_in_mode(mode, fn, op, target, indices, updates)
    code, message, count = ms_scatter.last_error()
    assert code == INDEX_OUT_OF_RANGE and count == before + 1
    _check_message(message, op, value, pos, size)
    assert_unchanged(target, x)
    indices[pos] = 0
    out = call_in_mode(mode, fn, op, target, indices, updates)  # a fresh Cell, same Parameter
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected)
    if in_place(op):
        assert_same(target.asnumpy(), expected)


@pytest.mark.parametrize("mode", ["JIT"], indirect=True)
@pytest.mark.parametrize("op, position, bad, n", [("ScatterSub", "last", "-N", 6), ("TensorScatterAdd", "middle", "N", 7)])
def test_out_of_range_index_jit(mode, op, position, bad, n):
    x, indices, updates, value, pos, size = _oob_case(op, position, bad, n)
    fn = callable_for(op, "function")
    target = target_for(op, x)
    with pytest.raises(RuntimeError):
        call_in_mode(mode, fn, op, target, indices, updates)
    _check_message(ms_scatter.last_error()[1], op, value, pos, size)
    assert_unchanged(target, x)
    indices[pos] = 0
    assert_same(call_in_mode(mode, fn, op, target, indices, updates).asnumpy(), oracle(op, x, indices, updates))


@pytest.mark.parametrize("quiet", [False, True])
def test_kernel_message_once(mode, quiet, monkeypatch, capfd):
    """PYNATIVE: the exception carries the message, and nothing is printed (one message per
    error). GRAPH: MindSpore raises its generic error, so the kernel prints the message to
    stderr, unless MS_SCATTER_QUIET=1."""
    if quiet:
        monkeypatch.setenv("MS_SCATTER_QUIET", "1")
    else:
        monkeypatch.delenv("MS_SCATTER_QUIET", raising=False)
    x, indices, updates, value, pos, size = _oob_case("ScatterNdAdd", "middle", "N", 9)
    p = Parameter(Tensor(x), name="p")
    capfd.readouterr()
    with pytest.raises(RuntimeError) as info:
        call_in_mode(mode, ms_scatter.ScatterNdAdd(), "ScatterNdAdd", p, indices, updates)
    err = capfd.readouterr().err
    message = ms_scatter.last_error()[1]
    _check_message(message, "ScatterNdAdd", value, pos, size)
    line = f"[ms_scatter] error {INDEX_OUT_OF_RANGE}: {message}"
    if mode == "PYNATIVE":
        assert isinstance(info.value, ms_scatter.ScatterIndexError) and str(info.value) == message
        assert "[ms_scatter]" not in err, err
    else:
        assert (line in err) is not quiet, err
    assert_unchanged(p, x)


# ------------------------------------------------------------------ integer division by zero

def _div_params():
    params = []
    n = 0
    for family in FAMILIES:
        for kind in KINDS:
            for where in ("first", "last"):
                dtype = ("int32", "int8", "uint8", "int64", "int16")[n % 5]
                params.append(pytest.param(family + "Div", kind, where, dtype, n,
                                           id=f"{family}Div-{kind}-{where}-{dtype}"))
                n += 1
    return params


def _div_case(op, where, dtype, n):
    family = ms_scatter.testing.split_op(op)[0]
    rng = np.random.default_rng(2000 + n)
    x, indices, updates = _valid_case(family, rng, dtype, ("int64", "int32")[n % 2])
    pos = (0,) * updates.ndim if where == "first" else tuple(d - 1 for d in updates.shape)
    updates[pos] = 0
    return x, indices, updates, pos


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("op, kind, where, dtype, n", _div_params())
def test_integer_division_by_zero_pynative(mode, op, kind, where, dtype, n):
    x, indices, updates, pos = _div_case(op, where, dtype, n)
    fn = callable_for(op, kind)
    target = target_for(op, x)
    before = ms_scatter.last_error()[2]
    with pytest.raises(ms_scatter.ScatterZeroDivisionError) as info:
        fn(target, Tensor(indices), Tensor(updates))
    err = info.value
    assert isinstance(err, ZeroDivisionError) and isinstance(err, RuntimeError)
    assert f"'{op}'" in str(err) and "division by zero" in str(err) and f"position {pos}" in str(err)
    assert ms_scatter.last_error() == (DIVISION_BY_ZERO, str(err), before + 1)
    assert_unchanged(target, x)
    updates[pos] = 1
    out = fn(target, Tensor(indices), Tensor(updates))
    assert_same(out.asnumpy(), oracle(op, x, indices, updates))


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("op, kind, where, dtype, n", [("ScatterDiv", "primitive", "last", "int32", 0),
                                                       ("TensorScatterDiv", "function", "first", "int16", 1)])
def test_integer_division_by_zero_graph(mode, op, kind, where, dtype, n):
    x, indices, updates, pos = _div_case(op, where, dtype, n)
    fn = callable_for(op, kind)
    target = target_for(op, x)
    with pytest.raises(RuntimeError):
        call_in_mode(mode, fn, op, target, indices, updates)
    code, message, _ = ms_scatter.last_error()
    assert code == DIVISION_BY_ZERO and f"'{op}'" in message
    assert_unchanged(target, x)
    updates[pos] = 1
    assert_same(call_in_mode(mode, fn, op, target, indices, updates).asnumpy(), oracle(op, x, indices, updates))


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_index_error_reported_before_division_by_zero(mode):
    x, indices, updates, pos = _div_case("ScatterNdDiv", "first", "int32", 3)
    indices[-1, -1, 0] = 5
    p = Parameter(Tensor(x), name="p")
    with pytest.raises(ms_scatter.ScatterIndexError):
        ms_scatter.scatter_nd_div(p, Tensor(indices), Tensor(updates))
    assert_unchanged(p, x)


# ------------------------------------------------------------------ inference errors

BAD_INDEX_DTYPES = ("float32", "float64", "int16", "uint8", "int8", "float16")


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("index_dtype", BAD_INDEX_DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_bad_index_dtype_pynative(mode, family, kind, index_dtype):
    _check_bad_index_dtype(mode, family, kind, index_dtype)


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("family, kind", [("Scatter", "primitive"), ("ScatterNd", "function"),
                                          ("TensorScatter", "primitive")])
def test_bad_index_dtype_graph(mode, family, kind):
    _check_bad_index_dtype(mode, family, kind, "float32")


def _check_bad_index_dtype(mode, family, kind, index_dtype):
    op = family + "Add"
    rng = np.random.default_rng(3)
    x, indices, updates = _valid_case(family, rng)
    fn = callable_for(op, kind)
    target = target_for(op, x)
    with pytest.raises(TypeError, match=f"For '{op}', the dtype of 'indices' must be int32 or int64, "
                                        f"but got {index_dtype}"):
        call_in_mode(mode, fn, op, target, indices.astype(index_dtype), updates)
    assert_unchanged(target, x)
    out = call_in_mode(mode, fn, op, target, indices, updates)  # a valid call afterwards
    assert_same(out.asnumpy(), oracle(op, x, indices, updates))


@pytest.mark.parametrize("value", [1, 0, "True", None, 1.0, np.bool_(True)])
@pytest.mark.parametrize("op", IN_PLACE_OPS)
def test_use_locking_must_be_bool(op, value):
    with pytest.raises(TypeError, match=f"For '{op}', 'use_locking' must be a bool"):
        getattr(ms_scatter, op)(use_locking=value)
    assert getattr(ms_scatter, op)(use_locking=False).use_locking is False


def _wrong_shapes(family):
    """(indices shape, x shape, wrong updates shape) triples."""
    if family == "Scatter":
        return [((3, 3), (5, 3), (3, 3, 2)), ((3, 3), (5, 3), (3, 3)), ((4,), (5, 3), (4, 3, 1))]
    return [((3, 2, 2), (5, 4, 3), (3, 2, 4)), ((3, 2, 2), (5, 4, 3), (3, 3)), ((3, 1), (5, 4, 3), (3, 3))]


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("shape_number", [0, 1, 2])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_wrong_updates_shape_pynative(mode, family, kind, shape_number):
    _check_wrong_updates_shape(mode, family, kind, shape_number)


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("family, kind, shape_number", [("Scatter", "primitive", 0), ("ScatterNd", "function", 1),
                                                        ("TensorScatter", "function", 2)])
def test_wrong_updates_shape_graph(mode, family, kind, shape_number):
    _check_wrong_updates_shape(mode, family, kind, shape_number)


def _check_wrong_updates_shape(mode, family, kind, shape_number):
    op = family + "Mul"
    idx_shape, x_shape, u_shape = _wrong_shapes(family)[shape_number]
    rng = np.random.default_rng(shape_number)
    x = _values(rng, x_shape, "float32")
    indices = np.zeros(idx_shape, np.int32)
    target = target_for(op, x)
    fn = callable_for(op, kind)
    with pytest.raises(ValueError, match=f"For '{op}', the shape of 'updates' must be"):
        call_in_mode(mode, fn, op, target, indices, _values(rng, u_shape, "float32"))
    assert_unchanged(target, x)
    updates = _values(rng, idx_shape[:-1] + x_shape[idx_shape[-1]:] if family != "Scatter"
                      else idx_shape + x_shape[1:], "float32")
    out = call_in_mode(mode, fn, op, target, indices, updates)  # a valid call afterwards
    assert_same(out.asnumpy(), oracle(op, x, indices, updates))


def _bad_rank_case(case):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    if case == "indices-rank-1":
        return x, np.array([0, 1], np.int32), np.ones((2, 3), np.float32), "the rank of 'indices' must be >= 2"
    return (x, np.array([[0, 1, 1]], np.int32), np.ones((1,), np.float32),
            "the last dimension of 'indices' must be <= the rank of 'input_x'")


@pytest.mark.parametrize("case", ["indices-rank-1", "depth-above-rank"])
@pytest.mark.parametrize("kind", KINDS)
def test_tensor_scatter_max_bad_indices_rank(mode, kind, case):
    x, indices, updates, text = _bad_rank_case(case)
    target = Tensor(x)
    fn = callable_for("TensorScatterMax", kind)
    with pytest.raises(ValueError, match=f"For 'TensorScatterMax', {text}"):
        call_in_mode(mode, fn, "TensorScatterMax", target, indices, updates)
    assert_unchanged(target, x)
    good_indices, good_updates = np.array([[0, 1], [3, 2]], np.int32), np.array([5.0, 50.0], np.float32)
    out = call_in_mode(mode, fn, "TensorScatterMax", target, good_indices, good_updates)  # a valid call afterwards
    assert_same(out.asnumpy(), oracle("TensorScatterMax", x, good_indices, good_updates))


@pytest.mark.parametrize("kind", KINDS)
def test_scatter_nd_depth_above_rank(mode, kind):
    x, indices, updates, text = _bad_rank_case("depth-above-rank")
    p = Parameter(Tensor(x), name="p")
    with pytest.raises(ValueError, match=f"For 'ScatterNdAdd', {text}"):
        call_in_mode(mode, callable_for("ScatterNdAdd", kind), "ScatterNdAdd", p, indices, updates)
    assert_unchanged(p, x)


# 1-D indices (N,) where (N, 1) is meant: TensorScatter* refuse the rank, ScatterNd* read one
# index vector of depth N. (op, the error's own text before the hint)
ONE_DIMENSIONAL_INDICES = [
    ("TensorScatterMax", "the rank of 'indices' must be >= 2, but got 1 (shape (2,))."),
    ("ScatterNdAdd", "the shape of 'updates' must be indices.shape[:-1] + input_x.shape[indices.shape[-1]:] = () "
                     "(indices (2,), input_x (4, 3)), but got (2, 3)."),
]


@pytest.mark.parametrize("op, text", ONE_DIMENSIONAL_INDICES, ids=[op for op, _ in ONE_DIMENSIONAL_INDICES])
@pytest.mark.parametrize("kind", KINDS)
def test_one_dimensional_indices_hint(mode, kind, op, text):
    """The error ends with the fix, the same in PYNATIVE and GRAPH (compile time), and the
    fix it names makes the call valid."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    indices, updates = np.array([0, 2], np.int32), np.full((2, 3), 50.0, np.float32)
    target = target_for(op, x)
    fn = callable_for(op, kind)
    with pytest.raises(ValueError, match=rf"^For '{op}', {re.escape(text)} {re.escape(ROWS_HINT)}$"):
        call_in_mode(mode, fn, op, target, indices, updates)
    assert_unchanged(target, x)
    rows = indices.reshape(-1, 1)
    out = call_in_mode(mode, fn, op, target, rows, updates)  # the hint's fix
    assert_same(out.asnumpy(), oracle(op, x, rows, updates))


@pytest.mark.parametrize("op, indices, updates_shape", [("TensorScatterMax", [0, 2], (3, 3)),
                                                        ("ScatterNdAdd", [0, 2, 1], (3,))])
def test_one_dimensional_indices_no_hint_where_reshape_fails(mode, op, indices, updates_shape):
    """No hint where indices.reshape(-1, 1) would still not fit the updates."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    target = target_for(op, x)
    with pytest.raises(ValueError, match=rf"^For '{op}', ") as info:
        call_in_mode(mode, callable_for(op, "function"), op, target, np.array(indices, np.int32),
                     np.ones(updates_shape, np.float32))
    assert "reshape" not in str(info.value) and str(info.value).endswith(")."), str(info.value)
    assert_unchanged(target, x)


# ------------------------------------------------------------------ implicit dtype conversion

CONVERSIONS = [("int32", "float32"), ("float32", "float64"), ("int8", "int32"), ("float16", "float32"),
               ("uint8", "int8"), ("float32", "float16"), ("float64", "int32"), ("int16", "uint8"),
               ("float32", "int64"), ("int64", "int8")]


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("x_dtype, u_dtype", CONVERSIONS)
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdMax"])
def test_implicit_conversion_as_builtin(mode, op, x_dtype, u_dtype):
    """Where MindSpore's own ScatterAdd converts updates, ours converts and applies them;
    where it refuses (the Parameter would need converting), ours refuses the same way."""
    rng = np.random.default_rng(5)
    x, indices, _ = _valid_case(ms_scatter.testing.split_op(op)[0], rng, x_dtype)
    updates = _values(rng, indices.shape[:-1] + x.shape[2:] if op == "ScatterNdMax" else indices.shape + x.shape[1:],
                      u_dtype)
    try:
        builtin = ops.ScatterAdd()(Parameter(Tensor(x[:2]), name="b"), Tensor(np.array([0, 1], np.int32)),
                                   Tensor(_values(rng, (2,) + x.shape[1:], u_dtype)))
        builtin_converts = builtin.dtype == getattr(ms, x_dtype)
    except TypeError as err:
        assert PARAM_CONVERSION in str(err)
        builtin_converts = False
    p = Parameter(Tensor(x), name="p")
    settle_pynative_signature(in_place_kind=True)
    if builtin_converts:
        out = callable_for(op, "primitive")(p, Tensor(indices), Tensor(updates))
        expected = oracle(op, x, indices, updates.astype(x_dtype))
        assert_same(out.asnumpy(), expected)
        assert_same(p.asnumpy(), expected)
    else:
        with pytest.raises(TypeError, match=PARAM_CONVERSION):
            callable_for(op, "primitive")(p, Tensor(indices), Tensor(updates))
        assert_unchanged(p, x)


@pytest.mark.parametrize("kind", KINDS)
def test_int32_parameter_float32_updates_type_error(mode, kind):
    rng = np.random.default_rng(8)
    x, indices, updates = _valid_case("Scatter", rng, "int32")
    p = Parameter(Tensor(x), name="p")
    fn = callable_for("ScatterSub", kind)
    if mode == "PYNATIVE":
        settle_pynative_signature(in_place_kind=True)
    with pytest.raises(TypeError) as info:
        call_in_mode(mode, fn, "ScatterSub", p, indices, updates.astype(np.float32))
    text = str(info.value)
    assert PARAM_CONVERSION in text
    assert "is Int32, which cannot be converted to data type Float32 automatically" in text
    assert "ops.cast" not in text  # a cast hint only for a float into a float Parameter
    assert_unchanged(p, x)
    out = call_in_mode(mode, fn, "ScatterSub", p, indices, updates)
    assert_same(out.asnumpy(), oracle("ScatterSub", x, indices, updates))


@pytest.mark.parametrize("family", ["Scatter", "ScatterNd"])
@pytest.mark.parametrize("kind", KINDS)
def test_float64_updates_into_float32_parameter_hint(mode, kind, family):
    """Refused (the Parameter would need converting), with the cast that fixes the call, the
    same in PYNATIVE and GRAPH (compile time); the cast it names works."""
    op = family + "Add"
    rng = np.random.default_rng(11)
    x, indices, updates = _valid_case(family, rng, "float32")
    updates64 = updates.astype(np.float64) * 1.37
    p = Parameter(Tensor(x), name="p")
    fn = callable_for(op, kind)
    if mode == "PYNATIVE":
        settle_pynative_signature(in_place_kind=True)
    message = (f"For '{op}', {PARAM_CONVERSION}, nor for the input tensor of an in-place operator, the "
               f"argument[input_x]'s data type of primitive[{op}] is Float32, which cannot be converted to data type "
               f"Float64 automatically. Cast the updates: ops.cast(updates, mindspore.float32).")
    with pytest.raises(ms_scatter.ScatterTypeError, match=f"^{re.escape(message)}$"):
        call_in_mode(mode, fn, op, p, indices, updates64)
    assert_unchanged(p, x)
    out = call_in_mode(mode, fn, op, p, indices, ops.cast(Tensor(updates64), ms.float32))  # the hint's fix
    expected = oracle(op, x, indices, updates64.astype(np.float32))
    assert_same(out.asnumpy(), expected)
    assert_same(p.asnumpy(), expected)


@pytest.mark.parametrize("family", ["Scatter", "ScatterNd"])
@pytest.mark.parametrize("kind", KINDS)
def test_float16_updates_into_float32_parameter(mode, kind, family):
    op = family + "Add"
    rng = np.random.default_rng(9)
    x, indices, updates = _valid_case(family, rng, "float32")
    updates16 = (updates * 1.37).astype(np.float16)  # not exactly representable in float16 before
    p = Parameter(Tensor(x), name="p")
    if mode == "PYNATIVE":
        settle_pynative_signature(in_place_kind=True)
    out = call_in_mode(mode, callable_for(op, kind), op, p, indices, updates16)
    expected = oracle(op, x, indices, updates16.astype(np.float32))
    assert out.dtype == ms.float32 and p.dtype == ms.float32
    assert_same(out.asnumpy(), expected)
    assert_same(p.asnumpy(), expected)


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_tensor_scatter_updates_dtype_must_match(mode):
    """TensorScatter* convert nothing (nor does MindSpore's TensorScatterAdd): a TypeError."""
    rng = np.random.default_rng(10)
    x, indices, updates = _valid_case("TensorScatter", rng, "float32")
    t = Tensor(x)
    settle_pynative_signature(in_place_kind=False)
    with pytest.raises(TypeError, match="For 'TensorScatterAdd', the dtype of 'updates' must be"):
        ms_scatter.tensor_scatter_add(t, Tensor(indices), Tensor(updates.astype(np.float16)))
    assert_unchanged(t, x)


# ------------------------------------------------------------------ call history
# In PYNATIVE, MindSpore caches one signature per primitive name and every Custom op is
# named "Custom"; ms_scatter does the implicit conversion itself so that it does not
# depend on which ms_scatter call came first.


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_conversion_into_parameter_independent_of_call_history(mode):
    """float16 updates into a float32 Parameter are converted, also after a TensorScatter call."""
    settle_pynative_signature(in_place_kind=False)  # i.e. a TensorScatter call came first
    rng = np.random.default_rng(12)
    x, indices, updates = _valid_case("Scatter", rng, "float32")
    p = Parameter(Tensor(x), name="p")
    updates16 = updates.astype(np.float16)
    out = ms_scatter.ScatterAdd()(p, Tensor(indices), Tensor(updates16))
    assert_same(out.asnumpy(), oracle("ScatterAdd", x, indices, updates16.astype(np.float32)))


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_tensor_scatter_no_conversion_independent_of_call_history(mode):
    """tensor_scatter_add(int32 x, float32 updates) is a TypeError, also after an in-place
    call (instead it converts x and returns float32)."""
    settle_pynative_signature(in_place_kind=True)  # i.e. an in-place call came first
    rng = np.random.default_rng(13)
    x, indices, updates = _valid_case("TensorScatter", rng, "int32")
    with pytest.raises(TypeError):
        out = ms_scatter.tensor_scatter_add(Tensor(x), Tensor(indices), Tensor(updates.astype(np.float32)))
        assert out.dtype == ms.int32, f"the output dtype became {out.dtype}"


# ------------------------------------------------------------------ Python objects for tensors
@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("case", ["indices-list", "indices-int", "updates-list", "x-numpy", "x-list"])
def test_python_objects_where_tensors_are_expected(mode, case):
    """A list, a Python int or a numpy array in place of a Tensor: TypeError naming the
    argument; the Parameter is untouched."""
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    p = Parameter(Tensor(x), name="p")
    indices, updates = Tensor(np.array([0, 1], np.int32)), Tensor(np.ones((2, 2), np.float32))
    call, target, name = ms_scatter.ScatterAdd(), p, None
    if case == "indices-list":
        indices, name = [0, 1], "indices"
    elif case == "indices-int":
        indices, updates, name = 1, Tensor(np.ones((2,), np.float32)), "indices"
    elif case == "updates-list":
        updates, name = [[1.0, 1.0], [1.0, 1.0]], "updates"
    elif case == "x-numpy":
        call, target, indices, name = ms_scatter.tensor_scatter_add, x, Tensor(np.array([[0]], np.int32)), "input_x"
        updates = Tensor(np.ones((1, 2), np.float32))
    else:
        call, target, indices, name = ms_scatter.tensor_scatter_add, x.tolist(), Tensor(np.array([[0]], np.int32)), \
            "input_x"
        updates = Tensor(np.ones((1, 2), np.float32))
    with pytest.raises(TypeError, match=rf"For '(ScatterAdd|TensorScatterAdd)', '{name}' must be a Tensor, but got"):
        call(target, indices, updates)
    assert_unchanged(p, x)


# ------------------------------------------------------------------ inference memo
@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("op", ["ScatterMax", "TensorScatterMax"])
def test_inference_memo_never_hides_an_error(mode, op):
    """One primitive instance remembers the inference of the signatures it has run: a
    wrong shape or dtype raises on every call, before and after valid calls with other
    signatures, and the Parameter is untouched each time."""
    family = "Scatter" if op == "ScatterMax" else "TensorScatter"
    rng = np.random.default_rng(21)
    x, indices, updates = _valid_case(family, rng)
    target = target_for(op, x)
    prim = getattr(ms_scatter, op)()
    bad_shape = Tensor(_values(rng, updates.shape[:-1] + (updates.shape[-1] + 1,), "float32"))
    bad_dtype = Tensor(updates.astype(np.float64)) if family == "TensorScatter" else None
    expected = x
    for round_ in range(3):
        out = prim(target, Tensor(indices), Tensor(updates))
        expected = oracle(op, expected if family == "Scatter" else x, indices, updates)
        assert_same(out.asnumpy(), expected)
        for _ in range(2):
            with pytest.raises(ValueError, match=f"For '{op}', the shape of 'updates' must be"):
                prim(target, Tensor(indices), bad_shape)
            if bad_dtype is not None:
                with pytest.raises(TypeError, match=f"For '{op}'"):
                    prim(target, Tensor(indices), bad_dtype)
            assert_unchanged(target, expected if family == "Scatter" else x)
