"""Program order of in-place calls: `a = op(p, i, u); b = p * 1; c = op(p, i, u)`.

GRAPH mode (an nn.Cell; also @mindspore.jit): b sees the first update and not the
second, c and p see both, and `a` used inside the graph (a * 1, taken before the second
call) sees exactly the first. The value *returned* as `a` is, for the primitive and the
function alike, input_x's value after the first call (docs/guide/policies.md: a value, not
the Parameter; MindSpore's own ops.scatter_add returns the Parameter, whose value when the
graph ends is the final one).

PYNATIVE: `a` shares the Parameter's memory, so it shows the final value; b, c and p
are checked as above.
"""
import gc
import os

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn

import ms_scatter
from ms_scatter.testing import oracle, random_case, rss_mb

from .helpers import assert_same, callable_for

# Operators where applying the same update twice differs from once, so that every
# step of the sequence is visible.
ORDER_OPS = ["ScatterAdd", "ScatterNdMul", "ScatterSub", "ScatterNdDiv"]
KINDS = ("primitive", "function")


class TwiceCell(nn.Cell):
    def __init__(self, x, fn):
        super().__init__()
        self.p = Parameter(Tensor(x), name="p")
        self.fn = fn

    def construct(self, indices, updates):
        a = self.fn(self.p, indices, updates)
        a_inside = a * 1
        b = self.p * 1
        c = self.fn(self.p, indices, updates)
        return a, a_inside, b, c


def _twice(fn):
    @ms.jit
    def run(p, indices, updates):
        a = fn(p, indices, updates)
        a_inside = a * 1
        b = p * 1
        c = fn(p, indices, updates)
        return a, a_inside, b, c
    return run


def _case(op):
    rng = np.random.default_rng(sum(map(ord, op)))
    x, i, u = random_case(rng, op, (5, 3), 6, "float32", "int32", duplicates=True)
    after1 = oracle(op, x, i, u)
    after2 = oracle(op, after1, i, u)
    assert not np.array_equal(x, after1) and not np.array_equal(after1, after2)
    return x, i, u, after1, after2


@pytest.mark.parametrize("mode", ["GRAPH", "JIT"], indirect=True)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", ORDER_OPS)
def test_program_order_in_graph(mode, op, kind):
    x, i, u, after1, after2 = _case(op)
    fn = callable_for(op, kind)
    if mode == "GRAPH":
        cell = TwiceCell(x, fn)
        param = cell.p
        a, a_inside, b, c = cell(Tensor(i), Tensor(u))
    else:
        param = Parameter(Tensor(x), name="p")
        a, a_inside, b, c = _twice(fn)(param, Tensor(i), Tensor(u))
    assert_same(a_inside.asnumpy(), after1, "a * 1 inside the graph")
    assert_same(b.asnumpy(), after1, "b = p * 1 between the calls")
    assert_same(c.asnumpy(), after2, "c")
    assert_same(param.asnumpy(), after2, "p afterwards")
    # the returned `a`: the value after the first call (see module doc)
    assert_same(a.asnumpy(), after1, "a")


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", ORDER_OPS)
def test_program_order_in_pynative(mode, op, kind):
    x, i, u, after1, after2 = _case(op)
    fn = callable_for(op, kind)
    p = Parameter(Tensor(x), name="p")
    a = fn(p, Tensor(i), Tensor(u))
    a_then = a.asnumpy().copy()
    b = p * 1
    c = fn(p, Tensor(i), Tensor(u))
    assert_same(a_then, after1, "a when returned")
    assert_same(b.asnumpy(), after1, "b")
    assert_same(c.asnumpy(), after2, "c")
    assert_same(p.asnumpy(), after2, "p afterwards")
    assert_same(a.asnumpy(), after2, "a (shares the Parameter's memory)")


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("kind", KINDS)
def test_pynative_result_follows_the_parameter_storage(mode, kind):
    """The result Tensor sharing the Parameter's memory is made once per Parameter and
    storage: after `set_data` (new memory, a new shape) the next result is the new data,
    and a second Parameter never gets the first one's result."""
    fn = callable_for("ScatterAdd", kind)
    p = Parameter(Tensor(np.zeros((4, 2), np.float32)), name="p")
    q = Parameter(Tensor(np.full((4, 2), 5, np.float32)), name="q")
    i, u = Tensor(np.array([1, 1], np.int32)), Tensor(np.ones((2, 2), np.float32))
    a = fn(p, i, u)
    assert a.data_ptr() == p.data_ptr()
    assert_same(fn(p, i, u).asnumpy(), np.array([[0, 0], [4, 4], [0, 0], [0, 0]], np.float32), "second call")
    assert_same(fn(q, i, u).asnumpy(), np.array([[5, 5], [7, 7], [5, 5], [5, 5]], np.float32), "q")
    p.set_data(Tensor(np.zeros((3, 2), np.float32)))
    b = fn(p, i, u)
    assert b.shape == (3, 2) and b.data_ptr() == p.data_ptr()
    assert_same(b.asnumpy(), np.array([[0, 0], [2, 2], [0, 0]], np.float32), "after set_data")
    assert_same(p.asnumpy(), b.asnumpy(), "p after set_data")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc/self/status (Linux)")
@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_pynative_result_does_not_keep_a_deleted_parameter(mode):
    """The kept result Tensor shares the Parameter's memory: when the Parameter and the
    user's result are gone, so is the memory (4 tables of 64 MB, RSS grows < 100 MB)."""
    i, u = Tensor(np.array([1], np.int32)), Tensor(np.ones((1, 1024), np.float32))
    gc.collect()
    before = rss_mb()
    for k in range(4):
        p = Parameter(Tensor(np.ones((16384, 1024), np.float32)), name=f"table{k}")
        out = ms_scatter.scatter_add(p, i, u)
        assert float(out[1, 0].asnumpy()) == 2.0
        del p, out
        gc.collect()
    grown = rss_mb() - before
    assert grown < 100, f"VmRSS grew {grown:.0f} MB after 4 deleted 64 MB Parameters"


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
def test_mixed_chain_in_graph(mode):
    """Different operators on one Parameter, reads in between, in program order."""
    class Chain(nn.Cell):
        def __init__(self, x):
            super().__init__()
            self.p = Parameter(Tensor(x), name="p")
            self.mul = ms_scatter.ScatterMul()

        def construct(self, i1, u1, i2, u2, i3, u3):
            ms_scatter.scatter_add(self.p, i1, u1)
            r1 = self.p * 1
            self.mul(self.p, i2, u2)
            r2 = self.p + 0
            ms_scatter.scatter_nd_update(self.p, i3, u3)
            return r1, r2

    rng = np.random.default_rng(7)
    x, i1, u1 = random_case(rng, "ScatterAdd", (6, 2), 8, "float32", "int32")
    _, i2, u2 = random_case(rng, "ScatterMul", (6, 2), 4, "float32", "int64")
    _, i3, u3 = random_case(rng, "ScatterNdUpdate", (6, 2), 5, "float32", "int32", depth=2)
    s1 = oracle("ScatterAdd", x, i1, u1)
    s2 = oracle("ScatterMul", s1, i2, u2)
    s3 = oracle("ScatterNdUpdate", s2, i3, u3)
    cell = Chain(x)
    r1, r2 = cell(*[Tensor(a) for a in (i1, u1, i2, u2, i3, u3)])
    assert_same(r1.asnumpy(), s1)
    assert_same(r2.asnumpy(), s2)
    assert_same(cell.p.asnumpy(), s3)
    # a second run of the same graph continues from the Parameter's new value
    cell(*[Tensor(a) for a in (i1, u1, i2, u2, i3, u3)])
    t3 = oracle("ScatterNdUpdate", oracle("ScatterMul", oracle("ScatterAdd", s3, i1, u1), i2, u2), i3, u3)
    assert_same(cell.p.asnumpy(), t3)


@pytest.mark.parametrize("kind", KINDS)
def test_result_unused_is_still_applied(mode, kind):
    """The in-place call is kept even when its result is not used (side effect)."""
    class Discard(nn.Cell):
        def __init__(self, x, fn):
            super().__init__()
            self.p = Parameter(Tensor(x), name="p")
            self.fn = fn

        def construct(self, indices, updates):
            self.fn(self.p, indices, updates)
            return updates * 2

    rng = np.random.default_rng(11)
    x, i, u = random_case(rng, "ScatterSub", (4, 3), 5, "float64", "int64")
    cell = Discard(x, callable_for("ScatterSub", kind))
    cell(Tensor(i), Tensor(u))
    assert_same(cell.p.asnumpy(), oracle("ScatterSub", x, i, u))
