"""The segment reductions of shared/SEGMENT_API.md section 2 (segment_reduce, segment_argmax /
segment_argmin, segment_softmax and their primitives) against the numpy oracle in PYNATIVE and
GRAPH: every value dtype, fill values, ties, NaN, empty segments, dropped rows; float64
gradients against finite differences; dynamic E; errors."""
import zlib

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

import ms_scatter
from ms_scatter.infer import SEGMENT_REDUCES, VALUE_DTYPES
from ms_scatter.message_passing import MESSAGE_FUNCTIONS, MESSAGE_PRIMITIVES
from ms_scatter.reference import segment_arg_oracle, segment_reduce_oracle, segment_softmax_oracle
from ms_scatter.segment import SEGMENT_FUNCTIONS, SEGMENT_PRIMITIVES
from ms_scatter.segment_reduce import CONTRACT_FUNCTIONS, CONTRACT_PRIMITIVES
from ms_scatter.testing import is_float, np_dtype

from .helpers import assert_same, graph_covers, numeric_gradient

N = 5


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


def _case(rng, dtype, rows=9, rest=(3,), reduce="sum"):
    npdt = np_dtype(dtype)
    ids = rng.integers(-1, N - 1, size=rows)  # segment N - 1 always empty
    ids[0] = 0
    if is_float(npdt):
        x = (rng.standard_normal((rows,) + rest) * (1 if reduce == "prod" else 4)).astype(np.float32).astype(npdt)
        x.reshape(-1)[2] = x.reshape(-1)[0]
    else:
        x = rng.integers(1, 3 if reduce == "prod" else 9, size=(rows,) + rest).astype(npdt)
    return x, ids


class _Call(nn.Cell):
    def __init__(self, fn, *args, **kwargs):
        super().__init__()
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def construct(self, x, ids):
        return self.fn(x, ids, N, *self.args, **self.kwargs)


def _run(mode, fn, x, ids, *args, **kwargs):
    if mode == "GRAPH":
        return _Call(fn, *args, **kwargs)(Tensor(x), Tensor(ids))
    return fn(Tensor(x), Tensor(ids), N, *args, **kwargs)


@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("reduce", SEGMENT_REDUCES)
def test_segment_reduce_matches_the_oracle(mode, reduce, dtype):
    graph_covers(mode, dtype)
    rng = np.random.default_rng(_seed("reduce", reduce, dtype, mode))
    x, ids = _case(rng, dtype, reduce=reduce)
    for fill in (0, 3):
        out = _run(mode, ms_scatter.segment_reduce, x, ids.astype(np.int32), reduce, fill_value=fill)
        expected = segment_reduce_oracle(reduce, x, ids, N, fill)
        if reduce == "mean" and is_float(np_dtype(dtype)) and dtype != "float64":
            np.testing.assert_allclose(out.asnumpy().astype(np.float64), expected.astype(np.float64), rtol=1e-6)
        else:
            assert_same(out.asnumpy(), expected, f"segment_reduce {reduce} {dtype} fill {fill}")


@pytest.mark.parametrize("reduce", SEGMENT_REDUCES)
def test_segment_reduce_primitive(mode, reduce):
    rng = np.random.default_rng(_seed("reduce-prim", reduce, mode))
    x, ids = _case(rng, "float32", reduce=reduce)
    prim = ms_scatter.SegmentReduce(reduce, fill_value=-2.0)
    assert prim.infer_shape([9, 3], [9], N) == [N, 3]
    out = _run(mode, prim, x, ids.astype(np.int64))
    np.testing.assert_allclose(out.asnumpy(), segment_reduce_oracle(reduce, x, ids, N, -2.0), rtol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "uint8"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_segment_arg_matches_the_oracle(mode, kind, dtype):
    rng = np.random.default_rng(_seed("arg", kind, dtype, mode))
    x, ids = _case(rng, dtype)
    if is_float(np_dtype(dtype)):
        x[4, 1] = np.nan  # a NaN wins its segment's column
    fn = ms_scatter.segment_argmax if kind == "max" else ms_scatter.segment_argmin
    values, arg = _run(mode, fn, x, ids.astype(np.int32))
    want_values, want_arg = segment_arg_oracle(kind, x, ids, N)
    assert arg.dtype == ms.int64
    assert_same(arg.asnumpy(), want_arg, f"segment_arg{kind} {dtype}: arg")
    assert_same(values.asnumpy(), want_values, f"segment_arg{kind} {dtype}: values")
    assert (want_arg[N - 1] == x.shape[0]).all()  # the empty segment's arg is E


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_segment_arg_is_one_fused_pass_on_the_cpu(mode, kind, dtype):
    """Rows enough for the kernel's threads (E x F >= 2^18), many ties (small integers), NaN,
    unsorted ids with dropped rows: the oracle's bits, from the fused arg kernels, with no
    segment max or min pass."""
    graph_covers(mode, dtype)
    rng = np.random.default_rng(_seed("arg-fused", kind, dtype, mode))
    x = rng.integers(-5, 6, (20000, 16)).astype(np_dtype(dtype))
    if is_float(np_dtype(dtype)):
        x[rng.integers(0, 20000, 40), rng.integers(0, 16, 40)] = np.nan
    ids = rng.integers(-1, N - 1, 20000).astype(np.int64)
    fn = ms_scatter.segment_argmax if kind == "max" else ms_scatter.segment_argmin
    before = ms_scatter.call_counts()
    values, arg = _run(mode, fn, x, ids)
    want_values, want_arg = segment_arg_oracle(kind, x, ids, N)
    assert_same(arg.asnumpy(), want_arg, f"segment_arg{kind} {dtype}: arg")
    assert_same(values.asnumpy(), want_values, f"segment_arg{kind} {dtype}: values")
    after = ms_scatter.call_counts()
    op = f"SegmentArg{kind}"
    assert after.get(op, 0) > before.get(op, 0)
    for engine in ("UnsortedSegmentMax", "UnsortedSegmentMin"):
        assert after.get(engine, 0) == before.get(engine, 0)
    # a Python call writes the values in the arg kernel's pass; a graph node has one output,
    # so there the values are a second kernel
    values_kernel = after.get("SegmentArg", 0) - before.get("SegmentArg", 0)
    assert values_kernel == (0 if mode == "PYNATIVE" else 1)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
@pytest.mark.parametrize("reduce", SEGMENT_REDUCES)
def test_segment_reduce_is_one_fused_kernel_on_the_cpu(mode, reduce, dtype):
    """Rows enough for the kernel's threads (E x F >= 2^18), unsorted ids with dropped rows,
    empty segments, a fill value: the oracle's bits, from one fused kernel call (no engine
    segment kernel, no count pass)."""
    graph_covers(mode, dtype)
    rng = np.random.default_rng(_seed("reduce-fused", reduce, dtype, mode))
    npdt = np_dtype(dtype)
    low, high = (1, 3) if reduce == "prod" else (-9, 10)
    x = rng.integers(low, high, (20000, 16)).astype(npdt)
    if reduce == "prod" and is_float(npdt):
        x = (x.astype(np.float32) * rng.choice([0.5, 1.0, 2.0], x.shape)).astype(npdt)
    ids = rng.integers(-1, 4000, 20000).astype(np.int32)
    ids[ids == 7] = 8  # segment 7 empty
    before = ms_scatter.call_counts()
    out = (_ReduceN(4000, reduce, 2.5)(Tensor(x), Tensor(ids)) if mode == "GRAPH" else
           ms_scatter.segment_reduce(Tensor(x), Tensor(ids), 4000, reduce, fill_value=2.5))
    want = segment_reduce_oracle(reduce, x, ids, 4000, 2.5)
    if reduce == "mean" and is_float(npdt) and dtype != "float64":  # (the oracle divides in float64)
        np.testing.assert_allclose(out.asnumpy().astype(np.float64), want.astype(np.float64), rtol=1e-6)
    else:
        assert_same(out.asnumpy(), want, f"segment_reduce {reduce} {dtype}")
    after = ms_scatter.call_counts()
    assert after.get("SegmentReduce", 0) == before.get("SegmentReduce", 0) + 1
    assert all(after.get(op, 0) == before.get(op, 0) for op in after if op.startswith("UnsortedSegment"))


class _ReduceN(nn.Cell):
    def __init__(self, n, reduce, fill):
        super().__init__()
        self.n, self.reduce, self.fill = n, reduce, fill

    def construct(self, x, ids):
        return ms_scatter.segment_reduce(x, ids, self.n, self.reduce, fill_value=self.fill)


def test_sums_of_negative_zeros_are_positive_zero(mode):
    """As a scatter into zeros (MindSpore's unsorted_segment_sum, torch, JAX): a segment or a
    node whose rows are all -0.0 sums to +0.0, its mean too; max keeps -0.0."""
    x = np.array([[-0.0, 1.0], [-0.0, -0.0]], np.float32)
    ids = np.array([0, 0], np.int32)
    for reduce in ("sum", "mean", "max"):
        out = _run(mode, ms_scatter.segment_reduce, x, ids, reduce).asnumpy()
        assert_same(out, segment_reduce_oracle(reduce, x, ids, N), f"{reduce}")
        assert np.signbit(out[0, 0]) == (reduce == "max")
    got = ms_scatter.gspmm(Tensor(x), Tensor(np.array([0, 1], np.int32)), Tensor(ids), N).asnumpy()
    assert not np.signbit(got[0, 0]) and got[0, 1] == 1.0


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_segment_softmax_is_one_fused_kernel_on_the_cpu(mode, dtype):
    """Rows enough for the kernel's threads, unsorted ids with dropped rows, logits near 1e4:
    the float64 oracle within a few ulps, from the fused kernel (no segment max or sum pass),
    forward and gradient."""
    graph_covers(mode, dtype)
    rng = np.random.default_rng(_seed("softmax-fused", dtype, mode))
    x = (rng.standard_normal((40000, 8)) * 1e4).astype(np_dtype(dtype))
    ids = rng.integers(-1, 900, 40000).astype(np.int32)
    before = ms_scatter.call_counts()
    net = _SoftmaxN(900)
    out = (net(Tensor(x), Tensor(ids)) if mode == "GRAPH" else
           ms_scatter.segment_softmax(Tensor(x), Tensor(ids), 900)).asnumpy().astype(np.float64)
    tol = {"float64": 1e-13, "float32": 1e-6, "float16": 2e-3}[dtype]
    np.testing.assert_allclose(out, segment_softmax_oracle(x.astype(np.float64), ids, 900), rtol=tol, atol=tol)
    after = ms_scatter.call_counts()
    assert after.get("SegmentSoftmax", 0) > before.get("SegmentSoftmax", 0)
    for engine in ("UnsortedSegmentMax", "UnsortedSegmentSum"):
        assert after.get(engine, 0) == before.get(engine, 0)


class _SoftmaxN(nn.Cell):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def construct(self, x, ids):
        return ms_scatter.segment_softmax(x, ids, self.n)


@pytest.mark.parametrize("dtype", ["int32", "uint8"])
def test_segment_softmax_refuses_integers_clearly(dtype):
    with pytest.raises(TypeError, match="For 'segment_softmax', the dtype of 'src' must be float16, float32, "
                                        f"float64 or bfloat16, but got {dtype}"):
        ms_scatter.segment_softmax(Tensor(np.ones((3, 2), dtype)), Tensor(np.array([0, 1, 1], np.int32)), N)


@pytest.mark.parametrize("fill,dtype", [(1000, "int8"), (-1, "uint8"), (float("nan"), "int32"),
                                        (float("inf"), "int64"), (2 ** 40, "int32")])
def test_a_fill_value_the_dtype_cannot_hold_is_an_error(mode, fill, dtype):
    """1000 into int8 would be -24 with no word (as a cast wraps): refused, naming the range."""
    with pytest.raises(ValueError, match=f"'fill_value' must be a number in .* for src of dtype {dtype}"):
        _run(mode, ms_scatter.segment_reduce, np.ones((3, 2), dtype), np.array([0, 1, 1], np.int32), "max",
             fill_value=fill)


def test_a_fractional_fill_is_truncated_for_integers():
    out = ms_scatter.segment_reduce(Tensor(np.ones((2, 1), np.int32)), Tensor(np.array([0, 0], np.int32)), N,
                                    fill_value=-2.7)
    assert out.asnumpy()[1, 0] == -2


def test_segment_arg_id_out_of_range_is_an_error_naming_it():
    with pytest.raises(ms_scatter.ScatterIndexError, match=r"For 'segment_argmin', each value of 'segment_ids' must "
                                                           r"be < num_segments \(5\) \(a negative id drops its row\), "
                                                           r"but got 7 at position \(2,\)"):
        ms_scatter.segment_argmin(Tensor(np.ones((3, 2), np.float32)), Tensor(np.array([0, -1, 7], np.int32)), N)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_infinite_rows_keep_their_value_in_max_and_min(mode, dtype):
    """A segment of -inf rows has max -inf (not the dtype's lowest finite value), one of +inf
    rows min +inf, and the arg outputs name the row that holds it (not E)."""
    graph_covers(mode, dtype)
    npdt = np_dtype(dtype)
    x = np.array([[-np.inf, np.inf], [1.0, -np.inf], [np.inf, 2.0], [-np.inf, np.inf]], np.float32).astype(npdt)
    ids = np.array([0, 1, 2, 0], np.int32)
    for reduce in ("max", "min"):
        out = _run(mode, ms_scatter.segment_reduce, x, ids, reduce, fill_value=7)
        assert_same(out.asnumpy(), segment_reduce_oracle(reduce, x, ids, N, 7), f"{reduce} {dtype}")
        fn = ms_scatter.segment_argmax if reduce == "max" else ms_scatter.segment_argmin
        values, arg = _run(mode, fn, x, ids)
        want_values, want_arg = segment_arg_oracle(reduce, x, ids, N)
        assert_same(values.asnumpy(), want_values, f"segment_arg{reduce} {dtype}: values")
        assert_same(arg.asnumpy(), want_arg, f"segment_arg{reduce} {dtype}: arg")
    out = _run(mode, ms_scatter.segment_reduce, x, ids, "max")
    assert np.isneginf(out.asnumpy().astype(np.float32)[0, 0])


class _MeanSpmm(nn.Cell):
    def __init__(self, weighted):
        super().__init__()
        self.weighted = weighted

    def construct(self, x, src, dst, w):
        if self.weighted:
            return ms_scatter.gspmm(x, src, dst, N, w, reduce="mean")
        return ms_scatter.gspmm(x, src, dst, N, reduce="mean")


@pytest.mark.parametrize("dtype", [d for d in VALUE_DTYPES if d[0] in "iu"])
def test_integer_means_are_exact_where_the_sum_wraps(mode, dtype):
    """The mean of integers always fits the dtype, their sum need not: 300 rows near the
    dtype's limits average to the exact value (truncated toward zero), in segment_reduce,
    segment_csr and gspmm (weighted or not), where a sum in the dtype wrapped to a wrong value."""
    graph_covers(mode, dtype)
    info = np.iinfo(np_dtype(dtype))
    hi, lo = int(min(info.max, 2 ** 62)) - 1, int(max(info.min, -2 ** 62)) + 1
    if info.bits == 64:  # (64-bit sums wrap as the dtype does; the values here stay clear of it)
        hi, lo = 2 ** 52 + 1, (-2 ** 52 - 1 if info.min < 0 else 0)
    values = [hi] * 300 + [hi, lo, lo, hi, lo]
    ids = np.array([0] * 300 + [1] * 5, np.int32)
    x = np.array(values, np_dtype(dtype)).reshape(-1, 1)
    total = hi * 2 + lo * 3
    want = np.array([[hi], [abs(total) // 5 * (1 if total >= 0 else -1)], [0], [0], [0]], np_dtype(dtype))
    out = _run(mode, ms_scatter.segment_reduce, x, ids, "mean")
    assert_same(out.asnumpy(), want, f"segment_reduce mean {dtype}")
    assert_same(segment_reduce_oracle("mean", x, ids, N), want, f"oracle {dtype}")
    if mode == "PYNATIVE":
        csr = ms_scatter.segment_csr(Tensor(x), Tensor(np.array([0, 300, 305, 305, 305, 305], np.int64)), "mean")
        assert_same(csr.asnumpy(), want, f"segment_csr mean {dtype}")
    one = np.ones(len(values), np_dtype(dtype))
    rows = Tensor(np.arange(len(values), dtype=np.int32))
    for weight in (None, Tensor(one)):
        if mode == "GRAPH":
            got = _MeanSpmm(weight is not None)(Tensor(x), rows, Tensor(ids), Tensor(one))
        else:
            got = ms_scatter.gspmm(Tensor(x), rows, Tensor(ids), N, weight, reduce="mean")
        assert_same(got.asnumpy(), want, f"gspmm mean {dtype} weighted={weight is not None}")


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_segment_softmax_matches_the_oracle(mode, dtype):
    rng = np.random.default_rng(_seed("softmax", dtype, mode))
    x, ids = _case(rng, dtype, rest=(8,))
    x = (x.astype(np.float32) * 1000).astype(np_dtype(dtype))  # logits near 1e4: no overflow
    out = _run(mode, ms_scatter.segment_softmax, x, ids.astype(np.int32)).asnumpy().astype(np.float64)
    tol = {"float64": 1e-12, "float32": 1e-5, "float16": 2e-3, "bfloat16": 2e-2}[dtype]
    np.testing.assert_allclose(out, segment_softmax_oracle(x.astype(np.float64), ids, N), rtol=tol, atol=tol)
    assert (out[ids < 0] == 0).all()


def test_primitives_of_the_arg_and_softmax_forms(mode):
    rng = np.random.default_rng(_seed("prims", mode))
    x, ids = _case(rng, "float32")
    values, arg = _run(mode, ms_scatter.SegmentArgmax(), x, ids.astype(np.int32))
    assert_same(arg.asnumpy(), segment_arg_oracle("max", x, ids, N)[1])
    out = _run(mode, ms_scatter.SegmentSoftmax(), x, ids.astype(np.int32))
    np.testing.assert_allclose(out.asnumpy(), segment_softmax_oracle(x, ids, N), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ gradients

class _Loss(nn.Cell):
    def __init__(self, fn, weights, *args, **kwargs):
        super().__init__()
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.weights = Tensor(weights)

    def construct(self, x, ids):
        out = self.fn(x, ids, N, *self.args, **self.kwargs)
        if isinstance(out, tuple):
            out = out[0]
        return (out * self.weights).sum()


def _grad(mode, net, x, ids):
    grad = ms.jit(ms.grad(net)) if mode == "GRAPH" else ms.grad(net)
    return grad(Tensor(x), Tensor(ids)).asnumpy()


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod", "max", "min"])
def test_segment_reduce_gradient(mode, reduce):
    rng = np.random.default_rng(_seed("reduce-grad", reduce, mode))
    ids = np.array([0, 2, 0, -1, 2, 0], np.int32)
    x = rng.standard_normal((6, 3))
    if reduce == "prod":
        x[0, 0] = 0.0
    weights = rng.standard_normal((N, 3))
    net = _Loss(ms_scatter.segment_reduce, weights, reduce, fill_value=0.5)
    got = _grad(mode, net, x, ids)
    want = numeric_gradient(lambda v: float((segment_reduce_oracle(reduce, v, ids, N, 0.5) * weights).sum()), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_segment_argmax_values_gradient_splits_ties(mode):
    ids = np.array([0, 0, 1, 0], np.int32)
    x = np.array([[2.0], [5.0], [1.0], [5.0]])
    weights = np.arange(1, N + 1, dtype=np.float64).reshape(N, 1)
    got = _grad(mode, _Loss(ms_scatter.segment_argmax, weights), x, ids)
    assert_same(got, np.array([[0.0], [0.5], [2.0], [0.5]]))


def test_segment_softmax_gradient(mode):
    rng = np.random.default_rng(_seed("softmax-grad", mode))
    ids = np.array([0, 2, 0, -1, 2, 0], np.int32)
    x = rng.standard_normal((6, 2))
    weights = rng.standard_normal((6, 2))
    got = _grad(mode, _Loss(ms_scatter.segment_softmax, weights), x, ids)
    want = numeric_gradient(lambda v: float((segment_softmax_oracle(v, ids, N) * weights).sum()), x)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


# ------------------------------------------------------------------ shapes and errors

@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("fn", ["segment_reduce", "segment_softmax"])
def test_dynamic_number_of_rows(mode, fn):
    net = _Call(getattr(ms_scatter, fn), *(("mean",) if fn == "segment_reduce" else ()))
    net.set_inputs(Tensor(shape=[None, 3], dtype=ms.float32), Tensor(shape=[None], dtype=ms.int32))
    for rows in (6, 11):
        x, ids = _case(np.random.default_rng(_seed("dyn", fn, rows)), "float32", rows=rows)
        out = net(Tensor(x), Tensor(ids.astype(np.int32))).asnumpy()
        want = (segment_reduce_oracle("mean", x, ids, N) if fn == "segment_reduce"
                else segment_softmax_oracle(x, ids, N))
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)  # float32 exp


@pytest.mark.parametrize("call,error,match", [
    (lambda x, i: ms_scatter.segment_reduce(x, i, N, "median"), ValueError, "'reduce' must be one of sum, mean"),
    (lambda x, i: ms_scatter.segment_softmax(x, i.reshape(3, 2), N), ValueError, "'segment_ids' must be 1-D"),
    (lambda x, i: ms_scatter.segment_argmax(x, i, 0), ValueError, "'num_segments' must be greater than 0"),
])
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(Tensor(np.ones((6, 2), np.float32)), Tensor(np.zeros(6, np.int32)))


def test_an_id_out_of_range_is_an_error_before_anything_is_computed():
    with pytest.raises(ms_scatter.ScatterIndexError, match="'segment_ids' must be < num_segments"):
        ms_scatter.segment_softmax(Tensor(np.ones((3, 2), np.float32)), Tensor(np.array([0, 5, 1], np.int32)), N)


def test_primitive_refuses_an_unknown_reduce():
    with pytest.raises(ValueError, match="'reduce' must be one of"):
        ms_scatter.SegmentReduce("median")


SEGMENT_CALLABLES = sorted({**SEGMENT_FUNCTIONS, **SEGMENT_PRIMITIVES, **CONTRACT_FUNCTIONS, **CONTRACT_PRIMITIVES,
                            **MESSAGE_FUNCTIONS, **MESSAGE_PRIMITIVES})


@pytest.mark.parametrize("name", SEGMENT_CALLABLES)
def test_docstring_examples_print_what_they_show(name):
    import doctest  # pylint: disable=import-outside-toplevel
    obj = getattr(ms_scatter, name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert tests and any(t.examples for t in tests) or name[0].isupper(), f"{name} has no example"
    runner = doctest.DocTestRunner(optionflags=0)
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0, name
