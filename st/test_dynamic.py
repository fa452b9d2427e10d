"""Dynamic shapes through MindSpore: every primitive and function in GRAPH mode with
``Cell.set_inputs`` (unknown dimensions, and unknown rank) and under
``@mindspore.jit(dynamic=1)``, gradients of dynamic-shape graphs, and the errors.

* One compiled Cell per operator runs its primitive and its function on two input
  sets, one with unknown dimensions and one of unknown rank, for several distinct shapes
  (number of index vectors, index batch rank, index depth, input_x's shape for
  TensorScatter*); each result and each Parameter afterwards equals the numpy oracle,
  exactly.
* jit(dynamic=1): MindSpore compiles a dynamic-shape graph from the third distinct
  shape on; four shapes per operator, both forms.
* Gradients of dynamic-shape graphs (every reduction, each family) against finite
  differences of the oracle (Max/Min: the equal-split rule).
* Errors: an out-of-range index fails the step and leaves the Parameter as it was; a
  shape mismatch that only the launch can see raises MindSpore's RuntimeError with our
  message naming the op; one visible at compile time is the ValueError of the static
  path. After any of these, eager calls (of the very primitive that failed) and fresh
  Cells work. (MindSpore does not run again a compiled graph whose step failed, for
  its built-ins too: a fresh Cell is the way on.)
"""
import re

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn

import ms_scatter
from ms_scatter.testing import oracle, random_case, split_op

from .helpers import (INDEX_DTYPES, OPS, VALUE_DTYPES, InPlaceLoss, OutOfPlaceLoss, assert_same, assert_unchanged,
                      function_name, in_place)
from .test_grad import _f32_exact, finite_differences, tie_rule

GRAPH = pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
PYNATIVE = pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)


def _forms(op):
    return getattr(ms_scatter, op)(), getattr(ms_scatter, function_name(op))


def _case(rng, op, x_shape, batch, dtype, index_dtype, depth=None):
    """(x, indices, updates) with index vectors in the batch shape `batch`."""
    family = split_op(op)[0]
    depth = 1 if family == "Scatter" else (depth or 1)
    n = int(np.prod(batch))
    x, indices, updates = random_case(rng, op, x_shape, n, dtype, index_dtype, True, depth)
    indices = indices.reshape(batch if family == "Scatter" else batch + (depth,))
    return x, indices, updates.reshape(batch + tuple(x_shape[depth:]))


def _spec(shape, dtype):
    return Tensor(shape=shape, dtype=getattr(ms, dtype))


# ------------------------------------------------------------------ GRAPH, set_inputs

class _InPlaceBoth(nn.Cell):
    """Primitive and function on set A (unknown dimensions) and set B (unknown rank)."""

    def __init__(self, prim, fn, x):
        super().__init__()
        self.prim, self.fn = prim, fn
        self.pa = Parameter(Tensor(x), name="pa")
        self.fa = Parameter(Tensor(x), name="fa")
        self.pb = Parameter(Tensor(x), name="pb")
        self.fb = Parameter(Tensor(x), name="fb")

    def construct(self, ia, ua, ib, ub):
        return (self.prim(self.pa, ia, ua), self.fn(self.fa, ia, ua),
                self.prim(self.pb, ib, ub), self.fn(self.fb, ib, ub))


class _OutOfPlaceBoth(nn.Cell):
    def __init__(self, prim, fn):
        super().__init__()
        self.prim, self.fn = prim, fn

    def construct(self, xa, ia, ua, xb, ib, ub):
        return self.prim(xa, ia, ua), self.fn(xa, ia, ua), self.prim(xb, ib, ub), self.fn(xb, ib, ub)


# Shapes of the calls: set A keeps every rank (number of index vectors varies; for
# TensorScatter also input_x's first dimension), set B changes ranks and depths.
A_CALLS = [(6, 2), (6, 5), (9, 1)]  # (input_x's first dimension for TensorScatter, index vectors)
B_CALLS = [((6, 4), (3,), 1), ((6, 4), (2, 2), 2), ((5, 2, 3), (4,), 2)]  # (x shape, batch, depth)


@GRAPH
@pytest.mark.parametrize("op", OPS)
def test_set_inputs_unknown_dims_and_rank(mode, op):
    family = split_op(op)[0]
    n_op = OPS.index(op)
    dtype, index_dtype = VALUE_DTYPES[n_op % 8], INDEX_DTYPES[n_op % 2]
    rng = np.random.default_rng(1000 + n_op)
    prim, fn = _forms(op)
    nd = family != "Scatter"
    a_spec = (_spec([None] + ([1] if nd else []), index_dtype), _spec([None, 4], dtype))
    b_spec = (_spec(None, index_dtype), _spec(None, dtype))
    if in_place(op):
        x0 = _case(rng, op, (6, 4), (1,), dtype, index_dtype)[0]
        net = _InPlaceBoth(prim, fn, x0)
        net.set_inputs(*a_spec, *b_spec)
        expected_a = expected_b = x0
        for (_, n), (_, batch, depth) in zip(A_CALLS, B_CALLS):
            _, ia, ua = _case(rng, op, (6, 4), (n,), dtype, index_dtype)
            _, ib, ub = _case(rng, op, (6, 4), batch, dtype, index_dtype, min(depth, 2))
            outs = net(Tensor(ia), Tensor(ua), Tensor(ib), Tensor(ub))
            expected_a = oracle(op, expected_a, ia, ua)
            expected_b = oracle(op, expected_b, ib, ub)
            for out, param, expected in zip(outs, (net.pa, net.fa, net.pb, net.fb),
                                            (expected_a, expected_a, expected_b, expected_b)):
                assert_same(out.asnumpy(), expected, f"{op} result, indices {ia.shape} / {ib.shape}")
                assert_same(param.asnumpy(), expected, f"{op} Parameter, indices {ia.shape} / {ib.shape}")
        return
    net = _OutOfPlaceBoth(prim, fn)
    net.set_inputs(_spec([None, 4], dtype), *a_spec, _spec(None, dtype), *b_spec)
    for (rows, n), (x_shape, batch, depth) in zip(A_CALLS, B_CALLS):
        xa, ia, ua = _case(rng, op, (rows, 4), (n,), dtype, index_dtype)
        xb, ib, ub = _case(rng, op, x_shape, batch, dtype, index_dtype, depth)
        before_a, before_b = xa.copy(), xb.copy()
        ta, tb = Tensor(xa), Tensor(xb)
        outs = net(ta, Tensor(ia), Tensor(ua), tb, Tensor(ib), Tensor(ub))
        for out, expected in zip(outs, (oracle(op, xa, ia, ua),) * 2 + (oracle(op, xb, ib, ub),) * 2):
            assert_same(out.asnumpy(), expected, f"{op}, input_x {xa.shape} / {xb.shape}")
        assert_unchanged(ta, before_a)
        assert_unchanged(tb, before_b)


# ------------------------------------------------------------------ jit(dynamic=1)

@PYNATIVE
@pytest.mark.parametrize("op", OPS)
def test_jit_dynamic(mode, op):
    """Four distinct shapes: the first two compile static graphs, the others a dynamic one
    (where the issue's 'The pointer[value] is null' came from)."""
    family = split_op(op)[0]
    n_op = OPS.index(op)
    dtype, index_dtype = VALUE_DTYPES[(n_op + 3) % 8], INDEX_DTYPES[(n_op + 1) % 2]
    rng = np.random.default_rng(2000 + n_op)
    prim, fn = _forms(op)

    @ms.jit(dynamic=1)
    def both(x1, x2, indices, updates):
        return prim(x1, indices, updates), fn(x2, indices, updates)

    depth = None if family == "Scatter" else 2
    x0 = _case(rng, op, (5, 3), (1,), dtype, index_dtype, depth)[0]
    # the same Parameters every call (a new Parameter of a new shape is a new static graph)
    p1, p2 = Parameter(Tensor(x0), name="p1"), Parameter(Tensor(x0), name="p2")
    expected = x0
    for k, n in enumerate((2, 3, 5, 7)):
        x, indices, updates = _case(rng, op, (5 + k, 3) if not in_place(op) else (5, 3), (n,), dtype, index_dtype,
                                    depth)
        if in_place(op):
            out1, out2 = both(p1, p2, Tensor(indices), Tensor(updates))
            expected = oracle(op, expected, indices, updates)
            assert_same(p1.asnumpy(), expected, f"{op} primitive's Parameter, call {k}")
            assert_same(p2.asnumpy(), expected, f"{op} function's Parameter, call {k}")
        else:
            out1, out2 = both(Tensor(x), Tensor(x), Tensor(indices), Tensor(updates))
            expected = oracle(op, x, indices, updates)
        assert_same(out1.asnumpy(), expected, f"{op} primitive, call {k}")
        assert_same(out2.asnumpy(), expected, f"{op} function, call {k}")


# ------------------------------------------------------------------ gradients

class _InPlaceGrad(nn.Cell):
    def __init__(self, net):
        super().__init__()
        self.grad = ms.grad(net, grad_position=1, weights=[net.p])

    def construct(self, indices, updates):
        return self.grad(indices, updates)


class _OutOfPlaceGrad(nn.Cell):
    def __init__(self, net):
        super().__init__()
        self.grad = ms.grad(net, grad_position=(0, 2))

    def construct(self, x, indices, updates):
        return self.grad(x, indices, updates)


# Every reduction in each family once or more, both forms, both kinds of unknown shape.
GRAD_CASES = [
    ("ScatterAdd", "function", "dims"), ("ScatterMul", "primitive", "rank"), ("ScatterMax", "function", "dims"),
    ("ScatterUpdate", "primitive", "rank"), ("ScatterDiv", "function", "rank"),
    ("ScatterNdSub", "primitive", "dims"), ("ScatterNdDiv", "function", "dims"), ("ScatterNdMin", "function", "rank"),
    ("ScatterNdUpdate", "function", "dims"), ("ScatterNdMul", "primitive", "dims"),
    ("TensorScatterMul", "function", "rank"), ("TensorScatterMax", "primitive", "dims"),
    ("TensorScatterUpdate", "primitive", "rank"), ("TensorScatterAdd", "function", "dims"),
    ("TensorScatterMin", "function", "dims"), ("TensorScatterSub", "primitive", "rank"),
]


@GRAPH
@pytest.mark.parametrize("op, kind, unknown", GRAD_CASES)
def test_gradients_with_dynamic_shapes(mode, op, kind, unknown):
    """Two calls of one compiled gradient graph with different numbers of index vectors
    (and index batch ranks where the rank is unknown), each against the oracle's finite
    differences (Max/Min: the equal-split rule, with ties)."""
    family, reduction = split_op(op)
    n_op = OPS.index(op)
    prim, fn = _forms(op)
    fn = prim if kind == "primitive" else fn
    rng = np.random.default_rng(3000 + n_op)
    index_dtype = INDEX_DTYPES[n_op % 2]

    def spec(shape, dtype):
        return _spec(None if unknown == "rank" else [None] * len(shape), dtype)

    batches = [(6,), (2, 2)] if unknown == "rank" else [(6,), (4,)]
    w = rng.standard_normal((5, 3))
    x0 = _f32_exact(_case(rng, op, (5, 3), (1,), "float64", index_dtype)[0])
    grad = None
    for batch in batches:
        x, indices, updates = _case(rng, op, (5, 3), batch, "float64", index_dtype)
        if in_place(op):
            x = x0
        else:
            x = _f32_exact(x)
        updates = _f32_exact(updates)
        if reduction in ("Max", "Min"):  # a tie: the first update equals input_x at its slot
            depth = 1 if family == "Scatter" else indices.shape[-1]
            first = tuple(int(v) for v in indices.reshape(-1, depth)[0])
            updates.reshape((-1,) + x.shape[depth:])[0] = x[first]
        if in_place(op):
            if grad is None:
                net = InPlaceLoss(fn, x, w)
                grad = _InPlaceGrad(net)
                grad.set_inputs(spec(indices.shape, index_dtype), spec(updates.shape, "float64"))
            else:
                net.p.set_data(Tensor(x))  # the same graph again, from the same input_x
            gu, (gx,) = grad(Tensor(indices), Tensor(updates))
        else:
            if grad is None:
                grad = _OutOfPlaceGrad(OutOfPlaceLoss(fn, w))
                grad.set_inputs(spec(x.shape, "float64"), spec(indices.shape, index_dtype),
                                spec(updates.shape, "float64"))
            gx, gu = grad(Tensor(x), Tensor(indices), Tensor(updates))
        if reduction in ("Max", "Min"):
            fx, fu = tie_rule(op, x, indices, updates, w)
        else:
            fx, fu = finite_differences(op, x, indices, updates, w)
        np.testing.assert_allclose(gx.asnumpy(), fx, rtol=1e-6, atol=1e-6, err_msg=f"{op} d input_x {batch}")
        np.testing.assert_allclose(gu.asnumpy(), fu, rtol=1e-6, atol=1e-6, err_msg=f"{op} d updates {batch}")


# ------------------------------------------------------------------ errors

class _InPlace(nn.Cell):
    def __init__(self, fn, param):
        super().__init__()
        self.fn = fn
        self.p = param

    def construct(self, indices, updates):
        return self.fn(self.p, indices, updates)


class _OutOfPlace(nn.Cell):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, x, indices, updates):
        return self.fn(x, indices, updates)


X = np.arange(15, dtype=np.float32).reshape(5, 3)


def _indices(op, values):
    nd = split_op(op)[0] != "Scatter"
    return np.array(values, np.int32).reshape((-1, 1) if nd else (-1,))


def _dynamic_cell(op, fn, param=None, unknown="dims"):
    """A fresh Cell over `fn` with dynamic inputs, as call(index values, updates, x)."""
    nd = split_op(op)[0] != "Scatter"
    if unknown == "rank":
        i_spec, u_spec, x_spec = _spec(None, "int32"), _spec(None, "float32"), _spec(None, "float32")
    else:
        i_spec = _spec([None, 1] if nd else [None], "int32")
        u_spec, x_spec = _spec([None, 3], "float32"), _spec([None, 3], "float32")
    if in_place(op):
        net = _InPlace(fn, param)
        net.set_inputs(i_spec, u_spec)
        return lambda values, updates, x=None: net(Tensor(_indices(op, values)), Tensor(updates))
    net = _OutOfPlace(fn)
    net.set_inputs(x_spec, i_spec, u_spec)
    return lambda values, updates, x: net(x, Tensor(_indices(op, values)), Tensor(updates))


# A failed graph step costs ~3 s in MindSpore 2.10 (its failure path waits; the built-ins
# too), so the error cases are few: each family, each kind of unknown shape, both forms.
OOB_CASES = [("ScatterAdd", "function", "dims"), ("ScatterNdMul", "primitive", "rank"),
             ("TensorScatterDiv", "primitive", "dims")]


class _pynative:
    def __enter__(self):
        self.previous = ms.get_context("mode")
        ms.set_context(mode=ms.PYNATIVE_MODE)

    def __exit__(self, *exc):
        ms.set_context(mode=self.previous)


def _eager_still_works(op, prim, fn):
    """PYNATIVE calls of the very primitive instance (and function) that failed in a graph."""
    with _pynative():
        for call in (prim, fn):
            indices, updates = _indices(op, [1, 3]), np.full((2, 3), 2, np.float32)
            target = Parameter(Tensor(X), name="eager") if in_place(op) else Tensor(X)
            out = call(target, Tensor(indices), Tensor(updates))
            assert_same(out.asnumpy(), oracle(op, X, indices, updates), f"{op} eager after the failure")


@GRAPH
@pytest.mark.parametrize("op, kind, unknown", OOB_CASES)
def test_out_of_range_index(mode, op, kind, unknown, monkeypatch):
    """The step fails with MindSpore's RuntimeError for the kernel's code, nothing is
    written, last_error() names the op and the value; a fresh Cell and eager calls work."""
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")
    prim, fn = _forms(op)
    call_fn = prim if kind == "primitive" else fn
    param = Parameter(Tensor(X), name="p") if in_place(op) else None
    x = Tensor(X)
    call = _dynamic_cell(op, call_fn, param, unknown)
    ones = np.ones((2, 3), np.float32)
    call([0, 4], ones, x)
    before = param.asnumpy().copy() if in_place(op) else X
    with pytest.raises(RuntimeError, match=r"\)'s function\(\w+\) is 2\."):
        call([1, 2, 5], np.ones((3, 3), np.float32), x)
    assert_unchanged(param if in_place(op) else x, before, "input_x")
    code, message, _ = ms_scatter.last_error()
    assert code == 2, message
    assert message.startswith(f"For '{op}', each value of 'indices' must be in [0, 5) (dimension 0 of 'input_x' "
                              f"with shape (5, 3)), but got 5 at position "), message
    again = _dynamic_cell(op, call_fn, param, unknown)([0, 4], ones, x)
    assert_same(again.asnumpy(), oracle(op, before, _indices(op, [0, 4]), ones), "a fresh Cell after the failure")
    _eager_still_works(op, prim, fn)


@GRAPH
def test_out_of_range_index_under_a_gradient(mode, monkeypatch):
    """Unknown index rank (so an unknown index depth) under a gradient: the saved-slot gather
    is clipped with bounds computed in the graph, so one of our kernels reports the index
    (MindSpore may run the gradient's TensorScatterMul first, as with static shapes), never
    MindSpore's GatherNd; nothing written."""
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")
    w = np.ones((5, 3))
    net = InPlaceLoss(ms_scatter.ScatterNdMul(), X.astype(np.float64), w)
    grad = _InPlaceGrad(net)
    grad.set_inputs(_spec(None, "int32"), _spec(None, "float64"))
    before = net.p.asnumpy().copy()
    with pytest.raises(RuntimeError, match=r"\)'s function\((ScatterNdMul_token|TensorScatterMul)\) is 2\."):
        grad(Tensor(np.array([[1], [7]], np.int32)), Tensor(np.ones((2, 3))))
    assert_unchanged(net.p, before, "the Parameter")
    assert re.match(r"For '(ScatterNdMul|TensorScatterMul)', each value of 'indices' must be in \[0, 5\) .* but got 7 ",
                    ms_scatter.last_error()[1])


@GRAPH
def test_shape_mismatch_at_launch(mode):
    """Mismatches that only the launch can see: MindSpore's RuntimeError carrying our
    message (the kernels' rules and wording), which names the op; nothing written;
    eager calls of the same primitive instance work afterwards."""
    prim = ms_scatter.ScatterUpdate()
    param = Parameter(Tensor(X), name="p")
    with pytest.raises(RuntimeError, match=r"For 'ScatterUpdate', the shape of 'updates' must match 'indices' "
                                           r"\(2,\) and 'input_x' \(5, 3\), but got \(3, 3\)\."):
        _dynamic_cell("ScatterUpdate", prim, param)([1, 2], np.ones((3, 3), np.float32))
    assert_unchanged(param, X, "the Parameter")
    _eager_still_works("ScatterUpdate", prim, ms_scatter.scatter_update)

    f32 = _spec(None, "float32")
    net = _OutOfPlace(ms_scatter.tensor_scatter_max)
    net.set_inputs(f32, _spec(None, "int32"), f32)
    with pytest.raises(RuntimeError, match=r"For 'TensorScatterMax', the rank of 'indices' must be >= 2, but got 1 "
                                           r"\(shape \(1,\)\)\."):
        net(Tensor(X), Tensor(np.array([1], np.int32)), Tensor(np.ones((3,), np.float32)))

    prim = ms_scatter.ScatterNdAdd()
    net = _InPlace(prim, param)
    net.set_inputs(_spec(None, "int32"), f32)
    with pytest.raises(RuntimeError, match=r"For 'ScatterNdAdd', the index depth must be <= rank of 'input_x' "
                                           r"\(2\), but got 3\."):
        net(Tensor(np.array([[1, 1, 1]], np.int32)), Tensor(np.ones((1,), np.float32)))
    assert_unchanged(param, X, "the Parameter")
    _eager_still_works("ScatterNdAdd", prim, ms_scatter.scatter_nd_add)


@GRAPH
@pytest.mark.parametrize("op", ["ScatterMin", "ScatterNdAdd", "TensorScatterUpdate"])
def test_mismatch_of_known_dimensions_is_the_static_value_error(mode, op):
    """Known parts of dynamic shapes are checked at compile time, as static shapes are."""
    family = split_op(op)[0]
    nd = family != "Scatter"
    specs = (_spec([None, 1] if nd else [None], "int32"), _spec([None, 4], "float32"))
    prim = getattr(ms_scatter, op)()
    if in_place(op):
        net = _InPlace(prim, Parameter(Tensor(X), name="p"))
        net.set_inputs(*specs)
        args = (Tensor(np.zeros((2, 1) if nd else (2,), np.int32)), Tensor(np.ones((2, 4), np.float32)))
    else:
        net = _OutOfPlace(prim)
        net.set_inputs(_spec([None, 3], "float32"), *specs)
        args = (Tensor(X), Tensor(np.zeros((2, 1), np.int32)), Tensor(np.ones((2, 4), np.float32)))
    with pytest.raises(ValueError, match=rf"^For '{op}', the shape of 'updates' must be "):
        net(*args)
