"""Gradients of the 21 operators: one rule per reduction, written once for every family.

Every operator is ScatterNd with index depth d (Scatter* has d = 1), so a rule sees the
index vectors ``idx`` (N, d), the updates ``upd`` (N,) + slice, ``dout`` (shape of
input_x), ``out`` (the result) and ``xg`` (input_x before the call, gathered at idx:
the same shape as the updates). The helper scatters in the rules are ms_scatter's own
TensorScatter kernels (made below, from ops/_kernel.py); nothing calls MindSpore's scatter ops.

=========  =====================================================================
Add/Sub    dx = dout; du = +/- dout[idx]
Mul        dx = dout * prod(u at that slot); du_n = dout[idx_n] * x[idx_n] * (product
           of the *other* updates of that slot): zeros are counted, so a slot with
           one zero update still gives that update the product of the rest
Div        dx = dout / prod(u at that slot); du_n = -dout[idx_n] * out[idx_n] / u_n
Max/Min    the gradient of each output element is split equally among the values that
           reached it: input_x (if it equals the result) and every update equal to it
Update     dx = 0 where written, dout elsewhere; du_n = dout[idx_n] for the update that
           survived (the last in index order), 0 for the overwritten ones
=========  =====================================================================

Integer dtypes get zero gradients (MindSpore's convention for non-float inputs).

Row shards (ops/distributed.py): the same rules with ``shard`` = (row_begin, global_rows),
input_x a block of rows and ``idx`` global: every rule is local to a destination slice,
so the shard computes its own rows exactly; gathers give zeros and the helper scatters
(the kernels' row-shard entries) skip the vectors outside the shard, whose d updates
are -0.0 (the shard that holds the row computes them; -0.0 is the identity of a float sum,
so adding up every shard's d updates gives the holder's bit for bit).

Dynamic shapes (a dimension or the rank unknown at compile time): the same rules on the
index vectors in their own shape (indices.shape[:-1] + (d,)) and the updates unflattened,
so that no shape arithmetic is needed; Update numbers each update's elements by their
index vector with a cumulative sum. The choice is made at compile time (shape_unknown):
a static-shape graph runs the rules above, unchanged. (Not on row shards.)

In-place families: the kernel overwrites input_x, so the functional forms gather
input_x at idx before the call for the rules that need it (Mul, Max, Min). In GRAPH
mode that gather is removed when nothing differentiates the call; in PYNATIVE it runs
only while a gradient is being recorded. The in-place primitives run their functional
form in every mode (primitives.py), so they have the same gradients.
"""
import numpy as np
from mindspore import Tensor, nn, ops
from mindspore.common import dtype as mstype
from mindspore.ops import constexpr
from . import _kernel, infer
from ._compat import _pynative_executor
from ._graph import shape_unknown
from ._memo import Memo
from mindspore.ops.operations import Cast as _MsCast
from mindspore.ops.operations import ExpandDims as _MsExpandDims
from mindspore.ops.operations import GatherNd as _MsGatherNd
from mindspore.ops.operations import Maximum as _MsMaximum
from mindspore.ops.operations import Minimum as _MsMinimum
from mindspore.ops.operations import ZerosLike as _MsZerosLike


_FLOATS = (mstype.float16, mstype.float32, mstype.float64, mstype.bfloat16)
# the rules that need input_x before the write
NEEDS_INPUT = tuple(r.name for r in infer.REDUCTION.values() if r.needs_input)

def local_vectors(idx, shard, rows):
    """Index vectors (N, d) of global rows -> (vectors local to a shard of `rows` rows with
    rows outside it replaced by 0, (N,) bool: the row is in the shard)."""
    n, depth = idx.shape
    # (ops.slice: a Tensor's [] costs milliseconds on CPU in MindSpore 2.10's graphs)
    row = ops.slice(idx, (0, 0), (n, 1)) - ops.cast(ops.slice(shard, (0,), (1,)), idx.dtype)
    owned = ops.logical_and(row >= 0, row < rows)
    local = ops.select(owned, row, ops.zeros_like(row))
    if depth > 1:
        local = ops.concat((local, ops.slice(idx, (0, 1), (n, depth - 1))), 1)
    return local, ops.reshape(owned, (n,))


def _static(shape):
    return shape is not None and all(isinstance(d, int) and d >= 0 for d in shape)


@constexpr
def _fused_gather(dtype, x_shape, idx_shape):
    """Whether a gather runs as the library's kernel: the CPU target, a value dtype, index
    vectors of a known depth >= 1 into an x of rank >= 1 (MindSpore's GatherNd of
    200000 x 64 float32 took ~150 ms on 2 cores, the kernel ~5)."""
    if not (_static(x_shape) and _static(idx_shape)):
        return False  # dynamic shapes: MindSpore's GatherNd
    return (_kernel.fused_path() and infer.dtype_name(dtype) in infer.VALUE_DTYPES and len(x_shape) >= 1
            and len(idx_shape) >= 1 and 1 <= idx_shape[-1] <= len(x_shape))


def gather_nd(x, idx):
    """ops.gather_nd(x, idx), on the CPU the library's kernel."""
    if _fused_gather(x.dtype, x.shape, idx.shape):
        return _GATHER(x, idx)
    return ops.gather_nd(x, idx)


def _gather(x, idx, shard):
    """x at index vectors idx (N, d); on a shard, zeros for the vectors outside it."""
    if shard is None:
        return gather_nd(x, idx)
    local, owned = local_vectors(idx, shard, x.shape[0])
    rows = ops.gather_nd(x, local)
    return ops.select(ops.broadcast_to(_broadcast_rows(owned, rows), rows.shape), rows, ops.zeros_like(rows))


def _scatter(kernel, sharded_kernel, x, idx, upd, shard):
    if shard is None:
        return kernel(x, idx, upd)
    return sharded_kernel(x, idx, upd, shard)


def _prod(shape):
    n = 1
    for s in shape:
        n = n * s
    return n


def _flatten(x, indices, depth_one):
    """Index vectors (N, d) and the shape (N,) + slice the updates take."""
    if depth_one:
        d = 1
        n = _prod(indices.shape)
    else:
        d = indices.shape[-1]
        n = _prod(indices.shape[:-1])
    return ops.reshape(indices, (n, d)), (n,) + x.shape[d:]


def _is_float(t):
    return t.dtype in _FLOATS


def _broadcast_rows(flags, like):
    """(N,) -> the shape of `like` (N,) + slice."""
    return ops.reshape(flags, flags.shape + (1,) * (len(like.shape) - 1))


def _vector_numbers(idx, upd):
    """Dynamic shapes: for each element of upd (shape idx.shape[:-1] + slice), the number of
    its index vector in index order (int64), without knowing any rank."""
    ones = ops.ones_like(upd, dtype=mstype.int64)
    elements = ops.reduce_sum(ones)
    vectors = ops.reduce_sum(ops.ones_like(ops.reduce_sum(idx, -1), dtype=mstype.int64))
    slice_size = ops.maximum(elements // ops.maximum(vectors, 1), 1)
    position = ops.cumsum(ops.reshape(ones, (-1,)), 0) - 1
    return ops.reshape(position // slice_size, ops.shape(upd))


# One rule per reduction: (d input_x, d updates in the flat (N,) + slice shape; with dynamic,
# idx and upd in their own shapes); shard: see the module docstring. grads_of picks one in
# Python, so that a graph parses the rule of its own reduction only.

def _rule_add(dout, idx, upd, xg, out, shard=None, dynamic=False):  # pylint: disable=unused-argument
    return dout, _gather(dout, idx, shard)


def _rule_sub(dout, idx, upd, xg, out, shard=None, dynamic=False):  # pylint: disable=unused-argument
    return dout, -_gather(dout, idx, shard)


def _rule_div(dout, idx, upd, xg, out, shard=None, dynamic=False):  # pylint: disable=unused-argument
    dx = dout * _scatter(_TS_DIV, _TS_DIV_S, ops.ones_like(dout), idx, upd, shard)
    return dx, -_gather(dout, idx, shard) * _gather(out, idx, shard) / upd


def _rule_mul(dout, idx, upd, xg, out, shard=None, dynamic=False):  # pylint: disable=unused-argument
    is_zero = upd == 0
    nonzero = ops.select(is_zero, ops.ones_like(upd), upd)
    zeros = _scatter(_TS_ADD, _TS_ADD_S, ops.zeros_like(dout), idx, ops.cast(is_zero, dout.dtype), shard)
    product = _scatter(_TS_MUL, _TS_MUL_S, ops.ones_like(dout), idx, nonzero, shard)  # of the nonzero updates
    dx = dout * ops.select(zeros == 0, product, ops.zeros_like(product))
    zg = _gather(zeros, idx, shard)
    pg = _gather(product, idx, shard)
    none = ops.zeros_like(pg)
    others = ops.select(is_zero, ops.select(zg == 1, pg, none),
                        ops.select(zg == 0, pg / nonzero, none))
    return dx, _gather(dout, idx, shard) * xg * others


def _rule_max_min(dout, idx, upd, xg, out, shard=None, dynamic=False):  # pylint: disable=unused-argument
    og = _gather(out, idx, shard)
    won_u = ops.cast(upd == og, dout.dtype)
    won_x = _scatter(_TS_UPDATE, _TS_UPDATE_S, ops.ones_like(dout), idx, ops.cast(xg == og, dout.dtype), shard)
    count = ops.maximum(_scatter(_TS_ADD, _TS_ADD_S, won_x, idx, won_u, shard), ops.ones_like(dout))
    share = dout / count
    return share * won_x, _gather(share, idx, shard) * won_u


def _rule_update(dout, idx, upd, xg, out, shard=None, dynamic=False):  # pylint: disable=unused-argument
    if dynamic:
        written = _TS_UPDATE(ops.zeros_like(dout), idx, ops.ones_like(upd))
        order = _vector_numbers(idx, upd)
        last = _TS_MAX(ops.full_like(dout, -1, dtype=mstype.int64), idx, order)
        survived = ops.cast(gather_nd(last, idx) == order, dout.dtype)
        return dout * (1 - written), gather_nd(dout, idx) * survived
    n = idx.shape[0]
    written = _scatter(_TS_UPDATE, _TS_UPDATE_S, ops.zeros_like(dout), idx, ops.ones_like(upd), shard)
    order = ops.arange(n, dtype=mstype.int32)
    last = _scatter(_TS_MAX, _TS_MAX_S, ops.full(dout.shape[:idx.shape[1]], -1, dtype=mstype.int32), idx, order,
                    shard)
    survived = ops.cast(_gather(last, idx, shard) == order, dout.dtype)
    return dout * (1 - written), _gather(dout, idx, shard) * _broadcast_rows(survived, upd)


_RULES = {"Add": _rule_add, "Sub": _rule_sub, "Div": _rule_div, "Mul": _rule_mul, "Max": _rule_max_min,
          "Min": _rule_max_min, "Update": _rule_update}


def grads_of(reduction):
    """``grads(depth_one, x, indices, updates, xg, out, dout, shard=None)`` -> (d input_x,
    d updates) of one call of `reduction`; xg is input_x gathered at indices (shape of
    updates) or None for the rules that do not use it. On a row shard (shard given) the d
    updates of vectors outside it are -0.0 (whatever xg holds there)."""
    rule = _RULES[reduction]
    ties = reduction in ("Max", "Min")

    def float_grads(depth_one, x, indices, updates, xg, out, dout, shard):
        if shard is None and shape_unknown(ops.shape(dout), ops.shape(indices), ops.shape(updates)):
            idx = ops.expand_dims(indices, -1) if depth_one else indices
            dx, du = rule(dout, idx, ops.cast(updates, dout.dtype), xg, out, dynamic=True)
            return dx, ops.cast(du, updates.dtype)
        idx, flat_shape = _flatten(x, indices, depth_one)
        upd = ops.cast(ops.reshape(updates, flat_shape), dout.dtype)  # in-place calls convert updates
        if xg is not None:
            xg = ops.reshape(xg, flat_shape)
        if ties and shard is None and _fused_ties(dout.shape, idx.shape):
            # on the CPU the rule is two fused passes over the updates (kernels/cpu/message.h)
            dx, du = _TIE_GRAD_X(out, dout, idx, xg, upd), _TIE_GRAD_UPDATES(out, dout, idx, xg, upd)
        else:
            dx, du = rule(dout, idx, upd, xg, out, shard)
        if shard is not None:
            # -0.0 outside the shard: summed over the shards, it leaves the holder's value bit for bit
            _, owned = local_vectors(idx, shard, x.shape[0])
            du = ops.select(ops.broadcast_to(_broadcast_rows(owned, du), du.shape), du, -ops.zeros_like(du))
        return dx, ops.cast(ops.reshape(du, updates.shape), updates.dtype)

    def grads(depth_one, x, indices, updates, xg, out, dout, shard=None):
        if not _is_float(dout):
            return ops.zeros_like(dout), ops.zeros_like(updates)
        if dout.dtype == mstype.bfloat16:
            # MindSpore 2.10's CPU kernels of reshape, gather, select, ... have no bfloat16:
            # the rule runs in float32 (exact for bfloat16 values) and its results are rounded
            dx, du = float_grads(depth_one, x, indices, ops.cast(updates, mstype.float32),
                                 None if xg is None else ops.cast(xg, mstype.float32), ops.cast(out, mstype.float32),
                                 ops.cast(dout, mstype.float32), shard)
            return ops.cast(dx, mstype.bfloat16), ops.cast(du, updates.dtype)
        return float_grads(depth_one, x, indices, updates, xg, out, dout, shard)
    return grads


@constexpr
def _fused_ties(x_shape, idx_shape):
    """Whether Max/Min's rule runs as the fused CPU kernels: the CPU target and index vectors
    of depth >= 1 into an input_x of rank >= 1."""
    return (_kernel.fused_path() and _static(x_shape) and _static(idx_shape) and len(x_shape) >= 1
            and idx_shape[1] >= 1)


def _tie_grad_x_bprop(out, dout, idx, xg, upd, result, d_result):  # pylint: disable=unused-argument
    # dx is dout times a factor of the ties: linear in dout, piecewise constant in the rest
    return (ops.zeros_like(out), _TIE_GRAD_X(out, d_result, idx, xg, upd), ops.zeros_like(idx),
            ops.zeros_like(xg), ops.zeros_like(upd))


def _tie_grad_updates_bprop(out, dout, idx, xg, upd, result, d_result):  # pylint: disable=unused-argument
    # du_n = dout[idx_n] times a factor of the ties: its adjoint scatters d_result times that factor
    factor = _TIE_GRAD_UPDATES(out, ops.ones_like(dout), idx, xg, upd)
    d_dout = _TS_ADD(ops.zeros_like(dout), idx, d_result * factor)
    return ops.zeros_like(out), d_dout, ops.zeros_like(idx), ops.zeros_like(xg), ops.zeros_like(upd)


def _gather_bprop(x, idx, out, dout):  # pylint: disable=unused-argument
    return _TS_ADD(ops.zeros_like(x), idx, dout), ops.zeros_like(idx)


def _gathered_shape(shapes):
    """The shape a gather of x (shapes[0]) at index vectors (shapes[1]) gives."""
    return tuple(shapes[1][:-1]) + tuple(shapes[0][shapes[1][-1]:])


_GATHER = _kernel.FusedKernel("ScatterGradGather", _gather_bprop, _gathered_shape)
# Max/Min's rule fused (kernels/cpu/message.h ScatterTieGrad*): (out, dout, idx (n, d), xg,
# updates (n,) + slice) -> dx / du.
_TIE_GRAD_X = _kernel.FusedKernel("ScatterTieGradX", _tie_grad_x_bprop, lambda s: s[0])
_TIE_GRAD_UPDATES = _kernel.FusedKernel("ScatterTieGradUpdates", _tie_grad_updates_bprop, lambda s: s[4])


def out_of_place_bprop(reduction, depth_one, sharded=False):
    """bprop of a TensorScatter kernel: input_x is intact. sharded: the row-shard kernel
    (a 4th input, the shard)."""
    grads = grads_of(reduction)

    def bprop(x, indices, updates, out, dout):
        xg = None
        if reduction in NEEDS_INPUT:
            xg = gather_nd(ops.cast(x, mstype.float32) if x.dtype == mstype.bfloat16 else x, indices)
        dx, du = grads(depth_one, x, indices, updates, xg, out, dout)
        return dx, ops.zeros_like(indices), du

    def sharded_bprop(x, indices, updates, shard, out, dout):
        xg = None
        if reduction in NEEDS_INPUT:
            xg = _gather(x, _flatten(x, indices, depth_one)[0], shard)
        dx, du = grads(depth_one, x, indices, updates, xg, out, dout, shard)
        return dx, ops.zeros_like(indices), du, ops.zeros_like(shard)
    return sharded_bprop if sharded else bprop


def shard_kernel(op):
    """The row-shard kernel of `op` (ops/_kernel.py's ShardKernel) with its gradient rule: the
    out-of-place ones get sharded_bprop above; the in-place ones are differentiated by
    ShardInPlaceCall (below)."""
    record = infer.operator(op)
    bprop = None if record.in_place else out_of_place_bprop(record.reduction, record.depth_one, sharded=True)
    return _kernel.ShardKernel(op, bprop)


def _tensor_scatters(make):
    """(Add, Mul, Div, Max, Update): the TensorScatter kernels the rules scatter with, made by
    `make(op name)`."""
    ops_of = {r.reduction: op for op, r in infer.OPERATORS.items() if not r.in_place}
    return tuple(make(ops_of[reduction]) for reduction in ("Add", "Mul", "Div", "Max", "Update"))


# ms_scatter's own TensorScatter kernels (with these rules as their gradients, for a gradient
# of a gradient), and their row-shard twins (a 4th input, the shard).
_TS_ADD, _TS_MUL, _TS_DIV, _TS_MAX, _TS_UPDATE = _tensor_scatters(
    lambda op: _kernel.out_of_place_kernel(op, out_of_place_bprop(infer.operator(op).reduction, False)))
_TS_ADD_S, _TS_MUL_S, _TS_DIV_S, _TS_MAX_S, _TS_UPDATE_S = _tensor_scatters(shard_kernel)


class _WhileRecording:
    """PYNATIVE: run the primitive only while a gradient is being recorded, otherwise
    return a placeholder. GRAPH mode never calls __call__: there the primitive is dead
    code unless a gradient uses it."""

    def __call__(self, *args):
        if not _pynative_executor.requires_grad():
            return _PLACEHOLDER
        return super().__call__(*args)


class GatherNd(_WhileRecording, _MsGatherNd):  # keeps the primitive name "GatherNd"
    """input_x at the index vectors, before the kernel writes."""


class Minimum(_WhileRecording, _MsMinimum):  # keeps the primitive name "Minimum"
    """Index vectors clipped to input_x's dimensions before the saved-slot gather."""


class Maximum(_WhileRecording, _MsMaximum):  # keeps the primitive name "Maximum"
    """Index vectors clipped to 0 before the saved-slot gather."""


class Cast(_WhileRecording, _MsCast):  # keeps the primitive name "Cast"
    """bfloat16 input_x to float32 for the saved-slot gather."""


class ZerosLike(_WhileRecording, _MsZerosLike):  # keeps the primitive name "ZerosLike"
    """The saved slots when input_x has an empty indexed dimension (nothing to gather)."""


class ExpandDims(_WhileRecording, _MsExpandDims):  # keeps the primitive name "ExpandDims"
    """Scatter* indices as index vectors of depth 1. GatherNd, not Gather: MindSpore
    2.10's vmap rule of Gather fails for unbatched input_x."""


_PLACEHOLDER = Tensor([0], mstype.int32)
_save_slots = GatherNd()


class _GatherWhileRecording(_WhileRecording, _kernel.FusedKernel):
    """The saved slots on the CPU: the library's gather, run only while a gradient is
    recorded (PYNATIVE) or used (graphs)."""


_save_slots_fused = _GatherWhileRecording("ScatterGradGather", _gather_bprop, _gathered_shape)
_as_vectors = ExpandDims()
_at_most = Minimum()
_at_least = Maximum()
_zeros_while_recording = ZerosLike()
_to_float32 = Cast()
_local_vectors = None  # a _LocalVectors, made below (after the class)


# The primitive name is the class name: this keeps "Cast" (the compiler knows it by name and
# removes a cast to the same dtype), as a class of its own (see _as_value).
ValueCast = type("Cast", (_MsCast,), {"__qualname__": "ValueCast", "__doc__": "The in-place result as a value."})
_value_cast = ValueCast()


# float64 and bfloat16: MindSpore 2.10 reads a Parameter of those dtypes as a value through a
# TensorMove that has no CPU kernel of them (float64 comes back rounded to float32, bfloat16
# fails to compile); InPlaceCall returns a copy that the kernel makes instead.
_COPIED_RESULTS = (mstype.float64, mstype.bfloat16)


@constexpr
def _copies_result(dtype):
    return dtype in _COPIED_RESULTS


def _as_value(y):
    """An in-place functional form's result in a graph: the updated Parameter as a value, not
    the Parameter. MindSpore 2.10 compiles a custom-bprop Cell (InPlaceCall) once for all calls
    with arguments of one shape and dtype, Parameters included, so two calls on two Parameters
    of one shape in one graph returned the first Parameter as the second result (nn.Adam's
    sparse path under the patch read one moment for the other). A cast to its own dtype makes
    the call's result a value of its own; the compiler removes it (no copy). Outside the Cell:
    inside it, under vmap, a result that is discarded lost the write. float64 and bfloat16
    results are already values (the kernel's copy, InPlaceCall)."""
    if _copies_result(y.dtype):
        return y
    return _value_cast(y, y.dtype)


class InPlaceCall(nn.Cell):
    """One in-place functional form: ``Depend(input_x, kernel(input_x, indices, updates))``
    with the gradient rule of its reduction. ``saved`` is input_x gathered at indices before
    the kernel writes (or a placeholder when the rule does not need it). ShardInPlaceCall is
    the same call on a row shard (a 4th kernel input); both share the recorded call and the
    gradient below."""

    def __init__(self, kernel, result, result_view, reduction, depth_one, copying=None):
        super().__init__(auto_prefix=False)
        self.kernel = kernel
        self.copying = copying  # the same call with a copy of input_x as output (float64, bfloat16)
        self.fast_result = result
        self.result = result_view
        self.reduction = reduction
        self.depth_one = depth_one
        self.uses_saved = reduction in NEEDS_INPUT
        self.grads = grads_of(reduction)

    def __call__(self, x, indices, updates, saved):
        # Python-level calls only (a graph inlines construct). A Cell call costs ~0.3 ms in
        # PYNATIVE: pay it only while a gradient is being recorded.
        if not _pynative_executor.requires_grad():
            return self.fast_result(x, self.kernel(x, indices, updates))
        return self._recorded(x, indices, updates, saved)

    def _recorded(self, *args):
        try:
            return nn.Cell.__call__(self, *args)
        except Exception:
            # The error ends the gradient being recorded. MindSpore 2.10 leaves its grad flag
            # set after an exception inside a recorded function, and every later graph that
            # holds a custom-bprop Cell (ours) then fails to compile ("The pointer
            # [func_graph->get_return()] is null"): reset MindSpore's PYNATIVE resources (its
            # clear_res), so that the process is not poisoned.
            _pynative_executor.clear_res()
            raise

    def construct(self, x, indices, updates, saved):
        if self.copying is not None and _copies_result(x.dtype):
            return self.copying(x, indices, updates)
        return self.result(x, self.kernel(x, indices, updates))

    def bprop(self, x, indices, updates, saved, out, dout):
        dx, du = self._gradients(x, indices, updates, saved, out, dout, None)
        return dx, ops.zeros_like(indices), du, ops.zeros_like(saved)

    def _gradients(self, x, indices, updates, saved, out, dout, shard):
        """(d input_x, d updates) of the call."""
        xg = saved if self.uses_saved else None
        if isinstance(dout, tuple):
            # GRAPH mode, the result discarded while the Parameter is read later (or another
            # in-place op follows): MindSpore hands this side-effect Cell its inputs and the
            # result as one tuple `out` (x, indices, updates, [shard,] saved, monad, result),
            # and in `dout` the gradients those inputs have already received, then the
            # result's (measured on 2.10). The rule applies to the result's; the others pass
            # through, which gives what PYNATIVE and the built-ins give.
            if isinstance(out, tuple):
                out = out[-1]
            dx, du = self.grads(self.depth_one, x, indices, updates, xg, out, dout[-1], shard)
            return dx + dout[0], du + dout[2]
        return self.grads(self.depth_one, x, indices, updates, xg, out, dout, shard)


class ShardInPlaceCall(InPlaceCall):
    """InPlaceCall on a row shard: input_x a block of rows, global indices, ``shard`` = int64
    (row_begin, global_rows) as the kernel's 4th input (ops/distributed.py)."""

    def __call__(self, x, indices, updates, shard, saved):  # pylint: disable=arguments-differ
        if not _pynative_executor.requires_grad():
            return self.fast_result(x, self.kernel(x, indices, updates, shard))
        return self._recorded(x, indices, updates, shard, saved)

    def construct(self, x, indices, updates, shard, saved):  # pylint: disable=arguments-differ
        return self.result(x, self.kernel(x, indices, updates, shard))

    def bprop(self, x, indices, updates, shard, saved, out, dout):  # pylint: disable=arguments-differ
        dx, du = self._gradients(x, indices, updates, saved, out, dout, shard)
        return dx, ops.zeros_like(indices), du, ops.zeros_like(shard), ops.zeros_like(saved)


class _LocalVectors(nn.Cell):
    """A shard's index vectors (N, d) in its own rows (row 0 for the vectors outside it, which
    the rules mask), for the saved-slot gather; in PYNATIVE only while a gradient is recorded."""

    def __init__(self):
        super().__init__(auto_prefix=False)

    def __call__(self, vectors, shard, rows):
        if not _pynative_executor.requires_grad():
            return _PLACEHOLDER
        return super().__call__(vectors, shard, rows)

    def construct(self, vectors, shard, rows):
        return local_vectors(ops.reshape(vectors, (-1, vectors.shape[-1])), shard, rows)[0]


@constexpr(check=False)
def _slot_bounds(x_shape, vectors_shape, index_dtype):
    """(0, x.shape[:depth] - 1) per index component as tensors, or None when an indexed
    dimension is empty (then no index vector is valid); () where the depth or those
    dimensions are unknown at compile time (dynamic shapes: the graph computes them)."""
    if not vectors_shape:
        return None if vectors_shape == () else ()  # 0-d: refused by the kernel's inference
    depth = vectors_shape[-1]
    if x_shape is None or depth is None or any(d is None or d < 0 for d in x_shape[:depth]):
        if x_shape is not None and any(d == 0 for d in x_shape):
            return None  # an empty input_x: every saved slot is empty or invalid
        return ()
    dims = tuple(x_shape[:depth]) if len(x_shape) else (1,)  # a 0-d input_x: one element on axis 0
    if any(d == 0 for d in dims):
        return None
    return _bounds_tensors(dims, index_dtype == mstype.int64)


_BOUNDS = Memo(256)


def _bounds_tensors(dims, wide):
    """The (0, dims - 1) tensors of _slot_bounds, made once per (dims, index width): in
    PYNATIVE the function runs at every call (making the tensors cost ~15 us a call)."""
    key = (dims, wide)
    hit = _BOUNDS.get(key)
    if hit is None:
        nptype = np.int64 if wide else np.int32
        hit = _BOUNDS.put(key, (Tensor(np.zeros(len(dims), nptype)), Tensor(np.array([d - 1 for d in dims], nptype))))
    return hit


def _saved_slots(x, vectors, updates, shard=None):
    """input_x at the index vectors, clipped into input_x: the gather runs before the kernel
    checks the indices and must not fail first (the kernel raises the documented error). On a
    row shard, the vectors are first made local (any row of the shard for those outside it);
    the gathered slots then have the flat shape (N,) + slice, which the rules reshape to."""
    if shard is not None:
        vectors = _local_vectors(vectors, shard, x.shape[0])
    bounds = _slot_bounds(x.shape, vectors.shape, vectors.dtype)
    if bounds is None:
        return _zeros_while_recording(updates)
    if x.dtype == mstype.bfloat16:  # no bfloat16 GatherNd on the CPU: gathered in float32
        x = _to_float32(x, mstype.float32)
    if not x.shape:
        x = _as_vectors(x, 0)
    if not bounds:  # dynamic shapes (graphs only): x.shape[:depth] - 1 computed in the graph
        upper = ops.cast(ops.TensorShape()(x), vectors.dtype)[:ops.TensorShape()(vectors)[-1]] - 1
        return _save_slots(x, _at_least(_at_most(vectors, upper), ops.zeros_like(upper)))
    vectors = _at_least(_at_most(vectors, bounds[1]), bounds[0])
    if _fused_gather(x.dtype, x.shape, vectors.shape):
        return _save_slots_fused(x, vectors)
    return _save_slots(x, vectors)


_local_vectors = _LocalVectors()


def _no_slots(input_x, indices, updates, shard=None):  # pylint: disable=unused-argument
    return _PLACEHOLDER


def _slots_of_rows(input_x, indices, updates, shard=None):
    return _saved_slots(input_x, _as_vectors(indices, -1), updates, shard)


def _slots_of_vectors(input_x, indices, updates, shard=None):
    return _saved_slots(input_x, indices, updates, shard)


def in_place_function(kernel, result, result_view, reduction, depth_one, convert, sharded=False, copying=None):
    """The in-place functional form of one operator (returns the updated input_x);
    `convert(op, input_x, updates)` is the implicit dtype conversion of updates. sharded: the
    form on a row shard, ``function(shard, global indices, updates, shard_info)`` with a
    row-shard kernel (ops/distributed.py)."""
    op = kernel.op_name
    saved = _no_slots if reduction not in NEEDS_INPUT else _slots_of_rows if depth_one else _slots_of_vectors
    if sharded:
        call = ShardInPlaceCall(kernel, result, result_view, reduction, depth_one)

        def function(input_x, indices, updates, shard):
            updates = convert(op, input_x, updates)
            return _as_value(call(input_x, indices, updates, shard, saved(input_x, indices, updates, shard)))
        return function
    call = InPlaceCall(kernel, result, result_view, reduction, depth_one, copying)

    def function(input_x, indices, updates):  # pylint: disable=function-redefined
        updates = convert(op, input_x, updates)
        return _as_value(call(input_x, indices, updates, saved(input_x, indices, updates)))
    return function
