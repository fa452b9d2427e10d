"""ms_scatter.segment_csr and SegmentCsr against the numpy oracle (segment_reduce over the ids
that indptr's row ranges give), in PYNATIVE and GRAPH: every reduce and value dtype, empty
segments with fill_value, no rows; gradients against finite differences in float64; an
invalid indptr an error in both modes before anything is computed."""
import zlib

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn

import ms_scatter
from ms_scatter.infer import SEGMENT_REDUCES, VALUE_DTYPES
from ms_scatter.reference import segment_reduce_oracle
from ms_scatter.testing import is_float, np_dtype

from .helpers import assert_same, graph_covers, numeric_gradient


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


class _Call(nn.Cell):
    def __init__(self, reduce, fill_value):
        super().__init__()
        self.reduce = reduce
        self.fill_value = fill_value

    def construct(self, src, indptr):
        return ms_scatter.segment_csr(src, indptr, self.reduce, fill_value=self.fill_value)


def _run(mode, src, indptr, reduce="sum", fill_value=0):
    if mode == "GRAPH":
        return _Call(reduce, fill_value)(src, indptr)
    return ms_scatter.segment_csr(src, indptr, reduce, fill_value=fill_value)


def _ids(indptr):
    return np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))


def _expected(reduce, src, indptr, fill_value):
    with np.errstate(over="ignore", invalid="ignore"):
        return segment_reduce_oracle(reduce, src, _ids(indptr), len(indptr) - 1, fill_value)


def _case(rng, reduce, dtype, rows=7, rest=(3,)):
    npdt = np_dtype(dtype)
    cuts = np.sort(rng.integers(0, rows + 1, 4))
    indptr = np.concatenate([[0], cuts, [rows]])  # 5 segments, some empty
    if is_float(dtype):
        src = (rng.standard_normal((rows,) + rest) * (1 if reduce == "prod" else 4)).astype(np.float32).astype(npdt)
    else:
        src = rng.integers(1 if reduce == "prod" else 0, 3 if reduce == "prod" else 9, (rows,) + rest).astype(npdt)
    return src, indptr


@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("reduce", SEGMENT_REDUCES)
def test_matches_the_oracle(mode, reduce, dtype):
    graph_covers(mode, dtype)
    rng = np.random.default_rng(_seed(reduce, dtype, mode))
    src, indptr = _case(rng, reduce, dtype)
    fill = 0 if reduce == "sum" else 2
    out = _run(mode, Tensor(src), Tensor(indptr.astype(np.int64)), reduce, fill)
    assert_same(out.asnumpy(), _expected(reduce, src, indptr, fill), f"segment_csr {reduce} {dtype}")


def test_int32_indptr_primitive_and_no_rows(mode):
    src = np.arange(6, dtype=np.float32).reshape(3, 2)
    prim = ms_scatter.SegmentCsr("max", fill_value=-1)
    assert prim.infer_shape([3, 2], [4]) == [3, 2]
    if mode == "GRAPH":
        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.prim = prim

            def construct(self, s, p):
                return self.prim(s, p)
        out = Net()(Tensor(src), Tensor(np.array([0, 1, 1, 3], np.int32)))
    else:
        out = prim(Tensor(src), Tensor(np.array([0, 1, 1, 3], np.int32)))
    assert_same(out.asnumpy(), np.array([[0, 1], [-1, -1], [4, 5]], np.float32))
    out = _run(mode, Tensor(np.zeros((0, 2), np.float32)), Tensor(np.zeros(3, np.int32)), "mean", 7.0)
    assert_same(out.asnumpy(), np.full((2, 2), 7.0, np.float32))


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
def test_one_fused_kernel_reads_indptr_on_the_cpu(mode, reduce):
    """No search pass and no segment-reduce kernel: one SegmentCsr call, the oracle's bits."""
    rng = np.random.default_rng(len(reduce))
    src = rng.integers(1, 4, (3000, 8)).astype(np.float32)
    indptr = np.concatenate([[0], np.sort(rng.integers(0, 3001, 499)), [3000]]).astype(np.int64)
    ids = np.repeat(np.arange(500), np.diff(indptr))
    before = ms_scatter.call_counts()
    out = _run(mode, Tensor(src), Tensor(indptr), reduce, 1.5)
    assert_same(out.asnumpy(), segment_reduce_oracle(reduce, src, ids, 500, 1.5), f"segment_csr {reduce}")
    after = ms_scatter.call_counts()
    assert after.get("SegmentCsr", 0) == before.get("SegmentCsr", 0) + 1
    assert after.get("SegmentReduce", 0) == before.get("SegmentReduce", 0)


@pytest.mark.parametrize("indptr", [[1, 2, 3], [0, 3, 2, 3], [0, 2], [0, 1, 4]], ids=str)
def test_an_invalid_indptr_is_an_error(mode, indptr):
    """A ValueError in PYNATIVE (the call reads indptr); in a graph the fused kernel checks it
    before anything is written and fails the graph, its message naming indptr."""
    src = Tensor(np.ones((3, 2), np.float32))
    if mode == "PYNATIVE":
        with pytest.raises(ValueError, match=r"For 'segment_csr', 'indptr' must start at 0, never decrease and end "
                                             r"at src.shape\[0\] \(3\)"):
            _run(mode, src, Tensor(np.array(indptr, np.int64)))
    elif indptr in ([0, 2], [0, 3, 2, 3]):  # (a compile each: two of the four in GRAPH mode)
        with pytest.raises(RuntimeError):
            _run(mode, src, Tensor(np.array(indptr, np.int64)))
        assert ("For 'segment_csr', 'indptr' must start at 0, never decrease and end at src.shape[0] (3)"
                in ms_scatter.last_error()[1])


@pytest.mark.parametrize("call,error,match", [
    (lambda: ms_scatter.segment_csr(Tensor(np.ones((3, 2), np.float32)), Tensor(np.zeros((2, 2), np.int32))),
     ValueError, "'indptr' must be 1-D"),
    (lambda: ms_scatter.segment_csr(Tensor(np.ones((3, 2), np.float32)), Tensor(np.zeros(2, np.float32))),
     TypeError, "the dtype of 'indptr' must be int32 or int64"),
    (lambda: ms_scatter.segment_csr(Tensor(np.ones(3, np.bool_)), Tensor(np.array([0, 3]))),
     TypeError, "the dtype of 'src' must be one of"),
    (lambda: ms_scatter.segment_csr(Tensor(np.ones(3, np.float32)), Tensor(np.array([0, 3])), "median"),
     ValueError, "'reduce' must be one of"),
    (lambda: ms_scatter.segment_csr(Tensor(np.ones(3, np.float32)), Tensor(np.array([0]))),
     ValueError, r"must start at 0, never decrease and end at src.shape\[0\] \(3\), but got \[0\]"),
])
def test_bad_arguments(call, error, match):
    with pytest.raises(error, match=f"For 'segment_csr', .*{match}"):
        call()


class _Loss(nn.Cell):
    def __init__(self, indptr, reduce, weights):
        super().__init__()
        self.indptr = Tensor(indptr)
        self.reduce = reduce
        self.weights = Tensor(weights)

    def construct(self, src):
        return (ms_scatter.segment_csr(src, self.indptr, self.reduce) * self.weights).sum()


@pytest.mark.parametrize("reduce", ["sum", "mean", "prod"])
def test_gradient_matches_finite_differences(mode, reduce):
    rng = np.random.default_rng(_seed("grad", reduce, mode))
    src = rng.standard_normal((6, 2))
    indptr = np.array([0, 2, 2, 5, 6])
    weights = rng.standard_normal((4, 2))
    net = _Loss(indptr, reduce, weights)
    grad = (ms.jit(ms.grad(net)) if mode == "GRAPH" else ms.grad(net))(Tensor(src))

    def loss(v):
        return float((_expected(reduce, v, indptr, 0) * weights).sum())
    np.testing.assert_allclose(grad.asnumpy(), numeric_gradient(loss, src), rtol=1e-6, atol=1e-6)
