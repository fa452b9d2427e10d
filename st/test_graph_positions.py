"""The idioms of MindSpore code in which an operator is a value, through MindSpore (issue 21):

* MindSpore's optimizer pattern: ``HyperMap`` / ``Map`` / a plain ``F.partial(fn, op)`` over
  a ``MultitypeFuncGraph`` that calls the op on each Parameter, with the primitive or the
  function as the op (every in-place operator updates every Parameter, as one process with
  numpy does, over several steps);
* the primitive itself bound by ``F.partial`` / ``ops.partial`` (also under the patch) and
  mapped by ``HyperMap``;
* a primitive or a function chosen at run time by a Tensor condition: the chosen op runs and
  writes (MindSpore's built-ins run the second op for both values here);
* ``jit(capture_mode="trace")`` and ``jit(capture_mode="bytecode")`` (with ``fullgraph=True``
  too): each call recomputes from its inputs and writes once;
* tensors without data in Python calls (lazily initialised, shape-only placeholders): an
  error that names the op, nothing written, the process usable.
"""
import threading
import types

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, ParameterTuple, Tensor, nn, ops
from mindspore.common.initializer import One, initializer
from mindspore.ops import composite as C
from mindspore.ops import functional as F

import ms_scatter
from ms_scatter.testing import oracle, random_case, split_op

from .helpers import OPS, assert_same, callable_for, in_place

IN_PLACE_OPS = [op for op in OPS if in_place(op)]
GRAPH = pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)

_apply = C.MultitypeFuncGraph("ms_scatter_test_apply")


@_apply.register("Function", "Tensor", "Tensor", "Tensor", "Tensor")
def _apply_scaled(op, scale, param, indices, updates):
    """An optimizer's per-Parameter step: the op's result is discarded (F.depend)."""
    return F.depend(True, op(param, indices, updates * scale))


def _case(op, seed, params=2):
    """`params` tables of one shape with their own indices and updates (float32)."""
    rng = np.random.default_rng(seed)
    cases = [random_case(rng, op, (6, 3), 4, "float32", "int32") for _ in range(params)]
    return [c[0] for c in cases], [c[1] for c in cases], [c[2] for c in cases]


def _expected(op, xs, indices, updates, steps, scale=1.0):
    out = [x.copy() for x in xs]
    for _ in range(steps):
        out = [oracle(op, x, i, (u * np.float32(scale)).astype(u.dtype)) for x, i, u in zip(out, indices, updates)]
    return out


class _Optimizer(nn.Cell):
    """MindSpore's optimizer idiom over two Parameters: `how` is "hyper_map", "map" or
    "partial" (F.partial(fn, op) called on the first Parameter only)."""

    def __init__(self, op, xs, how):
        super().__init__()
        self.op = op
        self.params = ParameterTuple([Parameter(Tensor(x), name=f"w{k}") for k, x in enumerate(xs)])
        self.hyper_map = C.HyperMap()
        self.map = C.Map()
        self.scale = Tensor(np.float32(0.5))
        self.how = how

    def construct(self, indices, updates):
        if self.how == "hyper_map":
            return self.hyper_map(F.partial(_apply, self.op, self.scale), self.params, indices, updates)
        if self.how == "map":
            return self.map(F.partial(_apply, self.op, self.scale), self.params, indices, updates)
        return F.partial(_apply, self.op, self.scale)(self.params[0], indices[0], updates[0])


@GRAPH
@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("op", IN_PLACE_OPS)
def test_optimizer_pattern_updates_every_parameter(mode, op, kind):
    xs, indices, updates = _case(op, 2100 + IN_PLACE_OPS.index(op))
    i = tuple(Tensor(a) for a in indices)
    u = tuple(Tensor(a) for a in updates)
    for how in ("hyper_map", "map", "partial"):
        net = _Optimizer(callable_for(op, kind), xs, how)
        for _ in range(2):
            net(i, u)
        expected = _expected(op, xs, indices, updates, 2, 0.5)
        assert_same(net.params[0].asnumpy(), expected[0], f"{op} {kind} {how}: first Parameter")
        assert_same(net.params[1].asnumpy(), expected[1] if how != "partial" else xs[1],
                    f"{op} {kind} {how}: second Parameter")


@GRAPH
@pytest.mark.parametrize("op", [op for op in OPS if not in_place(op)])
def test_out_of_place_forms_as_values(mode, op):
    """A TensorScatter primitive or function through HyperMap and F.partial: the results."""
    xs, indices, updates = _case(op, 2200 + OPS.index(op))

    class Net(nn.Cell):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn
            self.hyper_map = C.HyperMap()

        def construct(self, x, i, u):
            return self.hyper_map(F.partial(self.fn), x, i, u), F.partial(self.fn, x[0])(i[0], u[0])

    for kind in ("primitive", "function"):
        mapped, bound = Net(callable_for(op, kind))(tuple(Tensor(a) for a in xs), tuple(Tensor(a) for a in indices),
                                                   tuple(Tensor(a) for a in updates))
        for k in range(2):
            assert_same(mapped[k].asnumpy(), oracle(op, xs[k], indices[k], updates[k]), f"{op} {kind} mapped {k}")
        assert_same(bound.asnumpy(), oracle(op, xs[0], indices[0], updates[0]), f"{op} {kind} bound")


class _Bound(nn.Cell):
    """The primitive itself wrapped by F.partial / ops.partial (MindSpore's own boost code
    does this), in four ways; each writes its Parameters once."""

    def __init__(self, primitive, xs, how):
        super().__init__()
        self.add = primitive
        self.p = Parameter(Tensor(xs[0]), name="p")
        self.q = Parameter(Tensor(xs[1]), name="q")
        self.hyper_map = C.HyperMap()
        self.how = how

    def construct(self, i, u, j, v):
        if self.how == "bound":
            return F.partial(self.add, self.p)(i, u)
        if self.how == "mapped":
            return self.hyper_map(F.partial(self.add, self.p), (i,), (u,))
        if self.how == "unbound":
            return self.hyper_map(F.partial(self.add), (self.p, self.q), (i, j), (u, v))
        return ops.partial(self.add, self.p, i)(u)


def _bound_cases():
    ops_ = [op for op in IN_PLACE_OPS if split_op(op)[1] in ("Add", "Update", "Max")] + ["ScatterNdMul"]
    return [(op, how) for op in ops_ for how in ("bound", "mapped", "unbound", "ops.partial")]


@GRAPH
@pytest.mark.parametrize("op, how", _bound_cases())
def test_primitive_bound_by_partial(mode, op, how):
    xs, indices, updates = _case(op, 2300 + IN_PLACE_OPS.index(op))
    net = _Bound(callable_for(op, "primitive"), xs, how)
    out = net(Tensor(indices[0]), Tensor(updates[0]), Tensor(indices[1]), Tensor(updates[1]))
    first = oracle(op, xs[0], indices[0], updates[0])
    assert_same(net.p.asnumpy(), first, f"{op} {how}: p")
    assert_same(net.q.asnumpy(), oracle(op, xs[1], indices[1], updates[1]) if how == "unbound" else xs[1],
                f"{op} {how}: q")
    assert_same((out[0] if isinstance(out, tuple) else out).asnumpy(), first, f"{op} {how}: result")


@GRAPH
def test_primitive_bound_by_partial_under_the_patch(mode):
    """MindSpore's own names, patched: ops.ScatterAdd() is ours, and F.partial of it compiles."""
    xs, indices, updates = _case("ScatterAdd", 2399)
    with ms_scatter.patched():
        net = _Bound(ops.ScatterAdd(), xs, "unbound")
        assert isinstance(net.add, ms_scatter.ScatterAdd)
        net(Tensor(indices[0]), Tensor(updates[0]), Tensor(indices[1]), Tensor(updates[1]))
    assert_same(net.p.asnumpy(), oracle("ScatterAdd", xs[0], indices[0], updates[0]))
    assert_same(net.q.asnumpy(), oracle("ScatterAdd", xs[1], indices[1], updates[1]))


class _Chosen(nn.Cell):
    """`op = first if flag > 0 else second` with a Tensor flag, then op(p, i, u)."""

    def __init__(self, first, second, x):
        super().__init__()
        self.first = first
        self.second = second
        self.p = Parameter(Tensor(x), name="p")

    def construct(self, flag, i, u):
        op = self.first if flag > 0 else self.second
        return op(self.p, i, u)


@GRAPH
@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("pair", [("ScatterAdd", "ScatterMul"), ("ScatterUpdate", "ScatterMax"),
                                  ("ScatterNdAdd", "ScatterNdSub"), ("ScatterNdMin", "ScatterNdDiv")])
def test_op_chosen_at_run_time(mode, pair, kind):
    first, second = pair
    xs, indices, updates = _case(first, 2400 + IN_PLACE_OPS.index(first), params=1)
    x, i, u = xs[0], indices[0], updates[0]
    net = _Chosen(callable_for(first, kind), callable_for(second, kind), x)
    expected = x
    for flag, op in ((1, first), (-1, second), (1, first)):
        out = net(Tensor(np.int32(flag)), Tensor(i), Tensor(u))
        expected = oracle(op, expected, i, u)
        assert_same(net.p.asnumpy(), expected, f"{pair} {kind} flag {flag}: p")
        assert_same(out.asnumpy(), expected, f"{pair} {kind} flag {flag}: result")


# ------------------------------------------------------------------ jit capture modes

_TRACED = []  # MindSpore caches a traced graph by the function's name, line and id(): kept
# alive, a test's function never lends its id (and its graph, on another Parameter) to the next


def _outside_runpy(fn, *args):
    """fn(*args) on a thread of its own: MindSpore 2.10's trace capture reads the source line
    of every frame on the stack and fails on the frozen runpy frames of ``python -m pytest``
    (TypeError in _get_caller_lines), whatever the traced function does."""
    box = {}

    def run():
        try:
            box["out"] = fn(*args)
        except BaseException as err:  # pylint: disable=broad-except
            box["err"] = err
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "err" in box:
        raise box["err"]
    return box["out"]


@pytest.mark.parametrize("mode", ["JIT"], indirect=True)
@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdMax", "ScatterUpdate", "ScatterNdMul"])
def test_trace_capture_writes_once_per_call(mode, op, kind):
    xs, indices, updates = _case(op, 2500 + IN_PLACE_OPS.index(op), params=1)
    x, i, u = xs[0], indices[0], updates[0]
    p = Parameter(Tensor(x), name="p")
    fn = callable_for(op, kind)

    @ms.jit(capture_mode="trace")
    def step(indices_, updates_):
        return fn(p, indices_, updates_)
    _TRACED.append(step)

    expected = x
    for k in range(3):
        scaled = (u * np.float32(k + 1)).astype(u.dtype)
        out = _outside_runpy(step, Tensor(i), Tensor(scaled))
        expected = oracle(op, expected, i, scaled)
        assert_same(p.asnumpy(), expected, f"{op} {kind} call {k}: p")
        assert_same(out.asnumpy(), expected, f"{op} {kind} call {k}: result")


@pytest.mark.parametrize("mode", ["JIT"], indirect=True)
@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("op", ["TensorScatterMax", "TensorScatterAdd"])
def test_trace_capture_recomputes_out_of_place(mode, op, kind):
    xs, indices, updates = _case(op, 2600 + OPS.index(op), params=3)
    fn = callable_for(op, kind)

    @ms.jit(capture_mode="trace")
    def step(x_, indices_, updates_):
        return fn(x_, indices_, updates_) * 2
    _TRACED.append(step)

    for x, i, u in zip(xs, indices, updates):
        out = _outside_runpy(step, Tensor(x), Tensor(i), Tensor(u))
        assert_same(out.asnumpy(), oracle(op, x, i, u) * np.float32(2), op)


# ------------------------------------------------------------------ tensors without data

def _lazy(shape, dtype, how):
    if how == "initializer":
        return initializer("ones", shape, dtype)
    return Tensor(shape=shape, dtype=dtype, init=One())


@pytest.mark.parametrize("how", ["initializer", "init="])
@pytest.mark.parametrize("argument", ["input_x", "indices", "updates"])
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdMax", "TensorScatterAdd", "TensorScatterMin"])
def test_uninitialised_tensor_is_an_error(mode, op, argument, how):
    """PYNATIVE, and a call at top level under GRAPH_MODE: the op's error, nothing written."""
    x, i, u = random_case(np.random.default_rng(7), op, (5, 2), 3, "float32", "int32")
    base = Parameter(Tensor(x), name="p") if in_place(op) else Tensor(x)
    args = {"input_x": base, "indices": Tensor(i), "updates": Tensor(u)}
    if argument == "input_x" and in_place(op):
        args["input_x"] = _lazy(x.shape, ms.float32, how)  # a Tensor, not a Parameter
    elif argument == "input_x":
        args["input_x"] = _lazy(x.shape, ms.float32, how)
    else:
        args[argument] = _lazy(args[argument].shape, args[argument].dtype, how)
    for kind in ("primitive", "function"):
        with pytest.raises(RuntimeError, match=rf"For '{op}', '{argument}' has no data yet"):
            callable_for(op, kind)(args["input_x"], args["indices"], args["updates"])
    assert_same(base.asnumpy(), x, "input_x untouched")
    # the process goes on
    good = Parameter(Tensor(x), name="q") if in_place(op) else Tensor(x)
    assert_same(callable_for(op, "function")(good, Tensor(i), Tensor(u)).asnumpy(), oracle(op, x, i, u))


def test_parameter_from_an_initializer_works(mode):
    """A Parameter made from an initializer has data (MindSpore materialises it)."""
    p = Parameter(initializer("ones", (4, 2), ms.float32), name="p")
    ms_scatter.scatter_add(p, Tensor(np.array([1, 3], np.int32)), Tensor(np.ones((2, 2), np.float32)))
    assert_same(p.asnumpy(), np.array([[1, 1], [2, 2], [1, 1], [2, 2]], np.float32))


@pytest.mark.parametrize("argument", ["input_x", "indices", "updates"])
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdUpdate", "TensorScatterAdd", "TensorScatterMax"])
def test_shape_only_placeholder_is_an_error(mode, op, argument):
    x, i, u = random_case(np.random.default_rng(8), op, (5, 2), 3, "float32", "int32")
    base = Parameter(Tensor(x), name="p") if in_place(op) else Tensor(x)
    args = {"input_x": base, "indices": Tensor(i), "updates": Tensor(u)}
    if argument == "input_x" and in_place(op):
        pytest.skip("an in-place input_x is a Parameter, which always has data")
    shape = [None] + list(args[argument].shape[1:])
    args[argument] = Tensor(shape=shape, dtype=args[argument].dtype)
    for kind in ("primitive", "function"):
        with pytest.raises(ValueError, match=rf"For '{op}', '{argument}' must be a Tensor with data, but got a "
                                             r"shape-only placeholder"):
            callable_for(op, kind)(args["input_x"], args["indices"], args["updates"])
    assert_same(base.asnumpy(), x, "input_x untouched")


class _TwoTables(nn.Cell):
    """One op called on two Parameters of one shape in one graph, each result used."""

    def __init__(self, op, xs):
        super().__init__()
        self.op = op
        self.a = Parameter(Tensor(xs[0]), name="a")
        self.b = Parameter(Tensor(xs[1]), name="b")

    def construct(self, i, u, j, v):
        first = self.op(self.a, i, u)
        second = self.op(self.b, j, v)
        return first * 1, second * 1


@GRAPH
@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdMax", "ScatterUpdate", "ScatterNdMul"])
def test_two_parameters_of_one_shape_in_one_graph(mode, op, kind):
    """Each call returns its own Parameter (MindSpore 2.10 handed a custom-bprop Cell's second
    call the first Parameter: nn.Adam's sparse path went to NaN under the patch)."""
    xs, indices, updates = _case(op, 2700 + IN_PLACE_OPS.index(op))
    net = _TwoTables(callable_for(op, kind), xs)
    first, second = net(Tensor(indices[0]), Tensor(updates[0]), Tensor(indices[1]), Tensor(updates[1]))
    assert_same(first.asnumpy(), oracle(op, xs[0], indices[0], updates[0]), f"{op} {kind}: first result")
    assert_same(second.asnumpy(), oracle(op, xs[1], indices[1], updates[1]), f"{op} {kind}: second result")
    assert_same(net.b.asnumpy(), oracle(op, xs[1], indices[1], updates[1]), f"{op} {kind}: second Parameter")


def _bytecode_jit(body, name, fullgraph):
    """`body` under jit(capture_mode="bytecode") as a function with a code object of its own:
    MindSpore's bytecode tracer keeps one compiled graph per code object and does not see
    that a function it calls has changed (its own primitives included), so each case needs
    its own code."""
    code = body.__code__.replace(co_name=name, co_qualname=name) if hasattr(body.__code__, "co_qualname") \
        else body.__code__.replace(co_name=name)
    fresh = types.FunctionType(code, body.__globals__, name, body.__defaults__, body.__closure__)
    return ms.jit(fresh, capture_mode="bytecode", fullgraph=fullgraph)


BYTECODE_OPS = {False: ["ScatterAdd", "ScatterNdMax", "TensorScatterMax"], True: OPS}


@pytest.mark.parametrize("mode", ["JIT"], indirect=True)
@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("fullgraph, op", [(f, op) for f in (False, True) for op in BYTECODE_OPS[f]])
def test_bytecode_capture(mode, op, kind, fullgraph):
    """jit(capture_mode="bytecode"): with fullgraph=True every primitive and function is in
    the one captured graph; with fullgraph=False as well, or run as Python between graph
    pieces. Either way each call recomputes from its inputs and writes once."""
    xs, indices, updates = _case(op, 2800 + OPS.index(op), params=3)
    fn = callable_for(op, kind)
    p = Parameter(Tensor(xs[0]), name="p") if in_place(op) else None

    def step(x_, indices_, updates_):
        return fn(x_, indices_, updates_) * 2
    step = _bytecode_jit(step, f"step_{op}_{kind}_{fullgraph}", fullgraph)

    expected = xs[0]
    for k in range(3):
        x_arg = p if in_place(op) else Tensor(xs[k])
        base = expected if in_place(op) else xs[k]
        out = step(x_arg, Tensor(indices[k]), Tensor(updates[k]))
        expected = oracle(op, base, indices[k], updates[k])
        assert_same(out.asnumpy(), expected * np.float32(2), f"{op} {kind} call {k}")
        if in_place(op):
            assert_same(p.asnumpy(), expected, f"{op} {kind} call {k}: p")


@pytest.mark.parametrize("mode", ["JIT"], indirect=True)
def test_bytecode_full_graph_idioms(mode):
    """fullgraph=True: keyword arguments, updates of a lower dtype, a Cell's construct, a
    gradient, and a bad index (the op's error, nothing written, the next call right)."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    i, u = np.array([1, 1], np.int32), np.ones((2, 3), np.float32)
    p = Parameter(Tensor(x), name="p")

    def both(a, b, c):
        return ms_scatter.scatter_add(a, indices=b, updates=c) + ms_scatter.ScatterMax()(input_x=a, indices=b,
                                                                                          updates=c)
    out = _bytecode_jit(both, "both", True)(p, Tensor(i), Tensor(u.astype(np.float16)))
    added = oracle("ScatterAdd", x, i, u)
    assert_same(p.asnumpy(), added, "p")
    assert_same(out.asnumpy(), added * np.float32(2), "sum of the two results")

    class _Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.w = Parameter(Tensor(x), name="w")
            self.update = ms_scatter.ScatterNdUpdate()

        def construct(self, indices_, updates_):
            self.update(self.w, indices_, updates_)
            return ms_scatter.scatter_nd_add(self.w, indices_, updates_) * 1
    net = _Net()
    net.construct = _bytecode_jit(_Net.construct, "net_construct", True).__get__(net)
    nd_i = np.array([[1], [2]], np.int32)
    w = x
    for k in range(2):
        nd_u = np.full((2, 3), k + 1.0, np.float32)
        w = oracle("ScatterNdAdd", oracle("ScatterNdUpdate", w, nd_i, nd_u), nd_i, nd_u)
        assert_same(net(Tensor(nd_i), Tensor(nd_u)).asnumpy(), w, f"Cell call {k}")
        assert_same(net.w.asnumpy(), w, f"Cell call {k}: w")

    rows = Tensor(np.array([[1], [2]], np.int32))

    def loss(x_, u_):
        return (ms_scatter.tensor_scatter_max(x_, rows, u_) ** 2).sum()

    def grads(x_, u_):
        return ms.value_and_grad(loss, grad_position=(0, 1))(x_, u_)
    big = Tensor(np.full((2, 3), 4.0, np.float32))
    value, (gx, gu) = _bytecode_jit(grads, "grads", True)(Tensor(x), big)
    want_value, (want_gx, want_gu) = ms.value_and_grad(loss, grad_position=(0, 1))(Tensor(x), big)
    assert_same(value.asnumpy(), want_value.asnumpy(), "loss")
    assert_same(gx.asnumpy(), want_gx.asnumpy(), "grad x")
    assert_same(gu.asnumpy(), want_gu.asnumpy(), "grad updates")

    def add(a, b, c):
        return ms_scatter.scatter_add(a, b, c) * 2
    add = _bytecode_jit(add, "add", True)
    q = Parameter(Tensor(x), name="q")
    with pytest.raises(ms_scatter.ScatterIndexError, match=r"For 'ScatterAdd', each value of 'indices' must be "
                                                           r"in \[0, 4\)"):
        add(q, Tensor(np.array([1, 9], np.int32)), Tensor(u))
    assert_same(q.asnumpy(), x, "q untouched")
    good = np.array([1, 2], np.int32)
    assert_same(add(q, Tensor(good), Tensor(u)).asnumpy(), oracle("ScatterAdd", x, good, u) * np.float32(2))
