"""vmap rules for the 21 primitives (and the token kernel of the in-place functions).

``mindspore.vmap`` looks a rule up by primitive name, and every ms_scatter primitive is
named "Custom"; so one getter is registered for "Custom". It dispatches on the class:
our kernels get the rules below, any other Custom op gets the "Custom" rule that was
registered before ours (None if there was none: MindSpore then uses its general
loop-and-stack rule, as without ms_scatter).

The rules follow MindSpore's own Scatter*/TensorScatter* rules: batch axes are moved
to the front (an unbatched operand is broadcast), and a batched call becomes one call
of depth d + 1 (ScatterNd*/TensorScatter* of the same reduction; Scatter* has depth 1)
whose index vectors are prefixed by their batch number. Only our kernels run.

* TensorScatter*: any operand batched at any axis; the result is batched at axis 0
  (MindSpore's own rule reports input_x's axis, wrong when input_x is unbatched or
  batched at another axis).
* Nothing batched (an op inside the vmapped function that sees only unbatched operands):
  the op runs once, unbatched, as with MindSpore's rules.
* Scatter*/ScatterNd* (in place): input_x (the Parameter) batched at axis 0, updated in
  place, result batched at axis 0; or input_x unbatched and nothing else batched. input_x
  unbatched while indices or updates are batched is a ValueError (as MindSpore's rule:
  one Parameter cannot take a batch of in-place updates in a defined order), and so is
  input_x batched at another axis.
"""
import numpy as np
from mindspore import Tensor
from mindspore.ops import constexpr
from mindspore.ops import functional as F
from mindspore.ops import operations as P
from mindspore.ops._vmap.vmap_base import _bdim_at_front, vmap_rules_getters

from . import infer
from ._kernel import ScatterKernel
from .primitives import PRIMITIVES, _InPlaceKernel

_PRIM_NAME = "Custom"
_previous_getter = vmap_rules_getters.get(_PRIM_NAME, None)  # another package's "Custom" rule, kept


def _axis(dim):
    return "None" if dim is None else str(dim)


@constexpr
def _raise_unbatched_input_x(op, x_dim, indices_dim, updates_dim):
    raise infer.op_error(
        ValueError, op,
        f"under vmap 'input_x' is updated in place, so it must be batched (source axis 0) when 'indices' or "
        f"'updates' is batched, but got source axes input_x {_axis(x_dim)}, indices {_axis(indices_dim)}, "
        f"updates {_axis(updates_dim)}.")


@constexpr
def _raise_input_x_axis(op, x_dim):
    raise infer.op_error(ValueError, op,
                         f"under vmap the source axis of 'input_x' (updated in place) must be 0 or None, "
                         f"but got {x_dim}.")


@constexpr
def _batch_prefix(op, indices_shape, indices_dtype, axis_size):
    """Tensor of shape indices_shape[:-1] + (1,) holding each vector's batch number
    (indices_shape[0] == axis_size): a constant of the graph."""
    if not all(isinstance(d, int) and d >= 0 for d in indices_shape):
        raise infer.op_error(ValueError, op, f"vmap needs the shape of 'indices' known at compile time, "
                                             f"but got {indices_shape}.")
    column = np.arange(axis_size).reshape((axis_size,) + (1,) * (len(indices_shape) - 1))
    prefix = np.broadcast_to(column, tuple(indices_shape[:-1]) + (1,))
    return Tensor(np.ascontiguousarray(prefix), indices_dtype)


def _prefixed(op, indices, axis_size):
    """[B, ..., d] index vectors -> [B, ..., d + 1], each prefixed by its batch number."""
    prefix = _batch_prefix(op, F.shape(indices), F.dtype(indices), axis_size)
    return P.Concat(-1)((prefix, indices))


_nd_kernels = {}


def _nd_kernel(prim):
    """The kernel that runs a batch of in-place `prim` at depth d + 1: ScatterNd* of the same
    reduction, of the same kind (the functions' token kernel, or the primitive)."""
    op = infer.operator(prim.op_name).nd
    if isinstance(prim, _InPlaceKernel):
        key = (op, "copy" if prim.copies else "token")
    else:
        key = (op, prim.use_locking)
    if key not in _nd_kernels:
        _nd_kernels[key] = (_InPlaceKernel(op, "ScatterNd", graph=None, copies=key[1] == "copy")
                            if key[1] in ("token", "copy")
                            else PRIMITIVES[op](use_locking=prim.use_locking))
    return _nd_kernels[key]


def _in_place_rule(prim, axis_size):
    op = prim.op_name
    depth_one = infer.operator(op).depth_one
    batched = _nd_kernel(prim)
    token = isinstance(prim, _InPlaceKernel) and not prim.copies

    def vmap_rule(x_bdim, indices_bdim, updates_bdim, u_monad):
        x, x_dim = x_bdim
        indices, indices_dim = indices_bdim
        updates, updates_dim = updates_bdim
        if x_dim is None:
            if indices_dim is not None or updates_dim is not None:
                _raise_unbatched_input_x(op, x_dim, indices_dim, updates_dim)
            return prim(x, indices, updates, u_monad), None
        if x_dim != 0:
            _raise_input_x_axis(op, x_dim)
        indices = _bdim_at_front(indices, indices_dim, axis_size)
        updates = _bdim_at_front(updates, updates_dim, axis_size)
        if depth_one:
            indices = F.expand_dims(indices, -1)
        out = batched(x, _prefixed(op, indices, axis_size), updates, u_monad)
        if token:
            return out, None  # the 1-element token; the function returns Depend(x, token)
        return out, 0

    return vmap_rule


def _tensor_scatter_rule(prim, axis_size):
    op = prim.op_name

    def vmap_rule(x_bdim, indices_bdim, updates_bdim):
        x, x_dim = x_bdim
        indices, indices_dim = indices_bdim
        updates, updates_dim = updates_bdim
        if x_dim is None and indices_dim is None and updates_dim is None:
            return prim(x, indices, updates), None
        x = _bdim_at_front(x, x_dim, axis_size)
        indices = _bdim_at_front(indices, indices_dim, axis_size)
        updates = _bdim_at_front(updates, updates_dim, axis_size)
        return prim(x, _prefixed(op, indices, axis_size), updates), 0

    return vmap_rule


def _our_rule(prim, axis_size):
    if getattr(prim, "_sharded", False):
        raise infer.op_error(ValueError, prim.op_name, "the row-shard kernels (ms_scatter.distributed) have no vmap "
                                                       "rule, but got a vmap over one.")
    if not infer.operator(prim.op_name).in_place:  # TensorScatter*: the primitives and our rules' kernels
        return _tensor_scatter_rule(prim, axis_size)
    return _in_place_rule(prim, axis_size)


@vmap_rules_getters.register(_PRIM_NAME)
def get_custom_vmap_rule(prim, axis_size):
    """ms_scatter's kernels get their rule; any other Custom op the previous one (or None)."""
    if isinstance(prim, ScatterKernel) and prim.op_name in infer.OPERATORS:
        return _our_rule(prim, axis_size)
    if isinstance(prim, ScatterKernel):
        return None  # the segment kernels: MindSpore's general loop-and-stack rule runs them per batch element
    if _previous_getter is not None:
        return _previous_getter(prim, axis_size)
    return None


__all__ = ["get_custom_vmap_rule"]
