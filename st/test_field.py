"""Patterns of real MindSpore programs (issue 13), through MindSpore:

* training graphs: an in-place op whose result is discarded, then the Parameter read, and
  two in-place ops in a row, under value_and_grad and nn.TrainOneStepCell in GRAPH and jit,
  equal to PYNATIVE;
* views as input_x in PYNATIVE (slices, view(), reshape, transposes, narrow, a row): the
  update lands in the base tensor;
* aliasing: updates that are input_x (integer Div included: no SIGFPE), read as they were
  when the call started; an error with aliased operands leaves input_x untouched;
* copy.deepcopy of every primitive and of a Cell holding them;
* ranks above 16;
* errors under autograd: an out-of-range index raises ScatterIndexError every time;
* call conventions: keyword arguments, errors that name the op, set_num_threads limits;
* dtypes and shapes the built-ins accept: uint16/uint32/uint64, a 0-d Parameter;
* the seed pages' error type: a conversion that would need the Parameter converted is a
  TypeError and a RuntimeError, in every mode.
"""
import copy

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn, ops

import ms_scatter
from ms_scatter.infer import function_name
from ms_scatter.testing import oracle, split_op

from .helpers import OPS, InPlaceCell, OutOfPlaceCell, assert_same, callable_for, in_place

IN_PLACE_OPS = [op for op in OPS if in_place(op)]


def _indices(op, rows):
    family = split_op(op)[0]
    i = np.array(rows, np.int32)
    return i if family == "Scatter" else i.reshape(-1, 1)


# ------------------------------------------------------------------ training graphs

class _Discard(nn.Cell):
    """Result discarded, the Parameter read afterwards (variant 0), or two in-place calls
    in a row (variant 1), or the result used and the Parameter read (variant 2)."""

    def __init__(self, op, variant):
        super().__init__()
        self.mem = Parameter(Tensor(np.linspace(1, 2, 12).reshape(4, 3).astype(np.float32)), name="mem")
        self.w = Parameter(Tensor(np.arange(12).reshape(4, 3).astype(np.float32)), name="w")
        self.first = callable_for(op, "primitive")
        self.second = callable_for(op, "function")
        self.variant = variant

    def construct(self, i, u):
        if self.variant == 0:
            self.first(self.mem, i, u)
            return (self.mem * self.w).sum()
        if self.variant == 1:
            self.first(self.mem, i, u)
            self.second(self.mem, i, u * 3)
            return (self.mem * self.w).sum()
        y = self.first(self.mem, i, u)
        return (y * self.w).sum() + (self.mem * self.w).sum() * 10


def _grads(mode, op, variant):
    ms.set_context(mode=ms.PYNATIVE_MODE if mode in ("PYNATIVE", "JIT") else ms.GRAPH_MODE)
    net = _Discard(op, variant)
    vg = ms.value_and_grad(net, (1,), net.trainable_params())
    if mode == "JIT":
        vg = ms.jit(vg)
    i = Tensor(_indices(op, [0, 2, 0]))
    u = Tensor(np.linspace(0.5, 3, 9).reshape(3, 3).astype(np.float32))
    loss, (gu, (gmem, gw)) = vg(i, u)
    return [loss.asnumpy(), gu.asnumpy(), gmem.asnumpy(), gw.asnumpy(), net.mem.asnumpy()]


@pytest.mark.parametrize("variant", [0, 1, 2], ids=["discard-then-read", "two-in-a-row", "used-and-read"])
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterMul", "ScatterNdMax", "ScatterNdUpdate", "ScatterDiv"])
def test_training_graph_equals_pynative(op, variant):
    want = _grads("PYNATIVE", op, variant)
    for mode in ("GRAPH", "JIT"):
        got = _grads(mode, op, variant)
        for name, g, w in zip(("loss", "d updates", "d mem", "d w", "mem"), got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=f"{mode} {op} variant {variant}: {name}")
    ms.set_context(mode=ms.PYNATIVE_MODE)


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
def test_train_one_step_cell(mode):
    """nn.TrainOneStepCell + SGD over a Cell that discards an in-place result: the same
    losses and Parameters in both modes, and the memory really updated."""
    def run():
        net = _Discard("ScatterAdd", 0)
        loss_net = nn.TrainOneStepCell(net, nn.SGD([net.w], 0.01))
        i = Tensor(_indices("ScatterAdd", [0, 2]))
        u = Tensor(np.ones((2, 3), np.float32))
        losses = [float(loss_net(i, u).asnumpy()) for _ in range(3)]
        return losses, net.mem.asnumpy(), net.w.asnumpy()
    losses, mem, w = run()
    expected_mem = np.linspace(1, 2, 12).reshape(4, 3).astype(np.float32)
    expected_mem[[0, 2]] += 3
    np.testing.assert_allclose(mem, expected_mem, rtol=1e-6)
    assert losses[0] < losses[1] < losses[2]  # the memory grows faster than w shrinks
    if mode == "GRAPH":
        ms.set_context(mode=ms.PYNATIVE_MODE)
        want = run()
        ms.set_context(mode=ms.GRAPH_MODE)
        np.testing.assert_allclose(losses, want[0], rtol=1e-6)
        np.testing.assert_allclose(w, want[2], rtol=1e-6)


# ------------------------------------------------------------------ views (PYNATIVE)

VIEWS = {
    "slice": (lambda t: t[2:6], (4, 3)),
    "narrow": (lambda t: t.narrow(0, 1, 5), (5, 3)),
    "view": (lambda t: t.view((4, 6)), (4, 6)),
    "reshape": (lambda t: ops.reshape(t, (12, 2)), (12, 2)),
    "transpose": (lambda t: t.T, (3, 8)),
    "strided": (lambda t: t[::2], (4, 3)),
    "row": (lambda t: t[3], (3,)),
}


@pytest.mark.parametrize("base_kind", ["Parameter", "Tensor"])
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdMax", "ScatterUpdate", "ScatterNdDiv"])
def test_view_as_input_x_updates_the_base(op, view, base_kind):
    ms.set_context(mode=ms.PYNATIVE_MODE)
    make, shape = VIEWS[view]
    rng = np.random.default_rng(len(op) * 31 + len(view))
    base_np = rng.uniform(1, 4, (8, 3)).astype(np.float32)
    base = Parameter(Tensor(base_np), name="b") if base_kind == "Parameter" else Tensor(base_np)
    v = make(base)
    assert tuple(v.shape) == shape
    rows = [0, 1, 0] if shape[0] > 1 else [0, 0, 0]
    i = _indices(op, rows)
    u = rng.uniform(1, 4, (3,) + shape[1:]).astype(np.float32)
    expected_view = oracle(op, v.asnumpy(), i, u)
    getattr(ms_scatter, function_name(op))(v, Tensor(i), Tensor(u))
    expected_base = base_np.copy()
    make_np = {"slice": lambda a: a[2:6], "narrow": lambda a: a[1:6], "view": lambda a: a.reshape(4, 6),
               "reshape": lambda a: a.reshape(12, 2), "transpose": lambda a: a.T, "strided": lambda a: a[::2],
               "row": lambda a: a[3]}[view]
    target = make_np(expected_base)
    target[...] = expected_view
    if view in ("view", "reshape"):
        expected_base = target.reshape(8, 3)
    assert_same(base.asnumpy(), expected_base, f"base after {op} on a {view} view")


# ------------------------------------------------------------------ aliasing

@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("dtype", ["int32", "float32"])
@pytest.mark.parametrize("op", ["ScatterDiv", "ScatterNdDiv", "ScatterAdd", "ScatterNdMul", "ScatterUpdate"])
def test_updates_aliasing_input_x(mode, op, dtype):
    """scatter_div(x, i, x) and friends: updates are read as they were when the call
    started (an integer Div never divides by a value the call wrote)."""
    family = split_op(op)[0]
    x_np = np.array([6, 3, 2, 5, 7, 4], dtype) if family == "Scatter" else np.array([6, 3, 2, 5, 7, 4], dtype)
    i = np.array([1, 0, 2, 0, 3, 1], np.int32)
    i = i if family == "Scatter" else i.reshape(-1, 1)
    expected = oracle(op, x_np, i, x_np)
    fn = callable_for(op, "function")
    if mode == "PYNATIVE":
        p = Parameter(Tensor(x_np), name="p")
        fn(p, Tensor(i), p)
        got = p.asnumpy()
    else:
        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.p = Parameter(Tensor(x_np), name="p")

            def construct(self, idx):
                return fn(self.p, idx, self.p)
        net = Net()
        net(Tensor(i))
        got = net.p.asnumpy()
    assert_same(got, expected, f"{op} with updates = input_x")


def test_aliasing_error_leaves_input_x_untouched():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    x_np = np.array([6, 0, 2, 5], np.int32)
    p = Parameter(Tensor(x_np), name="p")
    with pytest.raises(ms_scatter.ScatterZeroDivisionError, match="^For 'ScatterDiv', integer division by zero"):
        ms_scatter.scatter_div(p, Tensor(np.array([0, 1, 2, 3], np.int32)), p)
    assert p.asnumpy().tolist() == x_np.tolist()


def test_view_of_input_x_as_updates():
    """updates = a slice of input_x (partial overlap): read before any write."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    x_np = np.arange(1, 9, dtype=np.float32)
    p = Parameter(Tensor(x_np), name="p")
    i = np.array([4, 5, 6, 7], np.int32)
    ms_scatter.scatter_add(p, Tensor(i), p[3:7])
    expected = x_np.copy()
    np.add.at(expected, i, x_np[3:7])
    assert_same(p.asnumpy(), expected)


# ------------------------------------------------------------------ copies

def test_deepcopy_of_every_primitive_and_of_a_cell():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    for op in OPS:
        kwargs = {"use_locking": True} if in_place(op) else {}
        prim = getattr(ms_scatter, op)(**kwargs)
        twin = copy.deepcopy(prim)
        assert type(twin) is type(prim) and twin is not prim
        if in_place(op):
            assert twin.use_locking is True
        x = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
        i, u = _indices(op, [1, 3]), np.full((2, 3), 2.0, np.float32)
        target = Parameter(Tensor(x), name="p") if in_place(op) else Tensor(x)
        out = twin(target, Tensor(i), Tensor(u))
        assert_same(out.asnumpy(), oracle(op, x, i, u), f"deepcopy of {op}")

    class Holder(nn.Cell):
        def __init__(self):
            super().__init__()
            self.p = Parameter(Tensor(np.zeros((4, 3), np.float32)), name="p")
            self.add = ms_scatter.ScatterAdd()
            self.tmax = ms_scatter.TensorScatterMax()

        def construct(self, i, u):
            self.add(self.p, i, u)
            return self.tmax(self.p, ops.expand_dims(i, -1), u)

    net = Holder()
    teacher = copy.deepcopy(net)  # EMA / teacher models copy whole networks
    i, u = Tensor(np.array([0, 2], np.int32)), Tensor(np.ones((2, 3), np.float32))
    teacher(i, u)
    assert teacher.p.asnumpy().sum() == 6 and net.p.asnumpy().sum() == 0


# ------------------------------------------------------------------ ranks above 16

@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("rank", [17, 32])
@pytest.mark.parametrize("op", ["ScatterNdAdd", "TensorScatterMax", "ScatterAdd"])
def test_ranks_above_16(mode, op, rank):
    shape = (2,) + (1,) * (rank - 2) + (3,)
    x = np.arange(6, dtype=np.float32).reshape(shape)
    family = split_op(op)[0]
    if family == "Scatter":
        i = np.array([1, 0, 1], np.int32)
        u = np.ones((3,) + shape[1:], np.float32) * 5
    else:
        i = np.zeros((3, rank), np.int32)
        i[:, 0] = [1, 0, 1]
        i[:, -1] = [2, 0, 2]
        u = np.array([5.0, 7.0, 1.0], np.float32)
    expected = oracle(op, x, i, u)
    fn = callable_for(op, "function")
    if mode == "GRAPH":
        if in_place(op):
            out = InPlaceCell(x, fn)(Tensor(i), Tensor(u))
        else:
            out = OutOfPlaceCell(fn)(Tensor(x), Tensor(i), Tensor(u))
    else:
        target = Parameter(Tensor(x), name="p") if in_place(op) else Tensor(x)
        out = fn(target, Tensor(i), Tensor(u))
    assert_same(out.asnumpy(), expected, f"{op} rank {rank}")


def test_rank_above_the_limit_is_a_value_error():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    with pytest.raises(ValueError, match=r"^For 'TensorScatterAdd', the rank of 'indices' must be <= 64, but got 65\.$"):
        ms_scatter.infer.scatter_nd_shape("TensorScatterAdd", (2, 3), (1,) * 64 + (2,), (1,) * 64, 2)


# ------------------------------------------------------------------ errors under autograd

@pytest.mark.parametrize("op", ["ScatterMul", "ScatterMax", "ScatterNdMin", "ScatterNdMul"])
def test_out_of_range_index_while_recording_a_gradient(op):
    """The saved-slot gather must not fail before the kernel: ScatterIndexError every
    time, the Parameter untouched."""
    ms.set_context(mode=ms.PYNATIVE_MODE)
    fn = callable_for(op, "function")
    x = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    p = Parameter(Tensor(x), name="p")
    i = Tensor(_indices(op, [1, 9]))
    u = Tensor(np.full((2, 3), -20.0 if "Min" in op else 20.0, np.float32))

    def loss(upd):
        return fn(p, i, upd).sum()
    grad = ms.grad(loss, 0)
    for _ in range(20):
        with pytest.raises(ms_scatter.ScatterIndexError, match=rf"^For '{op}', each value of 'indices' must be in "
                                                               r"\[0, 4\).*but got 9"):
            grad(u)
    assert p.asnumpy().tobytes() == x.tobytes()
    good = Tensor(_indices(op, [1, 3]))
    ok = ms.grad(lambda upd: fn(p, good, upd).sum(), 0)(u)  # and the process still works
    assert ok.shape == (2, 3)
    assert not np.array_equal(p.asnumpy(), x)


# ------------------------------------------------------------------ call conventions

@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("op", ["TensorScatterAdd", "ScatterNdUpdate", "ScatterMax"])
def test_keyword_arguments(mode, op):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    i, u = _indices(op, [1, 3]), np.full((2, 3), 20.0, np.float32)
    prim = callable_for(op, "primitive")
    if in_place(op):
        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.p = Parameter(Tensor(x), name="p")

            def construct(self, idx, upd):
                return prim(input_x=self.p, indices=idx, updates=upd)
        net = Net()
        out = net(Tensor(i), Tensor(u)) if mode == "GRAPH" else prim(
            input_x=net.p, indices=Tensor(i), updates=Tensor(u))
    else:
        class Net(nn.Cell):
            def construct(self, a, idx, upd):
                return prim(input_x=a, indices=idx, updates=upd)
        out = Net()(Tensor(x), Tensor(i), Tensor(u)) if mode == "GRAPH" else prim(
            input_x=Tensor(x), indices=Tensor(i), updates=Tensor(u))
    assert_same(out.asnumpy(), oracle(op, x, i, u))


def test_call_errors_name_the_op():
    ms.set_context(mode=ms.PYNATIVE_MODE)
    prim = ms_scatter.TensorScatterAdd()
    x, i, u = Tensor(np.zeros((4, 3), np.float32)), Tensor(np.array([[1]], np.int32)), Tensor(np.ones((1, 3), np.float32))
    with pytest.raises(TypeError, match=r"^For 'TensorScatterAdd', got an unexpected keyword argument 'x'"):
        prim(x=x, indices=i, updates=u)
    with pytest.raises(TypeError, match=r"^For 'TensorScatterAdd', missing input\(s\): updates\.$"):
        prim(x, i)
    with pytest.raises(TypeError, match=r"^For 'TensorScatterAdd', takes 3 inputs"):
        prim(x, i, u, u)
    with pytest.raises(TypeError, match=r"^For 'ScatterAdd', got multiple values for argument 'indices'"):
        ms_scatter.ScatterAdd()(Parameter(x, name="q"), i, indices=i)
    with pytest.raises(TypeError, match=r"^For 'ScatterNdAdd', 'input_x' must be a Tensor, but got list\.$"):
        ms_scatter.scatter_nd_add([1.0], i, u)


@pytest.mark.parametrize("bad", [2 ** 40, -1, 1.5, "2", None, True])
def test_set_num_threads_refuses_what_it_cannot_hold(bad):
    before = ms_scatter.get_num_threads()
    with pytest.raises((TypeError, ValueError), match=r"^For 'set_num_threads', "):
        ms_scatter.set_num_threads(bad)
    assert ms_scatter.get_num_threads() == before


# ------------------------------------------------------------------ dtypes and shapes the built-ins accept

@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("dtype", ["uint16", "uint32", "uint64"])
@pytest.mark.parametrize("op", ["ScatterNdAdd", "ScatterMax", "TensorScatterDiv", "ScatterNdSub"])
def test_wide_unsigned_dtypes(mode, op, dtype):
    x = np.array([[7, 8, 9], [10, 11, 12], [1, 2, 3], [65535, 0, 5]], dtype)
    i, u = _indices(op, [1, 3, 1]), np.array([[3, 2, 1], [1, 1, 1], [2, 2, 2]], dtype)
    expected = oracle(op, x, i, u)
    fn = callable_for(op, "function")
    if mode == "GRAPH" and in_place(op):
        out = InPlaceCell(x, fn)(Tensor(i), Tensor(u))
    elif mode == "GRAPH":
        out = ms.jit(fn)(Tensor(x), Tensor(i), Tensor(u))
    else:
        out = fn(Parameter(Tensor(x), name="p") if in_place(op) else Tensor(x), Tensor(i), Tensor(u))
    assert_same(out.asnumpy(), expected)


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("op", [op for op in IN_PLACE_OPS if op.startswith("Scatter") and "Nd" not in op])
def test_zero_d_parameter(mode, op):
    """A 0-d Parameter with 0-d indices and updates, as the built-ins take it."""
    x = np.array(5.0, np.float32)
    i, u = np.array(0, np.int32), np.array(2.0, np.float32)
    expected = oracle(op, x.reshape(1), i.reshape(1), u.reshape(1)).reshape(())
    fn = callable_for(op, "primitive")

    net = InPlaceCell(x, fn)
    out = net(Tensor(i), Tensor(u))
    assert_same(net.p.asnumpy(), expected)
    assert_same(out.asnumpy(), expected)
    with pytest.raises((ms_scatter.ScatterIndexError, RuntimeError)):
        net(Tensor(np.array(1, np.int32)), Tensor(u))
    assert_same(net.p.asnumpy(), expected)


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "float64"])
def test_pynative_tensor_scatter_output_is_cache_line_aligned(mode, dtype):
    """A PYNATIVE TensorScatter writes a fresh output; from 64 KiB on it starts on a 64-byte
    boundary (MindSpore's and numpy's memory is 16-byte aligned) and holds the oracle's
    values, whatever shape and dtype."""
    rng = np.random.default_rng(3)
    for rows, cols in ((4096, 17), (1000, 64), (33, 2000)):
        x = rng.integers(-50, 50, (rows, cols)).astype(np.float32)
        i = rng.integers(0, rows, (64, 1)).astype(np.int32)
        u = rng.integers(-50, 50, (64, cols)).astype(np.float32)
        xt, ut = Tensor(x), Tensor(u)
        if dtype != "float32":
            xt, ut = xt.astype(getattr(ms, dtype)), ut.astype(getattr(ms, dtype))
        out = ms_scatter.tensor_scatter_max(xt, Tensor(i), ut)
        assert out.shape == (rows, cols) and out.dtype == xt.dtype
        if out.nbytes >= 64 << 10:
            assert out.data_ptr() % 64 == 0, (rows, cols, out.data_ptr() % 64)
        want = x.copy()
        np.maximum.at(want, i[:, 0], u)
        assert_same(out.astype(ms.float32).asnumpy(), want, f"{dtype} {rows}x{cols}")


# ------------------------------------------------------------------ the seed pages' error type

@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdUpdate", "ScatterMax"])
def test_conversion_needing_the_parameter_converted_is_type_and_runtime_error(mode, op):
    x = np.zeros((4, 3), np.float16)
    i, u = _indices(op, [0, 2]), np.ones((2, 3), np.float32)
    fn = callable_for(op, "primitive")

    net = InPlaceCell(x, fn)
    for expected_type in (TypeError, RuntimeError):
        with pytest.raises(expected_type, match=rf"^For '{op}', Data type conversion is not supported for a "
                                                r"'Parameter'.*Float16, which cannot be converted to data type "
                                                r"Float32 automatically\. Cast the updates: "
                                                r"ops\.cast\(updates, mindspore\.float16\)\.$"):
            net(Tensor(i), Tensor(u))
    assert net.p.asnumpy().tobytes() == x.tobytes()
    # the other way round is MindSpore's implicit conversion: float16 updates into float32
    x32 = Parameter(Tensor(np.zeros((4, 3), np.float32)), name="q")
    out = callable_for(op, "function")(x32, Tensor(i), Tensor(u.astype(np.float16)))
    assert out.dtype == ms.float32


# ------------------------------------------------------------------ ties of -0.0 and +0.0

@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("op", ["ScatterMax", "ScatterNdMin", "TensorScatterMax", "TensorScatterMin"])
def test_signed_zero_ties_keep_the_value_already_there(mode, op):
    x = np.array([-0.0, 0.0, -0.0, 0.0], np.float32)
    i = _indices(op, [0, 1, 2, 2, 3, 3])
    u = np.array([0.0, -0.0, 0.0, -0.0, -0.0, 0.0], np.float32)
    fn = callable_for(op, "function")
    if in_place(op):
        p = Parameter(Tensor(x), name="p")
        if mode == "GRAPH":
            class Net(nn.Cell):
                def __init__(self):
                    super().__init__()
                    self.p = p

                def construct(self, idx, upd):
                    return fn(self.p, idx, upd)
            Net()(Tensor(i), Tensor(u))
        else:
            fn(p, Tensor(i), Tensor(u))
        got = p.asnumpy()
    else:
        f = ms.jit(fn) if mode == "GRAPH" else fn
        got = f(Tensor(x), Tensor(i), Tensor(u)).asnumpy()
    assert np.signbit(got).tolist() == np.signbit(x).tolist(), got


# ------------------------------------------------------------------ GNN code in GRAPH mode

class _GnnLayer(nn.Cell):
    """What MindSpore Graph Learning's translated GCNConv does: the primitive made inside
    construct (its GNNCell inserts `SCATTER_ADD = ms.ops.TensorScatterAdd()`)."""

    def __init__(self, how, op):
        super().__init__()
        self.how, self.op = how, op
        self.shared = getattr(ms_scatter, op)()
        self.p = Parameter(Tensor(np.zeros((4, 3), np.float32)), name="p")

    def construct(self, x, i, u):
        if self.how == "inside":
            y = ms_scatter.TensorScatterAdd()(x, i, u)
        elif self.how == "shared":
            y = self.shared(x, i, u)
        elif self.how == "function":
            y = ms_scatter.tensor_scatter_max(x, i, u)
        else:  # an in-place primitive made inside construct
            ms_scatter.ScatterNdAdd()(self.p, i, u)
            y = x + self.p
        return y * 2


class _GnnEncoder(nn.Cell):
    """GCNEncoder's pattern: layers in an nn.SequentialCell looped over, and a Python list in
    the output (which makes MindSpore compile part of the graph at run time, re-inferring our
    primitives on copies that are no PrimitivePy)."""

    def __init__(self, how, op):
        super().__init__()
        self.layers = nn.SequentialCell([_GnnLayer(how, op), _GnnLayer(how, op)])

    def construct(self, x, i, u):
        hidden = []
        for cell in self.layers.cell_list:
            x = cell(x, i, u)
        return x, hidden


@pytest.mark.parametrize("how,op", [("inside", "TensorScatterAdd"), ("shared", "TensorScatterMin"),
                                    ("function", "TensorScatterMax"), ("in_place", "ScatterNdAdd")])
def test_gnn_encoder_pattern_in_graph_mode(how, op):
    x_np = np.arange(12, dtype=np.float32).reshape(4, 3) - 4
    i_np, u_np = np.array([[0], [2], [0]], np.int32), np.linspace(-2, 5, 9).astype(np.float32).reshape(3, 3)
    results = {}
    for mode in (ms.PYNATIVE_MODE, ms.GRAPH_MODE):
        ms.set_context(mode=mode)
        out, hidden = _GnnEncoder(how, op)(Tensor(x_np), Tensor(i_np), Tensor(u_np))
        assert len(hidden) == 0
        results[mode] = out.asnumpy()
    ms.set_context(mode=ms.PYNATIVE_MODE)
    assert_same(results[ms.GRAPH_MODE], results[ms.PYNATIVE_MODE], f"{how} {op}")
    if how == "inside":  # against the oracle: two layers of (x + scatter) * 2
        want = x_np
        for _ in range(2):
            want = oracle("TensorScatterAdd", want, i_np, u_np) * 2
        assert_same(results[ms.GRAPH_MODE], want)


def test_gnn_encoder_pattern_gradient():
    ms.set_context(mode=ms.GRAPH_MODE)
    net = _GnnEncoder("inside", "TensorScatterAdd")

    class Loss(nn.Cell):
        def __init__(self):
            super().__init__()
            self.net = net

        def construct(self, x, i, u):
            return self.net(x, i, u)[0].sum()
    x, i, u = Tensor(np.ones((4, 3), np.float32)), Tensor(np.array([[1], [1]], np.int32)), Tensor(np.ones((2, 3), np.float32))
    gx, gu = ms.grad(Loss(), (0, 2))(x, i, u)
    ms.set_context(mode=ms.PYNATIVE_MODE)
    assert_same(gx.asnumpy(), np.full((4, 3), 4.0, np.float32))
    assert_same(gu.asnumpy(), np.full((2, 3), 6.0, np.float32))  # 2 * (2 + 1): u enters both layers
