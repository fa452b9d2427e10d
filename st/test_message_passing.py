"""ms_scatter.gspmm / gsddmm and Gspmm / Gsddmm against the numpy oracle (gather along the
edges, then segment_reduce or the elementwise op), in PYNATIVE and GRAPH: every reduce and op,
every value dtype (GRAPH: st/helpers.GRAPH_DTYPES), with and without edge weights; gradients
against finite differences in float64; ids out of range an error in both modes; a GCN layer
trained in a GRAPH Cell."""
import zlib

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn

import ms_scatter
from ms_scatter.infer import VALUE_DTYPES
from ms_scatter.message_passing import GSDDMM_OPS, GSPMM_REDUCES
from ms_scatter.reference import segment_reduce_oracle
from ms_scatter.testing import is_float, np_dtype

from .helpers import assert_same, graph_covers, numeric_gradient

N, M, E = 5, 4, 9  # destination nodes, source nodes, edges


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


def _graph(rng):
    src = rng.integers(0, M, E)
    dst = rng.integers(0, N - 1, E)  # the last node has no incoming edge
    return src, dst


def _features(rng, dtype, shape):
    npdt = np_dtype(dtype)
    if is_float(dtype):
        return rng.integers(-8, 9, shape).astype(np.float32).astype(npdt) / npdt.type(4)  # exact in every float
    low = 0 if dtype.startswith("uint") else -5
    return rng.integers(low, 6, shape).astype(npdt)


def _gspmm_oracle(reduce, x, src, dst, weight):
    messages = x[src]
    if weight is not None:
        work = np.float32 if x.dtype == np_dtype("bfloat16") else x.dtype
        messages = (messages.astype(work) * weight.astype(work).reshape((-1,) + (1,) * (x.ndim - 1))).astype(x.dtype)
    return segment_reduce_oracle(reduce, messages, dst, N, 0)


def _gsddmm_oracle(op, u, v, src, dst):
    work = np.float32 if u.dtype in (np.float16, np_dtype("bfloat16")) else u.dtype
    a, b = u[src].astype(work), v[dst].astype(work)
    out = {"dot": a * b, "add": a + b, "sub": a - b, "mul": a * b}[op]
    if op == "dot":
        out = out.reshape(out.shape[0], -1).sum(1)
    return out.astype(u.dtype)


class _Spmm(nn.Cell):
    def __init__(self, reduce, weighted):
        super().__init__()
        self.reduce = reduce
        self.weighted = weighted

    def construct(self, x, src, dst, w):
        if self.weighted:
            return ms_scatter.gspmm(x, src, dst, N, w, reduce=self.reduce)
        return ms_scatter.gspmm(x, src, dst, N, reduce=self.reduce)


class _Sddmm(nn.Cell):
    def __init__(self, op):
        super().__init__()
        self.op = op

    def construct(self, u, v, src, dst):
        return ms_scatter.gsddmm(u, v, src, dst, self.op)


@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("reduce", GSPMM_REDUCES)
def test_gspmm_matches_the_oracle(mode, reduce, dtype, weighted):
    graph_covers(mode, dtype)
    if mode == "GRAPH" and weighted and dtype != "float32":
        pytest.skip("weighted: float32 in GRAPH mode, every dtype in PYNATIVE")
    rng = np.random.default_rng(_seed("spmm", reduce, dtype, weighted, mode))
    src, dst = _graph(rng)
    x = _features(rng, dtype, (M, 3))
    w = _features(rng, dtype, (E,)) if weighted else None
    args = (Tensor(x), Tensor(src.astype(np.int32)), Tensor(dst.astype(np.int64)))
    if mode == "GRAPH":
        out = _Spmm(reduce, weighted)(*args, Tensor(w) if weighted else Tensor(np.zeros(E, x.dtype)))
    else:
        out = ms_scatter.gspmm(*args, N, Tensor(w) if weighted else None, reduce)
    assert_same(out.asnumpy(), _gspmm_oracle(reduce, x, src, dst, w), f"gspmm {reduce} {dtype}")


@pytest.mark.parametrize("dtype", VALUE_DTYPES)
@pytest.mark.parametrize("op", GSDDMM_OPS)
def test_gsddmm_matches_the_oracle(mode, op, dtype):
    graph_covers(mode, dtype)
    rng = np.random.default_rng(_seed("sddmm", op, dtype, mode))
    src, dst = _graph(rng)
    u, v = _features(rng, dtype, (M, 2, 3)), _features(rng, dtype, (N, 2, 3))
    args = (Tensor(u), Tensor(v), Tensor(src.astype(np.int64)), Tensor(dst.astype(np.int32)))
    out = _Sddmm(op)(*args) if mode == "GRAPH" else ms_scatter.gsddmm(*args, op=op)
    assert_same(out.asnumpy(), _gsddmm_oracle(op, u, v, src, dst), f"gsddmm {op} {dtype}")


def test_primitives(mode):
    rng = np.random.default_rng(_seed("prims", mode))
    src, dst = _graph(rng)
    x = _features(rng, "float32", (M, 2))
    spmm, sddmm = ms_scatter.Gspmm("max"), ms_scatter.Gsddmm("sub")
    if mode == "GRAPH":
        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.spmm, self.sddmm = spmm, sddmm

            def construct(self, a, s, d):
                return self.spmm(a, s, d, N), self.sddmm(a, a, s, s)
        out, diff = Net()(Tensor(x), Tensor(src), Tensor(dst))
    else:
        out, diff = spmm(Tensor(x), Tensor(src), Tensor(dst), N), sddmm(Tensor(x), Tensor(x), Tensor(src), Tensor(src))
    assert_same(out.asnumpy(), _gspmm_oracle("max", x, src, dst, None))
    assert_same(diff.asnumpy(), np.zeros((E, 2), np.float32))


@pytest.mark.parametrize("which", ["src", "dst"])
def test_an_id_out_of_range_is_an_error(mode, which):
    rng = np.random.default_rng(_seed("range", which))
    src, dst = _graph(rng)
    if which == "src":
        src[3] = M
    else:
        dst[3] = -1
    x = Tensor(np.ones((M, 2), np.float32))
    if mode == "PYNATIVE":
        bound = M if which == "src" else N
        with pytest.raises(ValueError, match=rf"For 'gspmm', each value of '{which}' must be in \[0, {bound}\)"):
            ms_scatter.gspmm(x, Tensor(src), Tensor(dst), N)
        with pytest.raises(ValueError, match=rf"For 'gsddmm', each value of '{which}' must be in"):
            ms_scatter.gsddmm(x, Tensor(np.ones((N, 2), np.float32)), Tensor(src), Tensor(dst))
    else:
        with pytest.raises(RuntimeError):
            _Spmm("sum", False)(x, Tensor(src), Tensor(dst), Tensor(np.zeros(E, np.float32)))
        assert f"For 'gspmm', each value of '{which}' must be in" in ms_scatter.last_error()[1]


@pytest.mark.parametrize("call,error,match", [
    (lambda x, s, d: ms_scatter.gspmm(x, s, d, N, reduce="prod"), ValueError, "'reduce' must be one of"),
    (lambda x, s, d: ms_scatter.gspmm(x, s[:3], d, N), ValueError, "one id per edge each"),
    (lambda x, s, d: ms_scatter.gspmm(x, s.astype(ms.float32), d, N), TypeError, "'src' must be int32 or int64"),
    (lambda x, s, d: ms_scatter.gspmm(x, s, d, N, Tensor(np.ones(E, np.float64))), TypeError, "'edge_weight'"),
    (lambda x, s, d: ms_scatter.gsddmm(x, x[:, :1], s, d), ValueError, "the same feature shape"),
    (lambda x, s, d: ms_scatter.gsddmm(x, x, s, d, op="div"), ValueError, "'op' must be one of"),
])
def test_bad_arguments(call, error, match):
    x = Tensor(np.ones((N, 2), np.float32))
    s, d = Tensor(np.zeros(E, np.int32)), Tensor(np.zeros(E, np.int32))
    with pytest.raises(error, match=match):
        call(x, s, d)


class _SpmmLoss(nn.Cell):
    def __init__(self, src, dst, reduce, weights):
        super().__init__()
        self.src, self.dst = Tensor(src), Tensor(dst)
        self.reduce = reduce
        self.weights = Tensor(weights)

    def construct(self, x, w):
        return (ms_scatter.gspmm(x, self.src, self.dst, N, w, reduce=self.reduce) * self.weights).sum()


class _PlainSpmmLoss(_SpmmLoss):
    def construct(self, x, w):  # pylint: disable=unused-argument
        return (ms_scatter.gspmm(x, self.src, self.dst, N, reduce=self.reduce) * self.weights).sum()


@pytest.mark.parametrize("reduce", GSPMM_REDUCES)
def test_gspmm_gradient_without_weights_and_with_ties(mode, reduce):
    """Unweighted: d x against finite differences; max/min on rows that tie (x has equal rows):
    each node's gradient split evenly among the edges that tie for its value."""
    rng = np.random.default_rng(_seed("spmm-grad-plain", reduce, mode))
    src, dst = _graph(rng)
    x = rng.standard_normal((M, 3))
    x[1] = x[0]  # edges from nodes 0 and 1 tie
    weights = rng.standard_normal((N, 3))
    net = _PlainSpmmLoss(src.astype(np.int64), dst.astype(np.int32), reduce, weights)
    grad_fn = ms.grad(net, grad_position=0)
    gx = (ms.jit(grad_fn) if mode == "GRAPH" else grad_fn)(Tensor(x), Tensor(np.zeros(E)))
    if reduce in ("sum", "mean"):
        expected = numeric_gradient(lambda v: float((_gspmm_oracle(reduce, v, src, dst, None) * weights).sum()), x)
    else:
        out = _gspmm_oracle(reduce, x, src, dst, None)
        expected = np.zeros_like(x)
        for v in range(N):
            edges = np.nonzero(dst == v)[0]
            for f in range(3):
                won = [e for e in edges if x[src[e], f] == out[v, f]]
                for e in won:
                    expected[src[e], f] += weights[v, f] / len(won)
    np.testing.assert_allclose(gx.asnumpy(), expected, rtol=1e-6, atol=1e-6)


def _tie_gradient_oracle(x, src, dst, w, out, dout):
    """gspmm max/min's (dx, dw) by loops: a node's dout split evenly among the edges whose
    message rounds to its result, accumulated in edge order (float32 for the halves)."""
    acc = np.float32 if x.dtype in (np.float16, np_dtype("bfloat16")) else x.dtype.type
    xa, douta = x.astype(acc), dout.astype(acc)
    wa = np.ones(len(src), acc) if w is None else w.astype(acc)
    messages = xa[src] * wa.reshape(-1, *([1] * (x.ndim - 1))) if w is not None else xa[src]
    tied = messages.astype(x.dtype) == out[dst]
    count = np.zeros(out.shape, np.int64)
    np.add.at(count, dst, tied.astype(np.int64))
    share = np.where(count > 0, douta / np.maximum(count, 1).astype(acc), acc(0)).astype(acc)
    dx, dw = np.zeros(x.shape, acc), np.zeros(len(src), acc)
    for e in range(len(src)):
        q = np.where(tied[e], share[dst[e]] * wa[e] if w is not None else share[dst[e]], acc(0))
        for f in np.ndindex(q.shape):  # (in feature order, one add at a time)
            if tied[e][f]:
                dx[src[e]][f] = acc(dx[src[e]][f] + q[f])
                dw[e] = acc(dw[e] + acc(share[dst[e]][f] * xa[src[e]][f]))
    return dx.astype(x.dtype), dw.astype(x.dtype)


class _ExtremeLoss(nn.Cell):
    def __init__(self, src, dst, reduce, weighted):
        super().__init__()
        self.src, self.dst, self.reduce, self.weighted = Tensor(src), Tensor(dst), reduce, weighted

    def construct(self, x, w):
        if self.weighted:
            return ms_scatter.gspmm(x, self.src, self.dst, N, w, reduce=self.reduce)
        return ms_scatter.gspmm(x, self.src, self.dst, N, reduce=self.reduce)


@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "float16", "bfloat16"])
@pytest.mark.parametrize("reduce", ["max", "min"])
def test_gspmm_max_min_gradient_splits_ties_without_the_messages(mode, reduce, dtype, weighted):
    """Ties (equal rows; for the halves also messages that only round to the same value) split
    each node's gradient evenly, d x and d edge_weight, against the loop oracle bit for bit; the
    backward runs message.h's tie kernels, no segment sum of an E x F tensor."""
    graph_covers(mode, dtype)
    rng = np.random.default_rng(_seed("ties", reduce, dtype, weighted, mode))
    npdt = np_dtype(dtype)
    src, dst = _graph(rng)
    x = _features(rng, dtype, (M, 3))
    x[1] = x[0]
    w = (rng.integers(1, 4, E) / 4).astype(npdt) if weighted else None
    if weighted and dtype in ("float16", "bfloat16"):
        w[0] = npdt.type(1 + 2.0 ** -10)  # (a message that rounds to its unweighted value)
    dout = _features(rng, dtype, (N, 3))
    net = _ExtremeLoss(src.astype(np.int64), dst.astype(np.int32), reduce, weighted)

    def loss(xt, wt, sens):
        return (net(xt, wt).astype(ms.float32) * sens).sum()  # (no bfloat16 ReduceSum on the CPU)
    grad_fn = ms.grad(loss, grad_position=(0, 1))
    before = ms_scatter.call_counts(entries=True)
    gx, gw = (ms.jit(grad_fn) if mode == "GRAPH" else grad_fn)(
        # (an unused w is float32: MindSpore 2.7's CPU has no bfloat16 zeros for its gradient)
        Tensor(x), Tensor(w if weighted else np.ones(E, np.float32)), Tensor(dout.astype(np.float32)))
    gx, gw = gx.asnumpy(), gw.asnumpy()  # (PYNATIVE runs asynchronously)
    after = ms_scatter.call_counts(entries=True)
    out = net(Tensor(x), Tensor(w if weighted else np.ones(E, np.float32))).asnumpy()
    want_dx, want_dw = _tie_gradient_oracle(x, src, dst, w, out, dout.astype(npdt))
    assert_same(gx, want_dx, f"dx {reduce} {dtype}")
    if weighted:
        assert_same(gw, want_dw, f"dw {reduce} {dtype}")
    assert after["GspmmTieGrad"] > before["GspmmTieGrad"]
    assert after["GspmmTieGradWeight"] - before["GspmmTieGradWeight"] == (1 if weighted else 0)
    assert after["UnsortedSegmentSum"] == before["UnsortedSegmentSum"]


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int32"])
def test_fused_kernels_give_the_same_bits_at_any_thread_count(dtype):
    """A graph large enough to split (E x F >= 2^18): 1 thread against 2 and 3."""
    rng = np.random.default_rng(_seed("threads", dtype))
    nodes, edges = 3000, 70000
    x = Tensor(_features(rng, dtype, (nodes, 5)) * np_dtype(dtype).type(3 if is_float(dtype) else 1))
    w = Tensor(_features(rng, dtype, (edges,)))
    src = Tensor(rng.integers(0, nodes, edges).astype(np.int32))
    dst = Tensor(np.minimum(rng.zipf(1.5, edges) - 1, nodes - 1).astype(np.int64))  # power-law in-degree
    results = []
    for threads in (1, 2, 3):
        ms_scatter.set_num_threads(threads)
        try:
            outs = [ms_scatter.gspmm(x, src, dst, nodes, w, reduce) for reduce in GSPMM_REDUCES]
            outs += [ms_scatter.gspmm(x, src, dst, nodes, reduce="sum")]
            outs += [ms_scatter.gsddmm(x, x, src, dst, op) for op in GSDDMM_OPS]
            results.append([o.asnumpy().view(f"u{o.itemsize}") for o in outs])
        finally:
            ms_scatter.set_num_threads(0)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


class _DynamicSpmm(nn.Cell):
    def construct(self, x, src, dst, w):
        return ms_scatter.gspmm(x, src, dst, N, w, reduce="mean"), ms_scatter.gsddmm(x, x, src, src, "dot")


def test_dynamic_shapes_in_a_graph(mode):
    """Unknown numbers of nodes and edges when the graph compiles (Cell.set_inputs): two
    calls with different sizes, against the oracle."""
    net = _DynamicSpmm()
    net.set_inputs(Tensor(shape=[None, 3], dtype=ms.float32), Tensor(shape=[None], dtype=ms.int32),
                   Tensor(shape=[None], dtype=ms.int32), Tensor(shape=[None], dtype=ms.float32))
    for edges, nodes in ((E, M), (2 * E + 1, M + 3)):
        rng = np.random.default_rng(_seed("dynamic", edges, mode))
        src, dst = rng.integers(0, nodes, edges).astype(np.int32), rng.integers(0, N, edges).astype(np.int32)
        x, w = _features(rng, "float32", (nodes, 3)), _features(rng, "float32", (edges,))
        out, dot = net(Tensor(x), Tensor(src), Tensor(dst), Tensor(w))
        assert_same(out.asnumpy(), _gspmm_oracle("mean", x, src, dst, w))
        assert_same(dot.asnumpy(), _gsddmm_oracle("dot", x, x, src, src))


@pytest.mark.parametrize("reduce", GSPMM_REDUCES)
def test_gspmm_gradient_matches_finite_differences(mode, reduce):
    rng = np.random.default_rng(_seed("spmm-grad", reduce, mode))
    src, dst = _graph(rng)
    x, w = rng.standard_normal((M, 3)), rng.standard_normal(E)
    weights = rng.standard_normal((N, 3))
    net = _SpmmLoss(src.astype(np.int32), dst.astype(np.int32), reduce, weights)
    grad_fn = ms.grad(net, grad_position=(0, 1))
    gx, gw = (ms.jit(grad_fn) if mode == "GRAPH" else grad_fn)(Tensor(x), Tensor(w))

    def loss_x(v):
        return float((_gspmm_oracle(reduce, v, src, dst, w) * weights).sum())

    def loss_w(v):
        return float((_gspmm_oracle(reduce, x, src, dst, v) * weights).sum())
    np.testing.assert_allclose(gx.asnumpy(), numeric_gradient(loss_x, x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gw.asnumpy(), numeric_gradient(loss_w, w), rtol=1e-6, atol=1e-6)


class _SddmmLoss(nn.Cell):
    def __init__(self, src, dst, op, weights):
        super().__init__()
        self.src, self.dst = Tensor(src), Tensor(dst)
        self.op = op
        self.weights = Tensor(weights)

    def construct(self, u, v):
        return (ms_scatter.gsddmm(u, v, self.src, self.dst, self.op) * self.weights).sum()


@pytest.mark.parametrize("op", GSDDMM_OPS)
def test_gsddmm_gradient_matches_finite_differences(mode, op):
    rng = np.random.default_rng(_seed("sddmm-grad", op, mode))
    src, dst = _graph(rng)
    u, v = rng.standard_normal((M, 3)), rng.standard_normal((N, 3))
    weights = rng.standard_normal((E,) if op == "dot" else (E, 3))
    net = _SddmmLoss(src.astype(np.int32), dst.astype(np.int32), op, weights)
    grad_fn = ms.grad(net, grad_position=(0, 1))
    gu, gv = (ms.jit(grad_fn) if mode == "GRAPH" else grad_fn)(Tensor(u), Tensor(v))
    np.testing.assert_allclose(gu.asnumpy(), numeric_gradient(
        lambda a: float((_gsddmm_oracle(op, a, v, src, dst) * weights).sum()), u), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gv.asnumpy(), numeric_gradient(
        lambda b: float((_gsddmm_oracle(op, u, b, src, dst) * weights).sum()), v), rtol=1e-6, atol=1e-6)


class _Gcn(nn.Cell):
    """A GCN layer on gspmm over learned node embeddings: D^-1/2 A D^-1/2 X W, with the
    normalisation as edge weights."""

    def __init__(self, x, src, dst, norm):
        super().__init__()
        self.x = Parameter(Tensor(x), "x")
        self.w = Parameter(Tensor(np.random.default_rng(3).standard_normal((3, 2)).astype(np.float32) * 0.5), "w")
        self.src, self.dst, self.norm = Tensor(src), Tensor(dst), Tensor(norm)

    def construct(self, target):
        h = ms_scatter.gspmm(self.x, self.src, self.dst, N, self.norm) @ self.w
        return ((h - target) ** 2).mean()


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
def test_a_gcn_layer_trains_in_a_graph_cell(mode):
    rng = np.random.default_rng(_seed("gcn"))
    src = np.concatenate([rng.integers(0, N, 12), np.arange(N)]).astype(np.int32)  # with self-loops
    dst = np.concatenate([rng.integers(0, N, 12), np.arange(N)]).astype(np.int32)
    degree = np.bincount(dst, minlength=N).astype(np.float32)
    norm = (1 / np.sqrt(degree[src] * degree[dst])).astype(np.float32)
    x = rng.standard_normal((N, 3)).astype(np.float32)
    target = rng.standard_normal((N, 2)).astype(np.float32)
    net = _Gcn(x, src, dst, norm)
    step = nn.TrainOneStepCell(net, nn.Adam(net.trainable_params(), learning_rate=0.05))
    losses = [float(step(Tensor(target)).asnumpy()) for _ in range(30)]
    assert losses[-1] < 0.7 * losses[0], losses
    before = ms_scatter.call_counts(entries=True)
    step(Tensor(target))
    after = ms_scatter.call_counts(entries=True)
    # the forward and d x (a gspmm over the reversed edges) on the fused kernel, no segment sum of
    # gathered messages (the composite's gradient)
    assert after["GspmmSum"] == before["GspmmSum"] + 2
    assert after["UnsortedSegmentSum"] == before["UnsortedSegmentSum"]


class _DynamicLoss(nn.Cell):
    def __init__(self, reduce, op):
        super().__init__()
        self.reduce, self.op = reduce, op

    def construct(self, x, src, dst, w):
        return (ms_scatter.gspmm(x, src, dst, N, w, reduce=self.reduce).sum()
                + ms_scatter.gsddmm(x, x, src, src, self.op).sum())


@pytest.mark.parametrize("reduce,op,shape", [("max", "add", (None, 3)), ("min", "mul", (None,)),
                                             ("mean", "dot", (None, 2, 2)), ("sum", "sub", (None,))])
def test_gradients_with_dynamic_shapes(mode, reduce, op, shape):
    """Gradients (x and edge_weight) of a graph compiled for unknown node and edge counts
    (and rank-1 features) against finite differences of the oracle, in float64."""
    grad = ms.grad(_DynamicLoss(reduce, op), grad_position=(0, 3))
    if mode == "GRAPH":
        class Grad(nn.Cell):
            def construct(self, x, src, dst, w):
                return grad(x, src, dst, w)
        net = Grad()
        net.set_inputs(Tensor(shape=list(shape), dtype=ms.float64), Tensor(shape=[None], dtype=ms.int32),
                       Tensor(shape=[None], dtype=ms.int32), Tensor(shape=[None], dtype=ms.float64))
    else:
        net = grad
    rng = np.random.default_rng(_seed("dynamic-grad", reduce, op, mode))
    nodes = M + 2
    x = rng.standard_normal((nodes,) + tuple(shape[1:]))
    src, dst = rng.integers(0, nodes, E).astype(np.int32), rng.integers(0, N, E).astype(np.int32)
    w = rng.standard_normal(E)
    gx, gw = net(Tensor(x), Tensor(src), Tensor(dst), Tensor(w))

    def loss(a, b):
        return float(_gspmm_oracle(reduce, a, src, dst, b).sum() + _gsddmm_oracle(op, a, a, src, src).sum())
    np.testing.assert_allclose(gx.asnumpy(), numeric_gradient(lambda a: loss(a, w), x), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gw.asnumpy(), numeric_gradient(lambda b: loss(x, b), w), rtol=1e-6, atol=1e-6)
