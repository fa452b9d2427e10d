"""mindspore.vmap over the 21 primitives and 21 functions (ops/_vmap.py).

Every case is compared, exactly, with a Python loop over the batch that calls the same
operator form (primitive or function) once per batch element in PYNATIVE, and that loop
with the numpy oracle. A sampled product, seeded:

* PYNATIVE: every operator and form with every accepted in_axes combination (batched /
  None for input_x, indices, updates);
* GRAPH (vmap inside an nn.Cell that holds the Parameter): every operator and form, two
  combinations each, rotating; JIT (vmap inside an @mindspore.jit function): every
  function once.

Value dtypes, index dtypes and index depth rotate; every batch element has a duplicate
index vector. In-place operators: the Parameter is batched at axis 0 (or nothing is
batched) and updated in place; input_x unbatched while indices or updates are batched,
or batched at another axis, is a ValueError and leaves the Parameter unchanged.

Also: batch axes other than 0 and out_axes, nested vmap, edge index shapes, ops that see
only unbatched operands, a bad index, other Custom ops keeping their rule, and the
MindSpore quirk behind the float64 special case (test_float64_parameter_output_...).
"""
import contextlib
import zlib

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn, ops
from mindspore.ops._vmap.vmap_base import vmap_rules_getters
from mindspore.ops.primitive import Primitive

import ms_scatter
from ms_scatter import _vmap
from ms_scatter.testing import oracle, random_case, split_op

from .helpers import INDEX_DTYPES, OPS, VALUE_DTYPES as _ALL_DTYPES, assert_same, assert_unchanged, callable_for, in_place

# MindSpore 2.10's CPU kernels of the ops that batching needs (ExpandDims, BroadcastTo, Transpose)
# have no bfloat16: vmap over bfloat16 fails in MindSpore before our kernel runs.
VALUE_DTYPES = tuple(d for d in _ALL_DTYPES if d != "bfloat16")

B = 3  # batch size
KINDS = ("primitive", "function")
IN_PLACE_AXES = [(0, 0, 0), (0, 0, None), (0, None, 0), (0, None, None)]
TENSOR_SCATTER_AXES = [(0, 0, 0), (0, 0, None), (0, None, 0), (None, 0, 0), (0, None, None), (None, 0, None),
                       (None, None, 0)]
BAD_IN_PLACE_AXES = [(None, 0, 0), (None, 0, None), (None, None, 0)]

pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the oracle's float16 cast


def _seed(*parts):
    return zlib.crc32("/".join(str(p) for p in parts).encode())


def _axes_for(op):
    return IN_PLACE_AXES if in_place(op) else TENSOR_SCATTER_AXES


def _axes_id(axes):
    return "".join("N" if a is None else str(a) for a in axes)


def _params():
    """(mode, op, kind, in_axes, dtype, index_dtype, depth) of the sampled product."""
    cases = []
    for n, op in enumerate(OPS):
        all_axes = _axes_for(op)
        for k, kind in enumerate(KINDS):
            for j, axes in enumerate(all_axes):
                cases.append(("PYNATIVE", op, kind, axes, VALUE_DTYPES[(n + 3 * k + j) % len(VALUE_DTYPES)],
                              INDEX_DTYPES[(n + k + j) % 2], 1 + (n + j) % 3))
            for j in range(2):
                axes = all_axes[(n + 2 * k + j) % len(all_axes)]
                cases.append(("GRAPH", op, kind, axes, VALUE_DTYPES[(5 * n + k + 2 * j + 1) % len(VALUE_DTYPES)],
                              INDEX_DTYPES[(n + j) % 2], 1 + (n + k + j) % 3))
        axes = all_axes[(3 * n + 1) % len(all_axes)]
        cases.append(("JIT", op, "function", axes, VALUE_DTYPES[(3 * n + 2) % len(VALUE_DTYPES)], INDEX_DTYPES[n % 2],
                      1 + n % 3))
    return cases


def _batch(op, dtype, index_dtype, depth, seed, x_shape=(4, 3, 2), n_index=6):
    """B independent cases (x, indices, updates) stacked on axis 0; each element's second
    index vector repeats its first (a duplicate in every batch element)."""
    rng = np.random.default_rng(seed)
    family, _ = split_op(op)
    depth = None if family == "Scatter" else depth
    xs, idx, upd = [], [], []
    for _ in range(B):
        x, i, u = random_case(rng, op, x_shape, n_index, dtype, index_dtype, True, depth)
        vectors = i.reshape(-1) if family == "Scatter" else i.reshape(-1, i.shape[-1])
        vectors[1] = vectors[0]
        xs.append(x)
        idx.append(i)
        upd.append(u)
    return np.stack(xs), np.stack(idx), np.stack(upd)


def _pick(stacked, axis):
    """The operand as vmap gets it: the whole batch (axis 0) or batch element 0 (None)."""
    return stacked if axis is not None else stacked[0]


def _element(arg, axis, b):
    return arg if axis is None else np.take(arg, b, axis=axis)


@contextlib.contextmanager
def _pynative():
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    try:
        yield
    finally:
        ms.set_context(mode=previous)


def _loop(op, kind, axes, x, indices, updates, **kwargs):
    """The Python loop over the batch: the same operator form, once per batch element, in
    PYNATIVE. Returns (outputs stacked, input_x of each element afterwards stacked)."""
    fn = callable_for(op, kind, **kwargs)
    outs, after = [], []
    with _pynative():
        for b in range(B):
            xb = _element(x, axes[0], b)
            target = Parameter(Tensor(xb.copy()), name=f"loop{b}") if in_place(op) else Tensor(xb)
            out = fn(target, Tensor(_element(indices, axes[1], b)), Tensor(_element(updates, axes[2], b)))
            outs.append(out.asnumpy())
            after.append(target.asnumpy())
            assert_same(outs[-1], oracle(op, xb, _element(indices, axes[1], b), _element(updates, axes[2], b)),
                        f"loop element {b} against the oracle")
    return np.stack(outs), np.stack(after)


def _as_function(fn):
    """vmap takes a function, not a primitive (MindSpore: 'PrimitiveAbstractClosure ...
    cast to FuncGraphAbstractClosure failed')."""
    if not isinstance(fn, Primitive):
        return fn

    def call(x, indices, updates):
        return fn(x, indices, updates)
    return call


class _InPlaceVmapCell(nn.Cell):
    def __init__(self, param, fn, in_axes, out_axes=0):
        super().__init__()
        self.p = param
        self.fn = fn
        self.in_axes = in_axes
        self.out_axes = out_axes

    def construct(self, indices, updates):
        return ms.vmap(self.fn, self.in_axes, self.out_axes)(self.p, indices, updates)


class _VmapCell(nn.Cell):
    def __init__(self, fn, in_axes, out_axes=0):
        super().__init__()
        self.fn = fn
        self.in_axes = in_axes
        self.out_axes = out_axes

    def construct(self, x, indices, updates):
        return ms.vmap(self.fn, self.in_axes, self.out_axes)(x, indices, updates)


def _run_vmap(mode, fn, in_axes, target, indices, updates, out_axes=0):
    """vmap(fn) on (target, indices, updates) in `mode`: target is the Parameter (in
    place) or the input Tensor."""
    fn = _as_function(fn)
    indices, updates = Tensor(indices), Tensor(updates)
    if mode == "GRAPH":
        if isinstance(target, Parameter):
            return _InPlaceVmapCell(target, fn, in_axes, out_axes)(indices, updates)
        return _VmapCell(fn, in_axes, out_axes)(target, indices, updates)
    if mode == "JIT":
        @ms.jit
        def call(x, i, u):
            return ms.vmap(fn, in_axes, out_axes)(x, i, u)
        return call(target, indices, updates)
    return ms.vmap(fn, in_axes, out_axes)(target, indices, updates)


@pytest.mark.parametrize(
    "mode, op, kind, axes, dtype, index_dtype, depth",
    [pytest.param(*c, id=f"{c[0]}-{c[1]}-{c[2]}-{_axes_id(c[3])}-{c[4]}-{c[5]}-d{c[6]}") for c in _params()],
    indirect=["mode"])
def test_vmap_matches_loop(mode, op, kind, axes, dtype, index_dtype, depth):
    xs, idx, upd = _batch(op, dtype, index_dtype, depth, _seed(mode, op, kind, axes, dtype))
    x, indices, updates = _pick(xs, axes[0]), _pick(idx, axes[1]), _pick(upd, axes[2])
    expected, expected_x = _loop(op, kind, axes, x, indices, updates)
    target = Parameter(Tensor(x.copy()), name="p") if in_place(op) else Tensor(x)
    out = _run_vmap(mode, callable_for(op, kind), axes, target, indices, updates)
    assert_same(out.asnumpy(), expected, "vmap output")
    if in_place(op):
        assert_same(target.asnumpy(), expected_x, "the Parameter after vmap")
    else:
        assert_unchanged(target, x)


def _bad_params():
    cases = []
    for n, op in enumerate(o for o in OPS if in_place(o)):
        for k, kind in enumerate(KINDS):
            cases.append(("PYNATIVE", op, kind, BAD_IN_PLACE_AXES[(n + k) % 3]))
    for n, family in enumerate(("Scatter", "ScatterNd")):
        for k, kind in enumerate(KINDS):
            cases.append(("GRAPH", family + ("Max", "Update")[k], kind, BAD_IN_PLACE_AXES[(n + 2 * k) % 3]))
    cases.append(("JIT", "ScatterNdSub", "function", (None, 0, 0)))
    return cases


@pytest.mark.parametrize("mode, op, kind, axes", [pytest.param(*c, id=f"{c[0]}-{c[1]}-{c[2]}-{_axes_id(c[3])}")
                                                  for c in _bad_params()], indirect=["mode"])
def test_unbatched_parameter_with_batched_operands_is_an_error(mode, op, kind, axes):
    xs, idx, upd = _batch(op, "float32", "int32", 2, _seed("bad", op, kind, axes))
    x, indices, updates = xs[0], _pick(idx, axes[1]), _pick(upd, axes[2])
    param = Parameter(Tensor(x.copy()), name="p")
    with pytest.raises(ValueError, match=rf"^For '{op}', under vmap 'input_x' is updated in place, so it must be "
                                         rf"batched .*, but got source axes input_x None, "
                                         rf"indices {axes[1]}, updates {axes[2]}\."):
        _run_vmap(mode, callable_for(op, kind), axes, param, indices, updates)
    assert_unchanged(param, x, "the Parameter")


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("op, kind", [("ScatterAdd", "function"), ("ScatterNdMin", "primitive")])
def test_parameter_batched_at_another_axis_is_an_error(mode, op, kind):
    xs, idx, upd = _batch(op, "float32", "int64", 1, _seed("axis1", op, kind))
    x = np.ascontiguousarray(np.moveaxis(xs, 0, 1))
    param = Parameter(Tensor(x.copy()), name="p")
    with pytest.raises(ValueError, match=rf"^For '{op}', under vmap the source axis of 'input_x' \(updated in place\) "
                                         rf"must be 0 or None, but got 1\."):
        _run_vmap(mode, callable_for(op, kind), (1, 0, 0), param, idx, upd)
    assert_unchanged(param, x, "the Parameter")


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("op, kind, in_axes, out_axes, kwargs", [
    ("TensorScatterMax", "primitive", (2, 1, 2), 1, {}),
    ("TensorScatterUpdate", "function", (None, 1, 0), 2, {}),
    ("ScatterMul", "function", (0, 1, 2), 0, {}),
    ("ScatterNdDiv", "primitive", (0, 1, None), 0, {}),
    ("ScatterSub", "primitive", (0, 2, 1), 0, {"use_locking": True}),
])
def test_other_axes(mode, op, kind, in_axes, out_axes, kwargs):
    """Batch axes other than 0 for indices / updates (and input_x of TensorScatter*), and
    out_axes: the rule moves them to the front. (And a primitive with use_locking=True.)"""
    xs, idx, upd = _batch(op, "float32", "int64", 2, _seed("axes", op, kind))
    front = tuple(None if a is None else 0 for a in in_axes)
    x, indices, updates = _pick(xs, front[0]), _pick(idx, front[1]), _pick(upd, front[2])
    expected, expected_x = _loop(op, kind, front, x, indices, updates, **kwargs)
    x, indices, updates = (a if axis is None else np.moveaxis(a, 0, axis).copy()
                           for a, axis in zip((x, indices, updates), in_axes))
    target = Parameter(Tensor(x.copy()), name="p") if in_place(op) else Tensor(x)
    out = _run_vmap(mode, callable_for(op, kind, **kwargs), in_axes, target, indices, updates, out_axes)
    assert_same(out.asnumpy(), np.moveaxis(expected, 0, out_axes), "vmap output")
    if in_place(op):
        assert_same(target.asnumpy(), expected_x, "the Parameter after vmap")


def _inner_scatter_add(x, indices, updates):
    return ms.vmap(ms_scatter.scatter_add, (0, 0, 0))(x, indices, updates)


def _inner_tensor_scatter_min(x, indices, updates):
    return ms.vmap(ms_scatter.tensor_scatter_min, (None, 0, 0))(x, indices, updates)


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
def test_nested_vmap(mode):
    """vmap of vmap: the inner rule turns Scatter* into ScatterNd*, whose rule the outer
    vmap then applies; the Parameter (batched on both axes) is updated in place."""
    rng = np.random.default_rng(_seed("nested", mode))
    x = rng.standard_normal((2, B, 5, 3)).astype(np.float32)
    indices = rng.integers(0, 5, size=(2, B, 4)).astype(np.int32)
    indices[..., 1] = indices[..., 0]
    updates = rng.standard_normal((2, B, 4, 3)).astype(np.float32)
    expected = np.stack([np.stack([oracle("ScatterAdd", x[a, b], indices[a, b], updates[a, b]) for b in range(B)])
                         for a in range(2)])
    param = Parameter(Tensor(x.copy()), name="p")
    out = _run_vmap(mode, _inner_scatter_add, (0, 0, 0), param, indices, updates)
    assert_same(out.asnumpy(), expected, "nested vmap output")
    assert_same(param.asnumpy(), expected, "the Parameter")

    ts_expected = np.stack([np.stack([oracle("TensorScatterMin", x[a, 0], indices[a, b, :, None], updates[0, b])
                                      for b in range(B)]) for a in range(2)])
    out = _run_vmap(mode, _inner_tensor_scatter_min, (0, 0, None), Tensor(x[:, 0].copy()), indices[..., None].copy(),
                    updates[0])
    assert_same(out.asnumpy(), ts_expected, "nested TensorScatter output")


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("op, x_shape, indices_shape", [
    ("ScatterUpdate", (4, 2), ()),        # one index per element: batched indices of shape (B,)
    ("ScatterNdAdd", (4, 3), (2,)),       # one index vector of depth 2 (indices of rank 1)
    ("TensorScatterSub", (4, 3), (5, 2)),  # depth == rank: updates are scalars
])
def test_edge_shapes(mode, op, x_shape, indices_shape):
    rng = np.random.default_rng(_seed("edge", op))
    depth = 1 if split_op(op)[0] == "Scatter" else indices_shape[-1]
    x = rng.integers(-9, 9, size=(B,) + x_shape).astype(np.int32)
    idx_shape = (B,) + (indices_shape if split_op(op)[0] == "Scatter" else indices_shape[:-1])
    cols = [rng.integers(0, x_shape[d], size=idx_shape) for d in range(depth)]
    indices = np.stack(cols, -1) if split_op(op)[0] != "Scatter" else cols[0]
    if split_op(op)[0] == "Scatter":
        upd_shape = idx_shape + x_shape[1:]
    else:
        upd_shape = idx_shape + x_shape[depth:]
    updates = rng.integers(-9, 9, size=upd_shape).astype(np.int32)
    expected, expected_x = _loop(op, "function", (0, 0, 0), x, indices, updates)
    target = Parameter(Tensor(x.copy()), name="p") if in_place(op) else Tensor(x)
    out = _run_vmap(mode, callable_for(op, "function"), (0, 0, 0), target, indices, updates)
    assert_same(out.asnumpy(), expected, "vmap output")
    if in_place(op):
        assert_same(target.asnumpy(), expected_x, "the Parameter")


def _unbatched_ops(a, p, x, indices, updates):
    """Inside vmap over `a` only: both ops see unbatched operands."""
    ms_scatter.scatter_nd_mul(p, indices, updates)
    return a * 2, ms_scatter.tensor_scatter_div(x, indices, updates)


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
def test_unbatched_operands_inside_vmap(mode):
    """An op whose operands are all unbatched runs once, unbatched (MindSpore's convention
    for its own rules): the Parameter takes the update once; the TensorScatter result is
    the same for every batch element."""
    xs, idx, upd = _batch("ScatterNdMul", "int16", "int32", 2, _seed("unbatched", mode))
    x, indices, updates = xs[0], idx[0], upd[0]
    param = Parameter(Tensor(x.copy()), name="p")
    a = np.arange(B, dtype=np.float32)
    if mode == "GRAPH":
        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.p = param

            def construct(self, a, x, indices, updates):
                return ms.vmap(_unbatched_ops, (0, None, None, None, None))(a, self.p, x, indices, updates)
        doubled, out = Net()(Tensor(a), Tensor(x), Tensor(indices), Tensor(updates))
    else:
        doubled, out = ms.vmap(_unbatched_ops, (0, None, None, None, None))(
            Tensor(a), param, Tensor(x), Tensor(indices), Tensor(updates))
    assert_same(doubled.asnumpy(), 2 * a, "a * 2")
    assert_same(param.asnumpy(), oracle("ScatterNdMul", x, indices, updates), "the Parameter (updated once)")
    assert_same(out.asnumpy(), np.stack([oracle("TensorScatterDiv", x, indices, updates)] * B), "TensorScatterDiv")


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_out_of_range_index_under_vmap(mode):
    """vmap runs a compiled graph even in PYNATIVE: a bad index gives MindSpore's generic
    RuntimeError (as in GRAPH mode); the kernel's message is in last_error(), in terms
    of the batched call. The Parameter is left as it was."""
    xs, idx, upd = _batch("ScatterNdAdd", "float32", "int32", 1, _seed("oor"))
    idx[1, 2, 0, 0] = 4
    param = Parameter(Tensor(xs.copy()), name="p")
    with pytest.raises(RuntimeError):
        _run_vmap(mode, ms_scatter.scatter_nd_add, (0, 0, 0), param, idx, upd)
    assert_unchanged(param, xs, "the Parameter")
    code, message, _ = ms_scatter.last_error()
    assert code == 2 and "each value of 'indices' must be in [0, 4)" in message and "but got 4" in message


def _double(a):
    return a * 2


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_other_custom_ops_keep_their_rule(mode, monkeypatch):
    """The one "Custom" getter hands other Custom ops to the rule registered before ours,
    or to none (MindSpore's general loop-and-stack rule), as without ms_scatter."""
    assert vmap_rules_getters.get("Custom", None) is _vmap.get_custom_vmap_rule
    double = ops.Custom(_double, out_shape=lambda s: s, out_dtype=lambda t: t, func_type="pyfunc")

    def fn(a):
        return double(a)
    x = np.arange(12, dtype=np.float32).reshape(B, 4)
    assert_same(ms.vmap(fn, 0)(Tensor(x)).asnumpy(), 2 * x, "vmap of a pyfunc Custom op")
    assert _vmap.get_custom_vmap_rule(double, B) is None
    assert _vmap.get_custom_vmap_rule("Custom", B) is None

    seen = []
    monkeypatch.setattr(_vmap, "_previous_getter", lambda prim, size: seen.append((prim, size)) or "theirs")
    assert _vmap.get_custom_vmap_rule(double, B) == "theirs" and seen == [(double, B)]
    assert callable(_vmap.get_custom_vmap_rule(ms_scatter.TensorScatterAdd(), B))


class _TimesOne(nn.Cell):
    def __init__(self, x):
        super().__init__()
        self.p = Parameter(Tensor(x), name="p")

    def construct(self):
        return self.p * 1


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
def test_float64_parameter_output_rounded_by_mindspore(mode):
    """The MindSpore 2.10 quirk behind the float64 special case above, without ms_scatter
    or vmap: a graph output that is a float64 Parameter read after a Load (here `p * 1`,
    simplified to p; under vmap, the in-place function's Depend(p, token)) is copied out
    by a TensorMove that has no float64 CPU kernel, so the backend wraps it in casts to
    float32 and back. The Parameter itself is exact. (Our float64 in-place results are the
    kernel's own copy, exact: ops/_grad.py.) If this fails, MindSpore fixed it: drop the
    notes in docs/guide/vmap.md and policies.md and the special case in
    st/test_in_place_results.py."""
    x = np.random.default_rng(_seed("f64")).standard_normal((3, 4))
    out = _TimesOne(x.copy())().asnumpy()
    assert out.dtype == np.float64
    assert not np.array_equal(out, x)
    assert_same(out, x.astype(np.float32).astype(np.float64), "p * 1")
