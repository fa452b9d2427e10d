"""The operators through MindSpore against the numpy loop oracle (ms_scatter.testing).

A sampled product, seeded: every one of the 21 primitives and 21 functions runs in
PYNATIVE (8 cases per operator: all 8 value dtypes, both index dtypes, both forms), in
GRAPH mode inside an nn.Cell (each form once per operator) and, for the functions, under
@mindspore.jit (once per operator). Shapes, index depth, number of index vectors and
duplicate indices rotate; some float cases carry NaNs. Each case calls the operator
twice on the same target (the second call sees the first's result), and checks:
  * in-place (Scatter*, ScatterNd*): the returned value and the Parameter afterwards
    both equal the oracle, exactly (NaN == NaN), same dtype and shape;
  * TensorScatter*: the output equals the oracle and input_x is unchanged, byte for byte.
"""
import zlib

import numpy as np
import pytest
from mindspore import Parameter, Tensor

import ms_scatter
from ms_scatter.testing import is_float, oracle, random_case, split_op

from .helpers import (INDEX_DTYPES, OPS, VALUE_DTYPES, Runner, assert_same, assert_unchanged,
                      callable_for, function_name, in_place)

X_SHAPES = [(7,), (6, 3), (5, 2, 3), (4, 3, 2, 2), (9, 4), (3, 5, 2)]
N_INDEX = [1, 5, 8, 12, 20, 6, 3]
KINDS = ("primitive", "function")


def _seed(*parts):
    return zlib.crc32("/".join(str(p) for p in parts).encode())


def _case_params():
    """(mode, op, kind, dtype, index_dtype, case number) of the sampled product."""
    cases = []
    for n, op in enumerate(OPS):
        for j in range(len(VALUE_DTYPES)):  # PYNATIVE: all dtypes per operator, both index dtypes per form
            cases.append(("PYNATIVE", op, KINDS[j % 2], VALUE_DTYPES[(j + n) % len(VALUE_DTYPES)],
                          INDEX_DTYPES[(j // 2 + n) % 2], j))
        for k, kind in enumerate(KINDS):  # GRAPH: each form once per operator
            cases.append(("GRAPH", op, kind, VALUE_DTYPES[(3 * n + 5 * k + 1) % len(VALUE_DTYPES)],
                          INDEX_DTYPES[(n + k) % 2], 100 + k))
        cases.append(("JIT", op, "function", VALUE_DTYPES[(5 * n + 2) % len(VALUE_DTYPES)], INDEX_DTYPES[(n + 1) % 2],
                      102))
    return cases


CASES = _case_params()


def _make_case(op, dtype, index_dtype, j, mode):
    rng = np.random.default_rng(_seed(op, dtype, index_dtype, j, mode))
    family, reduction = split_op(op)
    n_op = OPS.index(op)
    x_shape = X_SHAPES[(n_op + j) % len(X_SHAPES)]
    depth = None if family == "Scatter" else int(rng.integers(1, len(x_shape) + 1))
    n_index = N_INDEX[(2 * n_op + j) % len(N_INDEX)]
    duplicates = j % 4 != 3
    x, i1, u1 = random_case(rng, op, x_shape, n_index, dtype, index_dtype, duplicates, depth)
    _, i2, u2 = random_case(rng, op, x_shape, n_index, dtype, index_dtype, True, depth)
    if is_float(dtype) and j % 3 == 0:  # NaNs on both sides
        x.flat[int(rng.integers(x.size))] = np.nan
        u1.flat[int(rng.integers(u1.size))] = np.nan
        u2.flat[0] = np.nan
    return x, (i1, u1), (i2, u2)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the oracle's float16 cast
@pytest.mark.parametrize(
    "mode, op, kind, dtype, index_dtype, j",
    [pytest.param(*c, id=f"{c[0]}-{c[1]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}") for c in CASES],
    indirect=["mode"])
def test_matches_oracle(mode, op, kind, dtype, index_dtype, j):
    x, (i1, u1), (i2, u2) = _make_case(op, dtype, index_dtype, j, mode)
    original = x.copy()
    runner = Runner(mode, op, kind, x)
    first = oracle(op, x, i1, u1)
    out = runner.run(i1, u1)
    assert_same(out, first, "first output")
    if in_place(op):
        assert_same(runner.target(), first, "Parameter after the first call")
        second = oracle(op, first, i2, u2)
    else:
        assert_unchanged(runner.target_obj, original)
        second = oracle(op, x, i2, u2)
    out = runner.run(i2, u2)
    assert_same(out, second, "second output")
    if in_place(op):
        assert_same(runner.target(), second, "Parameter after the second call")
    else:
        assert_unchanged(runner.target_obj, original)
    assert x.tobytes() == original.tobytes()  # the numpy input itself was not written


def test_sample_covers_every_operator_form_and_mode():
    seen = {(mode, op, kind) for mode, op, kind, *_ in CASES}
    for op in OPS:
        for kind in KINDS:
            assert ("PYNATIVE", op, kind) in seen and ("GRAPH", op, kind) in seen
        assert ("JIT", op, "function") in seen
    for op in OPS:  # every dtype and both index dtypes per operator in PYNATIVE
        pyn = [c for c in CASES if c[0] == "PYNATIVE" and c[1] == op]
        assert {c[3] for c in pyn} == set(VALUE_DTYPES)
        for kind in KINDS:
            assert {c[4] for c in pyn if c[2] == kind} == set(INDEX_DTYPES)
    graph_compiles = sum(1 for c in CASES if c[0] != "PYNATIVE")
    assert graph_compiles <= 80
    assert len(ms_scatter.primitives.PRIMITIVES) == 21 and len(ms_scatter.primitives.FUNCTIONS) == 21
    assert set(ms_scatter.primitives.FUNCTIONS) == {function_name(op) for op in OPS}


@pytest.mark.parametrize("mode", ["JIT"], indirect=True)
@pytest.mark.parametrize("op", ["ScatterMul", "ScatterNdMin", "TensorScatterSub"])
def test_primitive_under_jit_matches_oracle(mode, op):
    x, (i1, u1), (i2, u2) = _make_case(op, "float32", "int64", 1, "JIT-primitive")
    original = x.copy()
    runner = Runner(mode, op, "primitive", x)
    first = oracle(op, x, i1, u1)
    assert_same(runner.run(i1, u1), first)
    if in_place(op):
        assert_same(runner.target(), first)
    else:
        assert_unchanged(runner.target_obj, original)


# ------------------------------------------------------------------ edge values

def _edge_cases():
    """{label: (op, x, indices, updates)} with values at the edges of the policies;
    expected results always come from the oracle."""
    cases = {}
    for dtype in ("int8", "int16", "int32", "int64", "uint8"):
        info = np.iinfo(dtype)
        x = np.array([info.min, info.max, -7 if info.min < 0 else 7, 0, info.max - 1], dtype)
        idx = np.array([0, 1, 1, 2, 3, 4, 4], np.int32)
        neg1 = -1 if info.min < 0 else 1
        cases[f"wrap-add-{dtype}"] = ("ScatterAdd", x, idx,
                                      np.array([-1 if info.min < 0 else 1, 1, 1, 5, 0, 1, 1], dtype))
        cases[f"wrap-sub-{dtype}"] = ("ScatterSub", x, idx, np.array([1, info.max, 2, 9, 1, 3, 2], dtype))
        cases[f"wrap-mul-{dtype}"] = ("ScatterMul", x, idx, np.array([2, 2, 3, 2, 5, 2, 3], dtype))
        cases[f"trunc-div-{dtype}"] = ("ScatterDiv", x, idx, np.array([neg1, 2, neg1, 2, 3, 2, neg1], dtype))
        cases[f"max-{dtype}"] = ("ScatterMax", x, idx, np.array([info.max, info.min, 3, 1, 0, info.max, 0], dtype))
        cases[f"min-{dtype}"] = ("ScatterMin", x, idx, np.array([info.max, info.min, 3, 1, 0, info.max, 0], dtype))
    # float16: duplicates accumulate in float32 and round once (2048 + 8 x 1.0)
    x16 = np.array([[2048.0, 1.0], [0.1, -3.0]], np.float16)
    cases["f16-round-once-add"] = ("ScatterAdd", x16, np.array([0] * 8, np.int64), np.ones((8, 2), np.float16))
    cases["f16-round-once-nd-sub"] = ("ScatterNdSub", x16, np.array([[0, 0]] * 8 + [[1, 1]], np.int32),
                                      np.full((9,), 0.3, np.float16))
    cases["f16-tensor-mul"] = ("TensorScatterMul", x16, np.array([[1], [1], [1]], np.int32),
                               np.full((3, 2), 1.1, np.float16))
    # NaN and infinities: Max/Min propagate a NaN from either side; float Div by 0 is IEEE
    for dtype in ("float16", "float32", "float64"):
        xf = np.array([[np.nan, 1.0], [2.0, -np.inf], [0.0, 5.0]], dtype)
        idx = np.array([0, 1, 1, 2, 0], np.int32)
        upd = np.array([[3.0, np.nan], [np.nan, 0.0], [1.0, 7.0], [0.0, -1.0], [1.0, 2.0]], dtype)
        cases[f"nan-max-{dtype}"] = ("ScatterMax", xf, idx, upd)
        cases[f"nan-nd-min-{dtype}"] = ("ScatterNdMin", xf, idx.reshape(5, 1), upd)
        cases[f"nan-tensor-max-{dtype}"] = ("TensorScatterMax", xf, idx.reshape(5, 1), upd)
        cases[f"float-div-by-zero-{dtype}"] = (
            "ScatterDiv", xf, idx, np.array([[0.0, 0.0], [0.0, -0.0], [2.0, 0.0], [0.0, 4.0], [1.0, 1.0]], dtype))
    # index shapes: a scalar index, no index at all, full-depth ScatterNd (scalar slices)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    cases["scalar-index"] = ("ScatterAdd", x, np.array(2, np.int32), np.full((3,), 0.5, np.float32))
    cases["no-index"] = ("ScatterUpdate", x, np.zeros((0,), np.int64), np.zeros((0, 3), np.float32))
    cases["full-depth-nd"] = ("ScatterNdUpdate", x, np.array([[3, 2], [0, 0], [3, 2]], np.int32),
                              np.array([7.0, 8.0, 9.0], np.float32))
    cases["batched-tensor"] = ("TensorScatterAdd", x, np.array([[[1, 1], [1, 1]], [[2, 0], [1, 1]]], np.int64),
                               np.full((2, 2), 0.25, np.float32))
    return cases


EDGE_CASES = _edge_cases()
GRAPH_EDGE_CASES = {"wrap-add-int8": "primitive", "trunc-div-int32": "function",
                    "f16-round-once-add": "primitive", "nan-max-float32": "function",
                    "nan-tensor-max-float16": "primitive", "scalar-index": "function"}


def _check_edge(mode, label, kind):
    op, x, indices, updates = EDGE_CASES[label]
    runner = Runner(mode, op, kind, x)
    expected = oracle(op, x, indices, updates)
    assert_same(runner.run(indices, updates), expected)
    if in_place(op):
        assert_same(runner.target(), expected)
    else:
        assert_unchanged(runner.target_obj, x)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("label", list(EDGE_CASES))
@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_edge_values_match_oracle(mode, label, kind):
    _check_edge(mode, label, kind)


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("label", list(GRAPH_EDGE_CASES))
def test_edge_values_match_oracle_in_graph(mode, label):
    _check_edge(mode, label, GRAPH_EDGE_CASES[label])


def test_float16_case_distinguishes_round_once():
    """The float16 edge case really tells "round once" from rounding after every update."""
    op, x, indices, updates = EDGE_CASES["f16-round-once-add"]
    acc = x[0, 0]
    for _ in range(len(indices)):
        acc = np.float16(acc + np.float16(1.0))
    assert oracle(op, x, indices, updates)[0, 0] != acc


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdMax", "TensorScatterUpdate"])
def test_non_contiguous_inputs(mode, op):
    """Transposed (strided view) indices and updates are read as their logical values."""
    rng = np.random.default_rng(_seed("non-contiguous", op))
    family, _ = split_op(op)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    if family == "Scatter":
        indices = rng.integers(0, 6, size=(3, 2)).astype(np.int32)          # view of a (2, 3)
        updates = rng.standard_normal((4, 2, 3)).astype(np.float32)         # view of (4, 2, 3) -> (3, 2, 4)
        i_t, u_t = Tensor(indices.T.copy()).transpose(), Tensor(updates).transpose()
        i_np, u_np = indices, updates.transpose()
    else:
        indices = np.stack([rng.integers(0, 6, size=5), rng.integers(0, 4, size=5)]).astype(np.int64)  # (2, 5)
        updates = rng.standard_normal((5,)).astype(np.float32)
        i_t, u_t = Tensor(indices).transpose(), Tensor(updates)
        i_np, u_np = indices.T, updates
    fn = callable_for(op, "function")
    target = Parameter(Tensor(x), name="p") if in_place(op) else Tensor(x)
    out = fn(target, i_t, u_t)
    expected = oracle(op, x, i_np, u_np)
    assert_same(out.asnumpy(), expected)
    if in_place(op):
        assert_same(target.asnumpy(), expected)


@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdDiv", "ScatterUpdate"])
def test_use_locking_true_same_result(mode, op):
    assert getattr(ms_scatter, op)(use_locking=True).use_locking is True
    x, (i1, u1), _ = _make_case(op, "float32", "int32", 2, "use_locking")
    runner = Runner(mode, op, "primitive", x, use_locking=True)
    expected = oracle(op, x, i1, u1)
    assert_same(runner.run(i1, u1), expected)
    assert_same(runner.target(), expected)


# ------------------------------------------------------------------ large cases
# Big enough (n * slice >= 2**18 elements over more than 1 MiB of input_x) for a kernel
# to split the work across threads; indices are skewed (half of them on 8 hot rows) so
# that duplicates and an uneven spread are both present.

LARGE_CASES = {
    "ScatterAdd-float32": ("ScatterAdd", (20000, 16), "float32", "int32"),
    "ScatterMin-float64": ("ScatterMin", (10000, 16), "float64", "int64"),
    "ScatterUpdate-int32": ("ScatterUpdate", (20000, 16), "int32", "int64"),
    "ScatterNdMul-float16": ("ScatterNdMul", (400, 100, 16), "float16", "int32"),
    "ScatterNdDiv-int64": ("ScatterNdDiv", (200, 50, 16), "int64", "int32"),
    "TensorScatterMax-float32": ("TensorScatterMax", (200, 100, 16), "float32", "int64"),
    "TensorScatterSub-float16": ("TensorScatterSub", (40000, 16), "float16", "int32"),
}


def _large_case(label):
    op, x_shape, dtype, index_dtype = LARGE_CASES[label]
    family, reduction = split_op(op)
    rng = np.random.default_rng(_seed("large", label))
    n = 20000
    depth = 1 if family == "Scatter" else len(x_shape) - 1
    cols = []
    for d in range(depth):
        hot = rng.integers(0, min(8, x_shape[d]), size=n // 2)
        cols.append(np.concatenate([hot, rng.integers(0, x_shape[d], size=n - n // 2)]))
    order = rng.permutation(n)
    vectors = np.stack(cols, axis=-1)[order].astype(index_dtype)
    indices = vectors[:, 0] if family == "Scatter" else vectors
    slice_shape = x_shape[depth:]
    if np.dtype(dtype).kind == "f":
        x = (rng.standard_normal(x_shape) * 4).astype(dtype)
        if reduction == "Mul":
            updates = (1 + 0.01 * rng.standard_normal((n,) + slice_shape)).astype(dtype)
        else:
            updates = (rng.standard_normal((n,) + slice_shape) * 4).astype(dtype)
        x.flat[::997] = np.nan
        updates.flat[::1009] = np.nan
    else:
        x = rng.integers(-1000, 1000, size=x_shape).astype(dtype)
        updates = rng.integers(1, 4, size=(n,) + slice_shape).astype(dtype)
        updates *= np.where(rng.random(updates.shape) < 0.5, -1, 1).astype(dtype)
    return op, x, indices, updates


@pytest.mark.parametrize("label", list(LARGE_CASES))
@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_large_matches_oracle(mode, label):
    op, x, indices, updates = _large_case(label)
    kind = KINDS[len(label) % 2]
    runner = Runner(mode, op, kind, x)
    expected = oracle(op, x, indices, updates)
    assert_same(runner.run(indices, updates), expected)
    if in_place(op):
        assert_same(runner.target(), expected)
    else:
        assert_unchanged(runner.target_obj, x)


@pytest.mark.parametrize("label, kind", [("ScatterAdd-float32", "primitive"), ("ScatterNdMul-float16", "function"),
                                         ("TensorScatterMax-float32", "primitive")])
@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
def test_large_matches_oracle_in_graph(mode, label, kind):
    op, x, indices, updates = _large_case(label)
    runner = Runner(mode, op, kind, x)
    expected = oracle(op, x, indices, updates)
    assert_same(runner.run(indices, updates), expected)
    if in_place(op):
        assert_same(runner.target(), expected)
    else:
        assert_unchanged(runner.target_obj, x)
