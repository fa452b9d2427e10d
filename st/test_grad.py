"""Gradients of all 21 operators through MindSpore (PYNATIVE, GRAPH, jit), against central
finite differences of the numpy loop oracle in float64 (seeded random cases with
duplicate indices), plus the rules finite differences cannot see: ties in Max/Min
(split equally among every value that reached the result) and zeros in Mul.

Each case differentiates loss = sum(op(input_x, indices, updates) * w) for a seeded
weight w, with respect to input_x (for the in-place families: the Parameter, as a
weight) and updates.
"""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor

from ms_scatter.testing import oracle, random_case, split_op

from .helpers import OPS, InPlaceLoss, OutOfPlaceLoss, callable_for, in_place

def _vectors(op, x, indices):
    family = split_op(op)[0]
    depth = 1 if family == "Scatter" else indices.shape[-1]
    return indices.reshape(-1, depth)


def finite_differences(op, x, indices, updates, w, eps=1e-6):
    def loss(x_, u_):
        return float((oracle(op, x_, indices, u_) * w).sum())

    x, updates = x.copy(), updates.copy()
    grads = []
    for arr in (x, updates):
        g = np.zeros_like(arr)
        for k in np.ndindex(arr.shape):
            orig = arr[k]
            arr[k] = orig + eps
            plus = loss(x, updates)
            arr[k] = orig - eps
            minus = loss(x, updates)
            arr[k] = orig
            g[k] = (plus - minus) / (2 * eps)
        grads.append(g)
    return grads


def tie_rule(op, x, indices, updates, w):
    """Max/Min: each output element's gradient split equally among input_x (if it equals
    the result) and every update equal to it."""
    out = oracle(op, x, indices, updates)
    vectors = _vectors(op, x, indices)
    upd = updates.reshape((len(vectors),) + x.shape[vectors.shape[1]:])
    count = (x == out).astype(np.float64)
    for k, vec in enumerate(vectors):
        dest = tuple(int(v) for v in vec)
        count[dest] += upd[k] == out[dest]
    count = np.maximum(count, 1)
    gx = w * (x == out) / count
    gu = np.zeros_like(upd)
    for k, vec in enumerate(vectors):
        dest = tuple(int(v) for v in vec)
        gu[k] = w[dest] * (upd[k] == out[dest]) / count[dest]
    return gx, gu.reshape(updates.shape)


def ms_gradients(op, kind, mode, x, indices, updates, w):
    """(d input_x, d updates, input_x after the call) through MindSpore."""
    fn = callable_for(op, kind)
    i, u = Tensor(indices), Tensor(updates)
    if in_place(op):
        net = InPlaceLoss(fn, x, w)
        if mode == "JIT":
            net.construct = ms.jit(net.construct)
        gu, (gx,) = ms.grad(net, grad_position=1, weights=[net.p])(i, u)
        return gx.asnumpy(), gu.asnumpy(), net.p.asnumpy()
    net = OutOfPlaceLoss(fn, w)
    if mode == "JIT":
        net.construct = ms.jit(net.construct)
    gx, gu = ms.grad(net, grad_position=(0, 2))(Tensor(x), i, u)
    return gx.asnumpy(), gu.asnumpy(), x


def _f32_exact(a):
    # MindSpore 2.10 quirk: in GRAPH mode (and under jit) the values of a float64
    # Parameter that a gradient reads are rounded to float32 (even for (p * u).sum()), so
    # the data are float32-representable float64 values; the arithmetic stays float64.
    return a.astype(np.float32).astype(a.dtype) if a.dtype == np.float64 else a


def _case(op, seed, dtype="float64"):
    rng = np.random.default_rng(seed)
    index_dtype = ("int32", "int64")[seed % 2]
    x, indices, updates = random_case(rng, op, (5, 3), 6, dtype, index_dtype, duplicates=True)
    w = rng.standard_normal(x.shape)
    return _f32_exact(x), indices, _f32_exact(updates), w


def _cases():
    out = []
    for n, op in enumerate(OPS):
        for kind in ("primitive", "function"):
            for mode in ("PYNATIVE", "GRAPH", "JIT"):
                if mode == "JIT" and kind == "primitive":
                    continue
                out.append(pytest.param(op, kind, mode, 100 + n, id=f"{op}-{kind}-{mode}"))
    return out


@pytest.mark.parametrize("op, kind, mode_name, seed", _cases())
def test_gradient_matches_finite_differences(op, kind, mode_name, seed):
    with _mode(mode_name):
        x, indices, updates, w = _case(op, seed)
        gx, gu, after = ms_gradients(op, kind, mode_name, x, indices, updates, w)
    fx, fu = finite_differences(op, x, indices, updates, w)
    np.testing.assert_allclose(gx, fx, rtol=1e-6, atol=1e-6, err_msg=f"{op} d input_x")
    np.testing.assert_allclose(gu, fu, rtol=1e-6, atol=1e-6, err_msg=f"{op} d updates")
    if in_place(op):  # the forward still did its job
        np.testing.assert_array_equal(after, oracle(op, x, indices, updates))


class _mode:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.previous = ms.get_context("mode")
        ms.set_context(mode=ms.GRAPH_MODE if self.name == "GRAPH" else ms.PYNATIVE_MODE)

    def __exit__(self, *exc):
        ms.set_context(mode=self.previous)


def _tie_case(op, seed):
    """Values in {0, 1, 2} with many duplicate indices: two- and three-way ties."""
    rng = np.random.default_rng(seed)
    x, indices, updates = random_case(rng, op, (2, 3), 12, "float64", "int32", duplicates=True, depth=1)
    x = rng.integers(0, 3, size=x.shape).astype(np.float64)
    updates = rng.integers(0, 3, size=updates.shape).astype(np.float64)
    return x, indices, updates, rng.standard_normal(x.shape)


MAX_MIN = [op for op in OPS if split_op(op)[1] in ("Max", "Min")]


@pytest.mark.parametrize("mode_name", ["PYNATIVE", "GRAPH"])
@pytest.mark.parametrize("op", MAX_MIN)
def test_ties_split_equally(op, mode_name):
    x, indices, updates, w = _tie_case(op, 7)
    gx, gu = tie_rule(op, x, indices, updates, w)
    with _mode(mode_name):
        mx, mu, _ = ms_gradients(op, "function", mode_name, x, indices, updates, w)
    np.testing.assert_allclose(mx, gx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(mu, gu, rtol=1e-12, atol=1e-12)
    # the case has ties of three values or more, where one-sided finite differences
    # would say 1/2: the split is by the number of winners
    out = oracle(op, x, indices, updates)
    vectors = _vectors(op, x, indices)
    hits = np.zeros(out.shape)
    upd = updates.reshape((len(vectors),) + x.shape[vectors.shape[1]:])
    for k, vec in enumerate(vectors):
        hits[tuple(int(v) for v in vec)] += upd[k] == out[tuple(int(v) for v in vec)]
    assert ((hits + (x == out)) >= 3).any()


MUL = [op for op in OPS if split_op(op)[1] == "Mul"]


@pytest.mark.parametrize("mode_name", ["PYNATIVE", "GRAPH"])
@pytest.mark.parametrize("op", MUL)
def test_mul_with_zero_updates(op, mode_name):
    """A slot with one zero update gives that update the product of the others; a slot
    with two zeros gives every update zero; input_x gets dout * product."""
    rng = np.random.default_rng(11)
    x, indices, updates, w = _case(op, 11)
    vectors = _vectors(op, x, indices)
    counts = {}
    for k, vec in enumerate(vectors):
        counts.setdefault(tuple(vec), []).append(k)
    slots = sorted((ks for ks in counts.values() if len(ks) >= 2), key=len, reverse=True)
    assert slots, "the seeded case must hit one slot twice"
    flat = updates.reshape((len(vectors),) + x.shape[vectors.shape[1]:])
    flat[slots[0][0]] = 0  # one zero in a shared slot
    if len(slots) > 1:
        flat[slots[1][0]] = flat[slots[1][1]] = 0  # two zeros in another
    flat[rng.integers(len(vectors))] = 0
    updates = flat.reshape(updates.shape)
    with _mode(mode_name):
        gx, gu, _ = ms_gradients(op, "function", mode_name, x, indices, updates, w)
    fx, fu = finite_differences(op, x, indices, updates, w)
    np.testing.assert_allclose(gx, fx, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gu, fu, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", ["TensorScatterMul", "ScatterNdMax", "ScatterDiv", "ScatterUpdate"])
def test_low_precision_gradients(op, dtype):
    """The same rules in float32/float16, close to the float64 gradients."""
    x, indices, updates, w = _case(op, 5)
    with _mode("PYNATIVE"):
        gx64, gu64, _ = ms_gradients(op, "function", "PYNATIVE", x, indices, updates, w)
        gx, gu, _ = ms_gradients(op, "function", "PYNATIVE", x.astype(dtype), indices,
                                 updates.astype(dtype), w.astype(dtype))
    tol = 1e-4 if dtype == "float32" else 3e-2
    scale = max(np.abs(gx64).max(), np.abs(gu64).max(), 1)
    assert gx.dtype == gu.dtype == np.dtype(dtype)
    np.testing.assert_allclose(gx, gx64, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(gu, gu64, rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("op", ["TensorScatterAdd", "ScatterMax"])
def test_integer_gradients_are_zero(op):
    x, indices, updates, w = _case(op, 9, dtype="int32")
    with _mode("PYNATIVE"):
        gx, gu, _ = ms_gradients(op, "function", "PYNATIVE", x, indices, updates, w.astype(np.int32))
    assert not gx.any() and not gu.any()


@pytest.mark.parametrize("mode_name", ["PYNATIVE", "GRAPH"])
@pytest.mark.parametrize("op", MAX_MIN)
def test_max_min_gradients_run_the_fused_kernels(op, mode_name):
    """On the CPU Max/Min's rule is the library's fused tie-gradient kernels and its gathers
    the library's gather (kernels/cpu/message.h): the tie rule exactly, with NaN updates (a
    NaN result passes no gradient) and slots no update reaches (input_x keeps dout)."""
    import ms_scatter  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(21)
    x, indices, updates, w = _tie_case(op, 21)
    x = np.concatenate([x, rng.integers(0, 3, x.shape).astype(np.float64)])  # rows no vector reaches
    w = np.concatenate([w, rng.standard_normal(w.shape)])
    updates.reshape(-1)[3] = np.nan
    gx, gu = tie_rule(op, x, indices, updates, w)
    before = ms_scatter.call_counts()
    with _mode(mode_name):
        mx, mu, _ = ms_gradients(op, "function", mode_name, x, indices, updates, w)
    after = ms_scatter.call_counts()
    assert after.get("ScatterTieGrad", 0) - before.get("ScatterTieGrad", 0) >= 2
    assert after.get("ScatterGradGather", 0) > before.get("ScatterGradGather", 0)
    np.testing.assert_array_equal(mx, gx)
    np.testing.assert_array_equal(mu, gu)
    assert np.isnan(oracle(op, x, indices, updates)).any() and (mu == 0).any()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("op", ["TensorScatterMax", "ScatterNdMin"])
def test_fused_tie_gradients_match_the_composite_rule(op, dtype):
    """The fused kernels give the composite rule's bits (ops/_grad.py _RULES: MindSpore ops and
    our TensorScatter kernels), the count and share rounded to the dtype as it rounds them."""
    import mindspore.common.dtype as mstype  # pylint: disable=import-outside-toplevel
    from ms_scatter import _grad  # pylint: disable=import-outside-toplevel
    rng = np.random.default_rng(5)
    x, indices, updates = random_case(rng, op, (6, 4), 40, "float32", "int64", duplicates=True, depth=2)
    x = rng.integers(0, 3, x.shape).astype(np.float32)
    updates = rng.integers(0, 3, updates.shape).astype(np.float32)
    w = rng.standard_normal(x.shape).astype(np.float32) * 100
    out = oracle(op, x, indices, updates)
    vectors = _vectors(op, x, indices)
    flat = updates.reshape((len(vectors),) + x.shape[vectors.shape[1]:])
    xg = np.stack([x[tuple(v)] for v in vectors])
    ms_dtype = getattr(mstype, dtype)
    compute = mstype.float32 if dtype == "bfloat16" else ms_dtype
    args = [Tensor(a).astype(ms_dtype).astype(compute) for a in (out, w)]
    idx, xs, upd = Tensor(vectors), Tensor(xg).astype(ms_dtype).astype(compute), \
        Tensor(flat).astype(ms_dtype).astype(compute)
    reduction = split_op(op)[1]
    with _mode("PYNATIVE"):
        fx = _grad._TIE_GRAD_X(args[0], args[1], idx, xs, upd)
        fu = _grad._TIE_GRAD_UPDATES(args[0], args[1], idx, xs, upd)
        cx, cu = _grad._RULES[reduction](args[1], idx, upd, xs, args[0])
    for fused, composite in ((fx, cx), (fu, cu)):
        a = fused.astype(mstype.float32).asnumpy()
        b = composite.astype(mstype.float32).asnumpy()
        np.testing.assert_array_equal(a, b)
    assert (np.abs(cu.astype(mstype.float32).asnumpy()) > 0).sum() > 10
