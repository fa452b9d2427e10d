"""Scale-out on MindSpore's own distributed runtime (``msrun`` / ``mindspore.communication``).

Three ways to use the scatter family on several processes, after
``mindspore.communication.init()`` (on CPU MindSpore picks the "mccl" backend):

* **Replicated Parameters** (data parallel): ``rep = Replicated(group)``, then
  ``rep.scatter_add(param, indices, updates)`` and the 20 others. Every rank
  all-gathers the indices and updates of every rank, in rank order, and applies that
  global batch with the ordinary kernel, so the replicas stay bit-identical and equal to
  one process applying the concatenated batch. The kernel validates the whole global
  batch before it writes, on every rank: an out-of-range index on any rank fails the call
  on every rank and no rank writes. The position in the message is in the gathered
  indices, shape ``(group size,) + indices.shape``: its first coordinate is the rank.
* **Row-sharded tables** (``ShardedTable``): each rank holds a contiguous block of rows
  (``split_rows``) as its own Parameter. ``table.scatter_add(indices, updates)`` takes
  global row indices: they are all-gathered, and the kernel's row-shard entry applies the
  vectors whose row is in the local block, skips the rest and checks every index against
  the global row count (all 7 reductions, in index order, so the table equals one process
  holding it whole, bit for bit). ``table.lookup(ids)`` returns global rows, with the
  gradient of the shard. The communication-free kernels are ``shard_scatter_add(shard,
  indices, updates, info)`` ... with ``info`` = int64 ``(row_begin, global_rows)``.
* **Semi-auto parallel** (MindSpore supports it on Ascend/GPU only; refused on CPU):
  ``ScatterAdd().shard(((s, 1), (1,), (1, 1)))`` splits input_x by rows over ``s``
  devices; the primitive then runs the row-shard kernel with this device's block
  (``row_split_layout``), through MindSpore's ``CustomInfo`` handler for Custom ops.
  **Never run**: written from MindSpore 2.10's CustomInfo source; the layout rule is
  unit-tested on CPU.

Without ``init()`` (or with a group of one) every path runs in the one process, without
communication: the same code is its own single-process reference.

Communication per call, per rank, with ``W`` ranks, ``n`` index vectors per rank of
``d`` components (``b_i`` bytes each), update slices of ``s`` elements (``b_v`` bytes):
replicated and sharded scatter receive ``(W - 1) n (d b_i + s b_v)`` bytes (AllGather of
indices and updates); a lookup ``(W - 1) n b_i + (W - 1) W n s b_v`` (AllGather of the
ids, then of every rank's rows for the global batch: MindSpore 2.10's CPU backend has no
AlltoAll or ReduceScatter, and AllReduce only for float16/float32); its gradient
``(W - 1) n (b_i + s b_v)``; the gradient of a scatter's updates ``(W - 1) W n s b_v``. int8/uint8/bool travel as int16 (CPU AllGather has no 1-byte
kernel), and on CPU float64/int64 as their bytes in int32 words (MindSpore 2.10's CPU
AllGather rounds float64 to float32 and truncates int64 to int32). Everything else is
local: a replicated scatter applies ``W n`` updates on every rank, a sharded one only
those of its rows.
"""
import numpy as np
from mindspore import Parameter, Tensor, context, nn, ops
from mindspore.common import dtype as mstype
from mindspore.communication import GlobalComm, get_group_size, get_rank
from mindspore.ops import constexpr

from . import _grad, _kernel, infer
from ._ascend import use_ascend_path
from ._graph import run_in_graphs_as
from ._kernel import in_place_updates
from ._lib import ScatterIndexError

INFO_DTYPE = mstype.int64
_zeros_like = ops.ZerosLike()


# ------------------------------------------------------------------ groups and rows

def group_info(group=None):
    """(group name or None, this process's rank in it, its size). Without
    ``communication.init()`` and with no group named: (None, 0, 1), the one process."""
    if group is None:
        if not GlobalComm.INITED:
            return None, 0, 1
        group = GlobalComm.WORLD_COMM_GROUP
    return group, get_rank(group), get_group_size(group)


def split_rows(rows, parts):
    """The contiguous row blocks of a table of `rows` rows over `parts` ranks, as
    [(row_begin, count)]: the first ``rows % parts`` ranks hold one row more."""
    if not isinstance(rows, int) or not isinstance(parts, int) or parts < 1 or rows < parts:
        raise ValueError(f"ms_scatter: a table of {rows} rows cannot be split over {parts} ranks "
                         f"(each rank needs a row).")
    base, extra = divmod(rows, parts)
    blocks, begin = [], 0
    for r in range(parts):
        count = base + (1 if r < extra else 0)
        blocks.append((begin, count))
        begin += count
    return blocks


@constexpr
def _wire(dtype):
    """How a tensor of `dtype` travels through AllGather: "native", "int16" (cast: CPU's
    AllGather has no 1-byte kernels) or "words" (its bytes as int32: on CPU, MindSpore
    2.10's AllGather and Broadcast round float64 to float32 and truncate int64 to int32)."""
    if dtype in (mstype.int8, mstype.uint8, mstype.bool_):
        return "int16"
    if dtype in (mstype.float64, mstype.int64) and context.get_context("device_target") == "CPU":
        return "words"
    return "native"


@constexpr
def _pynative():
    return context.get_context("mode") == context.PYNATIVE_MODE


def _words(x):
    return np.ascontiguousarray(x).view(np.int32)


def _from_words(dtype):
    def unpack(x):
        return np.ascontiguousarray(x).view(dtype)
    return unpack


# The bytes of a float64/int64 tensor as int32 words along the last axis, and back (numpy
# views, MindSpore's "pyfunc" Custom ops: CPU only, where they are needed).
_TO_WORDS = ops.Custom(_words, out_shape=lambda s: list(s[:-1]) + [s[-1] * 2], out_dtype=lambda d: mstype.int32,
                       func_type="pyfunc")
_WORDS_TO_F64 = ops.Custom(_from_words(np.float64), out_shape=lambda s: list(s[:-1]) + [s[-1] // 2],
                           out_dtype=lambda d: mstype.float64, func_type="pyfunc")
_WORDS_TO_I64 = ops.Custom(_from_words(np.int64), out_shape=lambda s: list(s[:-1]) + [s[-1] // 2],
                           out_dtype=lambda d: mstype.int64, func_type="pyfunc")


class BatchGather(nn.Cell):
    """Every rank's tensor (one shape on every rank), stacked in rank order:
    ``(group size,) + x.shape``. Its gradient is, for each rank, the sum in rank order of
    every rank's gradient of that rank's slot (the gradient of the sum of every rank's
    loss). With a group of one: x with a leading axis of 1, no communication."""

    def __init__(self, group=None):
        super().__init__()
        self.group, self.rank, self.size = group_info(group)
        self.all_gather = ops.AllGather(self.group) if self.size > 1 else None
        self.rank_index = Tensor(self.rank, mstype.int32)

    def gather(self, x):
        """AllGather along axis 0 (x unchanged in a group of one), bit-exact for every dtype."""
        if self.size == 1:
            return x
        wire = _wire(x.dtype)
        if wire == "int16":
            return ops.cast(self.all_gather(ops.cast(x, mstype.int16)), x.dtype)
        if wire == "words":
            if _pynative():  # a view of the same bytes
                return self.all_gather(x.view(mstype.int32)).view(x.dtype)
            words = self.all_gather(_TO_WORDS(x))  # GRAPH: MindSpore 2.10 has no dtype view there
            return _WORDS_TO_F64(words) if x.dtype == mstype.float64 else _WORDS_TO_I64(words)
        return self.all_gather(x)

    def construct(self, x):
        return self.gather(ops.expand_dims(x, 0))

    def bprop(self, x, out, dout):
        if self.size == 1 or not _grad._is_float(dout):  # pylint: disable=protected-access
            return (ops.reshape(dout, x.shape) if self.size == 1 else ops.zeros_like(x),)
        parts = self.gather(ops.expand_dims(dout, 0))  # (size, size) + x.shape: [rank, slot]
        # (ops.gather / unstack: a Tensor's [] costs milliseconds on CPU in MindSpore 2.10's graphs)
        mine = ops.unstack(ops.gather(parts, self.rank_index, 1), 0)
        total = mine[0]
        for r in range(1, self.size):
            total = total + mine[r]
        return (total,)


# ------------------------------------------------------------------ the row-shard kernels

def _shard_function(op):
    record = infer.operator(op)
    kernel = _grad.shard_kernel(op)
    if not record.in_place:
        def function(input_x, indices, updates, shard):
            return kernel(input_x, indices, updates, shard)
        return function, kernel
    # the one in-place path (ops/_grad.py) with the shard as the kernel's 4th input
    return _grad.in_place_function(kernel, _kernel.result, _kernel.result_view, record.reduction, record.depth_one,
                                   in_place_updates, sharded=True), kernel


SHARD_FUNCTIONS = {}  # "shard_scatter_add" ...: (shard, global indices, updates, int64 (row_begin, global_rows))
_SHARD_KERNELS = {}
for _op, _record in infer.OPERATORS.items():
    _fn, _shard_kernel = _shard_function(_op)
    _name = "shard_" + _record.function
    _fn.__name__ = _fn.__qualname__ = _name
    _fn.__doc__ = (f"{_op} on a row shard: input_x holds rows [row_begin, row_begin + input_x.shape[0]) of a "
                   f"table of global_rows rows (shard = int64 (row_begin, global_rows)); indices name global "
                   f"rows, checked against global_rows; the vectors outside the shard are skipped. No "
                   f"communication.")
    SHARD_FUNCTIONS[_name] = _fn
    _SHARD_KERNELS[_op] = _shard_kernel
globals().update(SHARD_FUNCTIONS)


def shard_info(row_begin, global_rows):
    """The 'shard' input of the row-shard functions: int64 Tensor (row_begin, global_rows)."""
    return Tensor(np.array([row_begin, global_rows], np.int64))


# ------------------------------------------------------------------ replicated Parameters

class Replicated(nn.Cell):
    """The 21 functions over the global batch of a group (None: the world group):
    ``rep.scatter_add(param, indices, updates)`` all-gathers every rank's indices and
    updates (the same shapes on every rank), in rank order, and applies them with
    ``ms_scatter.scatter_add``. In a graph, make it an attribute of the Cell that calls it
    (MindSpore 2.10 failed to compile a Cell created or looked up while it compiles)."""

    def __init__(self, group=None):
        super().__init__()
        self.batch = BatchGather(group)
        self.group, self.rank, self.size = self.batch.group, self.batch.rank, self.batch.size


def _replicated_method(function):
    def method(self, input_x, indices, updates):
        return function(input_x, self.batch(indices), self.batch(updates))
    method.__name__ = method.__qualname__ = function.__name__
    method.__doc__ = (f"{function.__name__} over the group's global batch: every rank's indices and updates, "
                      f"in rank order (the gathered indices have shape (group size,) + indices.shape).")
    return method


def install(functions):
    """Called by ms_scatter's __init__ with the 21 functions (ops/primitives.py), which this
    module does not import: Replicated gets one method each."""
    for name, function in functions.items():
        setattr(Replicated, name, _replicated_method(function))


# ------------------------------------------------------------------ row-sharded tables

@constexpr
def _use_assert():
    return context.get_context("device_target") in ("CPU", "GPU")  # ops.Assert: GPU and CPU only


def lookup_message(global_rows, value, position, gathered_shape):
    return (f"For 'ShardedTable.lookup', each value of 'ids' must be in [0, {global_rows}) (the rows of the "
            f"table), but got {int(value)} at position {tuple(int(p) for p in position)} of the gathered 'ids' "
            f"(shape {tuple(int(d) for d in gathered_shape)}; the first coordinate is the rank).")


class _Lookup(nn.Cell):
    """Global rows of a row-sharded table for every rank's ids (the forward and gradient of
    ``ShardedTable.lookup``)."""

    def __init__(self, group, blocks, global_rows):
        super().__init__()
        self.batch = BatchGather(group)
        self.rank, self.size = self.batch.rank, self.batch.size
        self.begins = tuple(b for b, _ in blocks)
        self.global_rows = global_rows
        self.check = ops.Assert(3)
        self.add = _SHARD_KERNELS["TensorScatterAdd"]

    def __call__(self, shard, ids, info):
        if _pynative():
            # every rank checks the global batch before anything is gathered from the shards
            gathered = self.batch(ids).asnumpy()
            bad = (gathered < 0) | (gathered >= self.global_rows)
            if bad.any():
                flat = int(np.argmax(bad.reshape(-1)))
                raise ScatterIndexError(lookup_message(self.global_rows, gathered.reshape(-1)[flat],
                                                       np.unravel_index(flat, gathered.shape), gathered.shape))
        return super().__call__(shard, ids, info)

    def _vectors(self, ids):
        gathered = self.batch(ids)
        return gathered, ops.reshape(gathered, (-1, 1))

    def construct(self, shard, ids, info):
        gathered, vectors = self._vectors(ids)
        if not _pynative() and _use_assert():
            flat = ops.reshape(gathered, (-1,)).astype(mstype.int64)
            ok = ops.logical_and(flat >= 0, flat < self.global_rows)
            first = ops.argmax(ops.logical_not(ok).astype(mstype.int32)).astype(mstype.int64)
            done = self.check(ops.all(ok), (ops.stack([Tensor(2, mstype.int64), first, ops.gather(flat, first, 0)]),))
            vectors = ops.depend(vectors, done)
        # this shard's rows of the global batch, zeros for the others (Gather: GatherNd of depth 1
        # ran 5-10x slower on CPU)
        local, held = _grad.local_vectors(vectors, info, shard.shape[0])
        rows = ops.gather(shard, ops.reshape(local, (-1,)), 0)
        row_shape = shard.shape[1:]
        rows = ops.select(ops.broadcast_to(ops.reshape(held, (-1,) + (1,) * len(row_shape)), rows.shape), rows,
                          ops.zeros_like(rows))
        n = vectors.shape[0] // self.size
        parts = self.batch.gather(ops.expand_dims(rows, 0))  # (size holder, size * n) + row
        mine = ops.unstack(ops.gather(ops.reshape(parts, (self.size, self.size, n) + row_shape),
                                      self.batch.rank_index, 1), 0)  # this rank's n rows from each holder
        flat_ids = ops.reshape(ids, (n,))
        out = mine[0]
        for r in range(1, self.size):
            held = ops.broadcast_to(ops.reshape(flat_ids >= self.begins[r], (n,) + (1,) * len(row_shape)),
                                    out.shape)
            out = ops.select(held, mine[r], out)
        return ops.reshape(out, ids.shape + row_shape)

    def bprop(self, shard, ids, info, out, dout):
        _, vectors = self._vectors(ids)
        row_shape = shard.shape[1:]
        douts = ops.reshape(self.batch(dout), (vectors.shape[0],) + row_shape)
        # (ops.zeros_like of the Parameter failed to compile here in GRAPH mode: "func graph is empty")
        dshard = self.add(ops.zeros(shard.shape, shard.dtype), vectors, douts, info)
        return dshard, _zeros_like(ids), _zeros_like(info)


class ShardedTable(nn.Cell):
    """A table of `rows` rows of shape `row_shape`, split by rows over the ranks of `group`
    (``split_rows``): this rank's block is the Parameter ``self.param`` (rows
    ``[row_begin, row_begin + local_rows)``).

    * ``table.scatter_add(indices, updates)`` ... ``table.scatter_nd_update(indices, updates)``
      (the 14 in-place operators; indices name global rows; every rank passes its own
      batch of one shape): the global batch, in rank order, applied to the shards; the
      result is this rank's updated shard. Every index is checked against `rows` on every
      rank before anything is written.
    * ``table.lookup(ids)`` -> ``ids.shape + row_shape``: the global rows of this rank's
      ids, differentiable with respect to the shard (the gradient of the sum of every
      rank's loss, as one process computes it for the concatenated batch; the shards are
      not replicated: keep them out of a data-parallel gradient reducer).
    * ``table.full()``: the whole table as a numpy array, on every rank.

    `init`: a scalar, an array of the whole table's shape (each rank keeps its block), or a
    callable ``(row_begin, local_rows) -> block``. Without ``communication.init()`` the
    table is whole, in one process."""

    def __init__(self, rows, row_shape=(), dtype=mstype.float32, init=0, group=None, name="sharded_table"):
        super().__init__()
        if use_ascend_path():
            raise NotImplementedError("ms_scatter: ShardedTable needs the aot kernels (CPU or GPU); the Ascend "
                                      "path's Ascend C kernels have no row-shard form yet.")
        self.group, self.rank, self.size = group_info(group)
        self.blocks = split_rows(rows, self.size)
        self.row_begin, self.local_rows = self.blocks[self.rank]
        self.global_rows = rows
        self.row_shape = tuple(int(d) for d in row_shape)
        self.dtype = dtype
        self.param = Parameter(Tensor(self._initial(init)), name=name)
        self.info = shard_info(self.row_begin, rows)
        self.batch = BatchGather(group)
        self.lookup_cell = _Lookup(group, self.blocks, rows)

    def _initial(self, init):
        np_dtype = mstype.dtype_to_nptype(self.dtype)
        shape = (self.local_rows,) + self.row_shape
        if callable(init):
            block = np.asarray(init(self.row_begin, self.local_rows), np_dtype)
        elif np.ndim(init) == 0:
            block = np.full(shape, init, np_dtype)
        else:
            whole = np.asarray(init, np_dtype)
            if whole.shape != (self.global_rows,) + self.row_shape:
                raise ValueError(f"ms_scatter: init of shape {whole.shape} for a table of shape "
                                 f"{(self.global_rows,) + self.row_shape}.")
            block = whole[self.row_begin:self.row_begin + self.local_rows]
        if block.shape != shape:
            raise ValueError(f"ms_scatter: this rank's block must have shape {shape}, but init gave {block.shape}.")
        return np.ascontiguousarray(block)

    def lookup(self, ids):
        """The global rows `ids` (any shape, int32/int64) of this rank, from the shards that hold them."""
        return self.lookup_cell(self.param, ids, self.info)

    def full(self):
        """The whole table (numpy), on every rank: an AllGather of the shards."""
        most = max(c for _, c in self.blocks)
        block = self.param.value()
        if most > self.local_rows:
            block = ops.concat((block, ops.zeros((most - self.local_rows,) + self.row_shape, self.dtype)))
        parts = self.batch(block).asnumpy()
        return np.concatenate([parts[r][:c] for r, (_, c) in enumerate(self.blocks)])


def _table_method(function):
    def method(self, indices, updates):
        return function(self.param, self.batch(indices), self.batch(updates), self.info)
    name = function.__name__[len("shard_"):]
    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"{name} of every rank's batch (global row indices), in rank order, on the sharded table; "
                      f"returns this rank's updated shard.")
    return method


for _name, _fn in SHARD_FUNCTIONS.items():
    if not _name.startswith("shard_tensor_"):
        setattr(ShardedTable, _name[len("shard_"):], _table_method(_fn))


# ------------------------------------------------------------------ semi-auto parallel

def row_split_layout(op_name, in_strategy, ranks, rank, x_rank):
    """What a row-split strategy means for one of our primitives under MindSpore's
    semi-auto parallel (its ``CustomInfo`` handler for Custom ops takes the device matrix
    and tensor maps from the primitive's attributes and adds no communication).

    in_strategy: (input_x's, indices', updates') as for the built-in ops; only input_x's
    first axis may be split (``(s, 1, ...)``, s dividing `ranks`): indices and updates are
    replicated, each device holds ``rows / s`` rows of input_x and applies the index
    vectors of its rows. Returns a dict: the kernel's ``in_strategy`` (with the 'shard'
    input), ``dev_matrix_shape`` ([s, ranks / s], row-major over the ranks, so rank r holds
    block ``r // (ranks / s)``), ``inputs_tensor_map`` / ``outputs_tensor_map`` for
    input_x split along its first axis, ``splits`` = s and ``block`` (this rank's)."""
    def bad(message):
        return infer.op_error(ValueError, op_name, f"for semi-auto parallel {message}, but got {in_strategy}.")
    if not isinstance(in_strategy, tuple) or len(in_strategy) != 3 or \
            not all(isinstance(s, tuple) and all(isinstance(v, int) and v >= 1 for v in s) for s in in_strategy):
        raise bad("the strategy must be 3 tuples of positive ints (input_x, indices, updates)")
    x_strategy, i_strategy, u_strategy = in_strategy
    if len(x_strategy) != x_rank:
        raise bad(f"input_x's strategy must have {x_rank} entries (its rank)")
    if any(v != 1 for v in x_strategy[1:]) or any(v != 1 for v in i_strategy + u_strategy):
        raise bad("only input_x's first axis may be split (indices and updates are replicated: each device "
                  "applies the index vectors of its rows)")
    splits = x_strategy[0]
    if ranks % splits:
        raise bad(f"the row split must divide the {ranks} devices")
    repeat = ranks // splits
    dev_matrix = [splits, repeat] if repeat > 1 else [splits]
    row_axis = len(dev_matrix) - 1  # MindSpore's tensor maps count device-matrix axes from the right
    x_map = [row_axis] + [-1] * (x_rank - 1)
    return {
        "in_strategy": in_strategy + ((1,),),
        "dev_matrix_shape": dev_matrix,
        "inputs_tensor_map": [x_map, [-1] * len(i_strategy), [-1] * len(u_strategy), [-1]],
        "x_map": x_map,
        "splits": splits,
        "block": rank // repeat,
    }


@constexpr
def _semi_auto():
    return context.get_auto_parallel_context("parallel_mode") in ("semi_auto_parallel", "auto_parallel")


def row_info(rows, splits, block, semi_auto=True):
    """(row_begin, global_rows) of a device's block of a row split in `splits` of a table of
    `rows` rows (the graph sees input_x's global shape): MindSpore slices it evenly, so
    block b holds rows [b * rows / splits, (b + 1) * rows / splits). Outside (semi-)auto
    parallel the strategy is ignored and the device holds the whole table: (0, rows)."""
    if not semi_auto or splits == 1:
        return (0, rows)
    if rows % splits:
        raise ValueError(f"ms_scatter: a row split in {splits} needs a row count divisible by it, but got {rows}.")
    return (block * (rows // splits), rows)


@constexpr
def _row_info(rows, splits, block):
    return row_info(rows, splits, block, _semi_auto())


def shard_primitive(primitive, in_strategy=None, out_strategy=None, ranks=None, rank=None):
    """``primitive.shard(...)`` for ms_scatter's primitives (see ``row_split_layout``): the
    primitive's graph path becomes its row-shard kernel with the layout attributes
    MindSpore's CustomInfo reads, and this device's block as the 'shard' input. Returns
    the primitive. In PYNATIVE and outside (semi-)auto parallel it computes on the whole
    input_x as before. ranks, rank: the stage's device count and this device's rank in it
    (default: the world group's)."""
    if in_strategy is None and out_strategy is None:
        return primitive
    if out_strategy is not None:
        raise infer.op_error(ValueError, primitive.op_name, "out_strategy is not supported (the output follows "
                                                            f"input_x), but got {out_strategy}.")
    x_rank = len(in_strategy[0]) if isinstance(in_strategy, tuple) and in_strategy and \
        isinstance(in_strategy[0], tuple) else 0
    _, world_rank, world_size = group_info()
    layout = row_split_layout(primitive.op_name, in_strategy, world_size if ranks is None else ranks,
                              world_rank if rank is None else rank, x_rank)
    function, kernel = _shard_function(primitive.op_name)  # this primitive's own kernel: it carries the layout
    kernel.shard(layout["in_strategy"])
    kernel.add_prim_attr("dev_matrix_shape", layout["dev_matrix_shape"])
    kernel.add_prim_attr("inputs_tensor_map", layout["inputs_tensor_map"])
    kernel.add_prim_attr("outputs_tensor_map", [[-1]] if infer.operator(primitive.op_name).in_place
                         else [layout["x_map"]])
    splits, block = layout["splits"], layout["block"]
    primitive.add_prim_attr("in_strategy", in_strategy)
    primitive.row_layout = layout

    def graph_call(input_x, indices, updates):
        info = Tensor(_row_info(input_x.shape[0], splits, block), INFO_DTYPE)
        return function(input_x, indices, updates, info)
    run_in_graphs_as(primitive, graph_call)
    primitive.sharded_kernel = kernel
    return primitive

