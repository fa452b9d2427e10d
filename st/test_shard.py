"""Row shards in one process (no communication): ms_scatter.distributed's row-shard
functions on the blocks of a table, their gradients, and the semi-auto parallel rule.

* shard_<op>(block, global indices, updates, (row_begin, global_rows)) on each block of an
  11-row table equals the whole-table operator, bit for bit (GRAPH and PYNATIVE);
* gradients (the 7 reductions, the 3 families): each block's gradient is the whole-table
  gradient's rows, and the blocks' gradients of the updates, summed in block order, are the
  whole-table gradient bit for bit (-0.0 outside a block); this is what the two-rank test
  composes with the all-gather;
* errors: an index outside the global rows raises ScatterIndexError with the sharded
  message on every block (nothing written); a bad 'shard' input is a TypeError/ValueError;
* semi-auto parallel (MindSpore runs it on Ascend/GPU only; never run here): the layout
  attributes `.shard()` gives the kernel for a row split, strategies it refuses, and the
  rule that each device's block applies the index vectors of its rows: the blocks of every
  device of 4-device row splits put together equal the whole table; outside semi-auto
  parallel a sharded primitive computes on the whole input_x.
"""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn

import ms_scatter
from ms_scatter import distributed, infer
from ms_scatter.testing import oracle, random_case, split_op

from .helpers import OPS, assert_unchanged

ROWS = 11
BLOCKS = distributed.split_rows(ROWS, 3)  # (0, 4), (4, 4), (8, 3)


def shard_fn(op):
    return distributed.SHARD_FUNCTIONS["shard_" + infer.function_name(op)]


class ShardCell(nn.Cell):
    """fn(block_k, indices, updates, info_k) for every block k (one graph)."""

    def __init__(self, fn, blocks, in_place):
        super().__init__()
        self.fn = fn
        self.in_place = in_place
        self.blocks = ms.ParameterTuple(blocks) if in_place else tuple(blocks)
        self.count = len(blocks)

    def construct(self, indices, updates, infos):
        outs = ()
        for k in range(self.count):
            outs = outs + (self.fn(self.blocks[k], indices, updates, infos[k]),)
        return outs


def _case(op, dtype="float32", seed=0):
    family, _ = split_op(op)
    rng = np.random.default_rng(seed)
    return random_case(rng, op, (ROWS, 3), 10, dtype, "int64", depth=None if family == "Scatter" else 2)


@pytest.mark.parametrize("op", OPS)
def test_blocks_equal_the_whole_operator(mode, op):
    x, indices, updates = _case(op, seed=OPS.index(op))
    in_place = split_op(op)[0] != "TensorScatter"
    blocks = [x[b:b + n].copy() for b, n in BLOCKS]
    targets = [Parameter(Tensor(v), name=f"b{k}") for k, v in enumerate(blocks)] if in_place \
        else [Tensor(v) for v in blocks]
    infos = tuple(distributed.shard_info(b, ROWS) for b, _ in BLOCKS)
    i, u = Tensor(indices), Tensor(updates)
    if mode == "GRAPH":
        outs = ShardCell(shard_fn(op), targets, in_place)(i, u, infos)
    else:
        outs = [shard_fn(op)(t, i, u, info) for t, info in zip(targets, infos)]
    got = np.concatenate([o.asnumpy() for o in outs])
    expected = oracle(op, x, indices, updates)
    assert got.tobytes() == expected.tobytes(), (got, expected)
    if in_place:
        assert np.concatenate([t.asnumpy() for t in targets]).tobytes() == expected.tobytes()
    else:
        for t, v in zip(targets, blocks):
            assert_unchanged(t, v)


class InPlaceLoss(nn.Cell):
    """sum(fn(param, indices, updates[, info]) * coef)."""

    def __init__(self, fn, param, coef, info=None):
        super().__init__()
        self.fn = fn
        self.param = param
        self.coef = Tensor(coef)
        self.info = info

    def construct(self, indices, updates):
        if self.info is None:
            out = self.fn(self.param, indices, updates)
        else:
            out = self.fn(self.param, indices, updates, self.info)
        return (out * self.coef).sum()


class OutOfPlaceLoss(nn.Cell):
    """sum(fn(x, indices, updates[, info]) * coef)."""

    def __init__(self, fn, coef, info=None):
        super().__init__()
        self.fn = fn
        self.coef = Tensor(coef)
        self.info = info

    def construct(self, x, indices, updates):
        if self.info is None:
            out = self.fn(x, indices, updates)
        else:
            out = self.fn(x, indices, updates, self.info)
        return (out * self.coef).sum()


def _grads(fn, target, coef, indices, updates, info, in_place):
    i, u = Tensor(indices), Tensor(updates)
    if in_place:
        du, dx = ms.grad(InPlaceLoss(fn, target, coef, info), grad_position=1, weights=target)(i, u)
    else:
        dx, du = ms.grad(OutOfPlaceLoss(fn, coef, info), grad_position=(0, 2))(target, i, u)
    return dx.asnumpy(), du.asnumpy()


# GRAPH mode compiles a graph per block and operator: the full table in PYNATIVE, a few in GRAPH.
GRAD_CASES = [pytest.param(op, "PYNATIVE", id=f"{op}-PYNATIVE") for op in OPS] + [
    pytest.param(op, "GRAPH", id=f"{op}-GRAPH") for op in ("ScatterMax", "ScatterNdMul", "TensorScatterUpdate",
                                                             "ScatterDiv")]


@pytest.mark.parametrize("op, mode", GRAD_CASES, indirect=["mode"])
def test_block_gradients_compose_to_the_whole_gradient(op, mode):
    x, indices, updates = _case(op, seed=100 + OPS.index(op))
    if op.endswith("Max") or op.endswith("Min"):  # ties, split between x and the updates
        updates.reshape(-1)[:3] = x.reshape(-1)[:3]
    in_place = split_op(op)[0] != "TensorScatter"
    coef = np.random.default_rng(7).standard_normal(x.shape).astype(np.float32)
    whole_fn = getattr(ms_scatter, infer.function_name(op))
    target = Parameter(Tensor(x), name="whole") if in_place else Tensor(x)
    dx_whole, du_whole = _grads(whole_fn, target, coef, indices, updates, None, in_place)
    dxs, du_sum = [], None
    for k, (b, n) in enumerate(BLOCKS):
        block = Parameter(Tensor(x[b:b + n].copy()), name=f"block{k}") if in_place else Tensor(x[b:b + n].copy())
        dx, du = _grads(shard_fn(op), block, coef[b:b + n], indices, updates, distributed.shard_info(b, ROWS),
                        in_place)
        dxs.append(dx)
        du_sum = du if du_sum is None else du_sum + du
    assert np.concatenate(dxs).tobytes() == dx_whole.tobytes(), (np.concatenate(dxs), dx_whole)
    assert du_sum.tobytes() == du_whole.tobytes(), (du_sum, du_whole)


# (GRAPH mode: MindSpore's first failure of a graph costs ~3 s: one operator there)
@pytest.mark.parametrize("op, mode", [("ScatterUpdate", "PYNATIVE"), ("ScatterNdMin", "PYNATIVE"),
                                      ("TensorScatterAdd", "PYNATIVE"), ("ScatterNdMin", "GRAPH")],
                         indirect=["mode"])
def test_an_index_outside_the_global_rows_fails_every_block(mode, op):
    x, indices, updates = _case(op)
    flat = indices.reshape(-1)
    flat[0 if split_op(op)[0] == "Scatter" else 2] = ROWS
    in_place = split_op(op)[0] != "TensorScatter"
    for k, (b, n) in enumerate(BLOCKS):
        block = x[b:b + n].copy()
        target = Parameter(Tensor(block), name=f"e{k}") if in_place else Tensor(block)
        info = distributed.shard_info(b, ROWS)
        with pytest.raises(RuntimeError) as err:
            if mode == "GRAPH":
                ShardCell(shard_fn(op), [target], in_place)(Tensor(indices), Tensor(updates), (info,))[0].asnumpy()
            else:
                shard_fn(op)(target, Tensor(indices), Tensor(updates), info)
        message = ms_scatter.last_error()[1]
        assert f"must be in [0, {ROWS}) (dimension 0 of 'input_x', rows [{b}, {b + n}) of a table sharded by " \
               f"rows with global shape ({ROWS}, 3)), but got {ROWS}" in message
        if mode == "PYNATIVE":
            assert isinstance(err.value, ms_scatter.ScatterIndexError) and str(err.value) == message
        assert_unchanged(target, block)


@pytest.mark.parametrize("info, error, text", [
    (Tensor(np.array([0, ROWS], np.int32)), TypeError, "'shard' must be an int64 tensor"),
    (Tensor(np.array([0, ROWS, 1], np.int64)), ValueError, "'shard' must have shape (2,)"),
])
def test_a_bad_shard_input_is_refused(info, error, text):
    p = Parameter(Tensor(np.zeros((4, 3), np.float32)), name="bad")
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)")):
        distributed.shard_scatter_add(p, Tensor(np.array([1], np.int64)), Tensor(np.ones((1, 3), np.float32)), info)


def test_depth_zero_is_refused():
    p = Parameter(Tensor(np.zeros((4, 3), np.float32)), name="d0")
    with pytest.raises(ValueError, match="needs index vectors of depth >= 1"):
        distributed.shard_scatter_nd_add(p, Tensor(np.zeros((2, 0), np.int64)),
                                         Tensor(np.ones((2, 4, 3), np.float32)), distributed.shard_info(0, 4))


def test_split_rows():
    assert distributed.split_rows(11, 3) == [(0, 4), (4, 4), (8, 3)]
    assert distributed.split_rows(4, 4) == [(0, 1), (1, 1), (2, 1), (3, 1)]
    with pytest.raises(ValueError, match="cannot be split over 4 ranks"):
        distributed.split_rows(3, 4)


# ------------------------------------------------------------------ semi-auto parallel

@pytest.mark.parametrize("ranks, strategy, dev_matrix, x_map, blocks", [
    (4, ((4, 1), (1,), (1, 1)), [4], [0, -1], [0, 1, 2, 3]),
    (4, ((2, 1), (1,), (1, 1)), [2, 2], [1, -1], [0, 0, 1, 1]),
    (4, ((1, 1), (1,), (1, 1)), [1, 4], [1, -1], [0, 0, 0, 0]),
    (2, ((2, 1, 1), (1, 1), (1, 1)), [2], [0, -1, -1], [0, 1]),
])
def test_row_split_layout(ranks, strategy, dev_matrix, x_map, blocks):
    for rank in range(ranks):
        layout = distributed.row_split_layout("ScatterAdd", strategy, ranks, rank, len(strategy[0]))
        assert layout["dev_matrix_shape"] == dev_matrix
        assert layout["inputs_tensor_map"] == [x_map, [-1] * len(strategy[1]), [-1] * len(strategy[2]), [-1]]
        assert layout["in_strategy"] == strategy + ((1,),)
        assert layout["block"] == blocks[rank]


@pytest.mark.parametrize("strategy, text", [
    (((2, 2), (1,), (1, 1)), "only input_x's first axis may be split"),
    (((2, 1), (2,), (1, 1)), "only input_x's first axis may be split"),
    (((3, 1), (1,), (1, 1)), "the row split must divide the 4 devices"),
    (((2,), (1,), (1, 1)), "input_x's strategy must have 2 entries"),
    (((2, 1), (1,)), "3 tuples of positive ints"),
])
def test_row_split_layout_refuses(strategy, text):
    with pytest.raises(ValueError, match=text):
        distributed.row_split_layout("ScatterAdd", strategy, 4, 0, 2)


@pytest.mark.parametrize("op", ["ScatterMax", "ScatterNdUpdate", "TensorScatterMul"])
@pytest.mark.parametrize("splits", [4, 2])
def test_each_device_of_a_row_split_applies_its_rows(op, splits):
    """What every device of a 4-device semi-auto run computes (its slice of input_x as
    MindSpore slices it, the whole batch, row_info's shard input), put together."""
    rows, ranks = 12, 4
    family = split_op(op)[0]
    x, indices, updates = random_case(np.random.default_rng(3), op, (rows, 3), 9, "float32", "int32",
                                      depth=None if family == "Scatter" else 2)
    expected = oracle(op, x, indices, updates)
    strategy = ((splits, 1), (1,) * indices.ndim, (1,) * updates.ndim)
    got = {}
    for rank in range(ranks):
        layout = distributed.row_split_layout(op, strategy, ranks, rank, 2)
        begin, total = distributed.row_info(rows, layout["splits"], layout["block"])
        local = x[begin:begin + rows // splits].copy()
        target = Parameter(Tensor(local), name=f"dev{rank}") if family != "TensorScatter" else Tensor(local)
        out = shard_fn(op)(target, Tensor(indices), Tensor(updates), distributed.shard_info(begin, total))
        got.setdefault(layout["block"], out.asnumpy())
        assert got[layout["block"]].tobytes() == out.asnumpy().tobytes(), "devices of one block disagree"
    assert sorted(got) == list(range(splits))
    assert np.concatenate([got[b] for b in range(splits)]).tobytes() == expected.tobytes()
    assert distributed.row_info(rows, splits, 1, semi_auto=False) == (0, rows)


def test_shard_sets_the_layout_and_computes_whole_outside_semi_auto(mode):
    """.shard() gives the kernel MindSpore's CustomInfo attributes; in stand-alone mode (the
    only one this CPU machine runs) the primitive still computes on the whole input_x."""
    prim = distributed.shard_primitive(ms_scatter.ScatterMax(), ((2, 1), (1,), (1, 1)), ranks=4, rank=3)
    kernel = prim.sharded_kernel
    assert kernel.attrs["dev_matrix_shape"] == [2, 2]
    assert kernel.attrs["inputs_tensor_map"] == [[1, -1], [-1], [-1, -1], [-1]]
    assert kernel.attrs["outputs_tensor_map"] == [[-1]]
    assert kernel.attrs["in_strategy"] == ((2, 1), (1,), (1, 1), (1,))
    assert prim.row_layout["block"] == 1
    x, indices, updates = _case("ScatterMax")
    p = Parameter(Tensor(x), name="sharded_prim")
    if mode == "GRAPH":
        class Cell(nn.Cell):
            def __init__(self):
                super().__init__()
                self.p = p
                self.op = prim

            def construct(self, i, u):
                return self.op(self.p, i, u)
        Cell()(Tensor(indices), Tensor(updates))
    else:
        prim(p, Tensor(indices), Tensor(updates))
    assert p.asnumpy().tobytes() == oracle("ScatterMax", x, indices, updates).tobytes()


def test_shard_method_of_the_primitives():
    """The primitives' own .shard() (world of one here: only unsplit strategies) and its errors."""
    prim = ms_scatter.TensorScatterAdd().shard(((1, 1), (1, 1), (1,)))
    assert prim.sharded_kernel.attrs["outputs_tensor_map"] == [[0, -1]]
    with pytest.raises(ValueError, match="the row split must divide the 1 devices"):
        ms_scatter.ScatterAdd().shard(((2, 1), (1,), (1, 1)))
    with pytest.raises(ValueError, match="out_strategy is not supported"):
        ms_scatter.ScatterAdd().shard(((1, 1), (1,), (1, 1)), ((1, 1),))


def test_vmap_of_a_row_shard_kernel_is_refused():
    x = Tensor(np.ones((2, 4, 3), np.float32))

    def f(x, i, u):
        return distributed.shard_tensor_scatter_add(x, i, u, distributed.shard_info(0, 4))
    with pytest.raises(ValueError, match="the row-shard kernels .* have no vmap rule"):
        ms.vmap(f, in_axes=(0, None, None))(x, Tensor(np.array([[1]], np.int64)), Tensor(np.ones((1, 3), np.float32)))


def test_updates_of_a_lower_dtype_are_converted_as_for_the_whole_operator(mode):
    p = Parameter(Tensor(np.zeros((4, 2), np.float32)), name="conv")
    i, u, info = Tensor(np.array([1, 5], np.int32)), Tensor(np.full((2, 2), 1.5, np.float16)), \
        distributed.shard_info(0, 8)
    if mode == "GRAPH":
        ShardCell(distributed.shard_scatter_add, [p], True)(i, u, (info,))
    else:
        distributed.shard_scatter_add(p, i, u, info)
    assert p.asnumpy().tolist() == [[0, 0], [1.5, 1.5], [0, 0], [0, 0]]  # row 5 is not in rows [0, 4)
