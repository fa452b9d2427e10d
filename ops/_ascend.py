"""The Ascend path: the 21 primitives and 21 functions on the AKG hybrid kernels
(``ms_scatter.kernels.ascend.hybrid``) instead of an aot library.

Which path runs:

* a primitive takes this path when it is *constructed* with the device target "Ascend", or
  with ``MS_SCATTER_KERNELS=hybrid`` on any target (how the tests run it on CPU);
* a function decides at each call in PYNATIVE and at each compile in GRAPH mode / under
  ``jit`` (``hybrid_selected``, a constexpr), by the same rule.

How a call runs there (x = input_x, u = updates); a hybrid kernel is always out of place
and cannot raise, so everything the aot kernels check is checked around it:

* PYNATIVE (``HybridOp.__call__``): MindSpore's implicit dtype conversion as on the aot path,
  the shape/dtype rules of ``ms_scatter.infer``, then the indices (and, for integer Div,
  the updates) are read to the host and checked with numpy: an out-of-range or negative
  index raises ``ScatterIndexError``, a zero divisor ``ScatterZeroDivisionError``, with the
  CPU kernels' message, before anything is launched. Then ``HybridScatter`` (views, the
  kernel, out of place) and, for Scatter*/ScatterNd*, ``ops.assign(x, out)``; the result is
  the updated Parameter (a Tensor sharing its memory, as on the aot path). In a graph an
  in-place primitive or function returns the assigned Parameter, as on the aot path.
* GRAPH / jit (``GraphScatter.construct``): the same shape/dtype rules at compile time; a
  validity flag computed in the graph from the indices (and the divisors); where
  ``ops.Assert`` exists (device target CPU or GPU) it fails the step with MindSpore's
  ``RuntimeError("assert failed")`` before the kernel and the assign run (MindSpore prints
  ``input data: [code position value]``: code 2 = index, 3 = zero divisor, position
  flat in indices/updates); on Ascend, where MindSpore documents no Assert, an invalid
  call is *gated*: the kernel receives only index vectors it skips (or divisors of 1),
  so nothing is written and the step does not fail. The gate is in the graph on every
  target, behind the Assert.

How MindSpore is made to run that graph for a *primitive*: a primitive is compiled as one
kernel node, which cannot assign a Parameter. A hybrid-path primitive instance therefore
carries ``__ms_class__`` (what ``mindspore.jit_class`` sets) and an instance attribute
``__call__``: MindSpore's graph parser then treats the instance as a jit class and parses
``getattr(obj, "__call__")`` (measured on MindSpore 2.10: the instance attribute wins),
i.e. ``HybridOp.graph_call``; Python's own call still uses the class's ``__call__``
(the PYNATIVE path).

Costs: in place is O(x) + O(u) here (the kernel copies x, the assign writes x back), not
O(u) as on the aot path; PYNATIVE also copies the indices (and integer Div's updates) to
the host. Each new (kernel, shape, dtype) is an AKG compile (2-3 s for the first,
measured on CPU); dynamic shapes are refused (the hybrid kernels need static shapes).
"""
import importlib.util
import os

import numpy as np
from mindspore import Tensor, context, nn, ops
from mindspore.common import dtype as mstype
from mindspore.graph.api import _pynative_executor
from mindspore.ops import constexpr

from . import infer
from ._lib import INDEX_OUT_OF_RANGE, DIVISION_BY_ZERO, ScatterIndexError, ScatterZeroDivisionError, kernel_func

ENV = "MS_SCATTER_KERNELS"
SETTINGS = ("auto", "hybrid")

try:  # what context.get_context("device_target") reads, without its checks (0.7 us instead of 9 us)
    from mindspore.context import _context as _ms_context, ms_ctx_param as _ms_ctx_param

    def device_target():
        return _ms_context().get_param(_ms_ctx_param.device_target)
except ImportError:  # pragma: no cover - other MindSpore versions
    def device_target():
        return context.get_context("device_target")


def kernels_setting():
    """MS_SCATTER_KERNELS: 'auto' (default: hybrid kernels on Ascend, aot on CPU/GPU) or
    'hybrid' (the hybrid kernels on any target)."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in SETTINGS:
        raise ValueError(f"ms_scatter: {ENV} must be one of {', '.join(SETTINGS)}, but got {value!r}.")
    return value


def use_hybrid(target=None):
    """Whether a primitive constructed now (a function called now) takes the hybrid path."""
    return kernels_setting() == "hybrid" or (target or device_target()) == "Ascend"


@constexpr
def hybrid_selected():
    """The functions' switch: plain Python in PYNATIVE, folded once per compile in a graph."""
    return use_hybrid()


def hybrid_module():
    """ms_scatter.kernels.ascend.hybrid; AKG's build server needs the 'decorator' package."""
    if importlib.util.find_spec("decorator") is None:
        raise ImportError("ms_scatter: the hybrid kernels (device target Ascend or MS_SCATTER_KERNELS=hybrid) "
                          "need the 'decorator' package for MindSpore's AKG compiler: pip install decorator "
                          "(or pip install \"ms-scatter[ascend]\").")
    from .kernels.ascend import hybrid  # pylint: disable=import-outside-toplevel
    return hybrid


def kernel_choice(op_name, entry):
    """(library path or None, ``func`` of ops.Custom, func_type) of a primitive constructed now:
    the aot entry point, or on the hybrid path the op's first hybrid kernel (the primitive
    object itself is then never launched: its calls go through ``attach``)."""
    if use_hybrid():
        return None, hybrid_module().kernel_function(op_name, 1, "float32"), "hybrid"
    path, func = kernel_func(entry)
    return path, func, "aot"


def attach(primitive):
    """Put a hybrid-path primitive on the hybrid path in every mode (see the module docstring):
    returns the ``HybridOp`` that its ``__call__`` uses in PYNATIVE. In a graph an in-place
    primitive, like a function, returns the updated Parameter itself (as the aot path does)."""
    op = HybridOp(primitive.op_name, primitive.family, primitive._convert)  # pylint: disable=protected-access
    primitive.__ms_class__ = True
    primitive.__call__ = op.graph_call
    return op


# ------------------------------------------------------------------ rules and messages

def _shape_str(shape):
    return str(tuple(int(d) for d in shape))  # "(4, 3)", "(4,)", "()": as the C++ kernels print shapes


def index_message(op, x_shape, dim, value, position, indices_shape):
    return (f"For '{op}', each value of 'indices' must be in [0, {int(x_shape[dim])}) (dimension {dim} of "
            f"'input_x' with shape {_shape_str(x_shape)}), but got {int(value)} at position "
            f"{_shape_str(position)} of 'indices' (shape {_shape_str(indices_shape)}).")


def zero_division_message(op, position, updates_shape):
    return (f"For '{op}', integer division by zero: 'updates' must not contain 0 for dtype of 'input_x', "
            f"but got 0 at position {_shape_str(position)} of 'updates' (shape {_shape_str(updates_shape)}).")


def _prod(dims):
    out = 1
    for d in dims:
        out *= int(d)
    return out


def static_plan(op, family, in_place, x_shape, indices_shape, updates_shape, x_dtype, indices_dtype,
                updates_dtype, ascend=False):
    """The primitive's shape/dtype rules for one call, and what must be checked at run time.

    Raises TypeError/ValueError as the primitive's inference does (and for dynamic shapes,
    and on Ascend for dtypes outside the kernels' Ascend registration). Returns
    (depth, K, bounds, check_index, check_zero): index depth, number of index vectors,
    x.shape[:depth], whether indices must be checked, whether updates must be checked for 0."""
    x_shape, indices_shape, updates_shape = tuple(x_shape), tuple(indices_shape), tuple(updates_shape)
    if in_place:
        updates_dtype = infer.in_place_updates_dtype(op, x_dtype, updates_dtype)
    infer.scatter_dtype(op, x_dtype, indices_dtype, updates_dtype)
    if any(d < 0 for d in x_shape + indices_shape + updates_shape):
        raise infer.op_error(ValueError, op,
                             f"the hybrid kernels need static shapes, but got input_x {_shape_str(x_shape)}, "
                             f"indices {_shape_str(indices_shape)}, updates {_shape_str(updates_shape)}.")
    rule, kwargs = infer.family_shape_rule(family)
    rule(op, x_shape, indices_shape, updates_shape, **kwargs)
    x_name = infer.dtype_name(x_dtype)
    if ascend:
        hybrid = hybrid_module()
        if x_name not in hybrid.ASCEND_VALUE_DTYPES or infer.dtype_name(indices_dtype) not in hybrid.ASCEND_INDEX_DTYPES:
            raise infer.op_error(TypeError, op,
                                 f"on Ascend the hybrid kernels are registered for input_x of "
                                 f"{', '.join(hybrid.ASCEND_VALUE_DTYPES)} and indices of "
                                 f"{', '.join(hybrid.ASCEND_INDEX_DTYPES)}, but got {x_name} and "
                                 f"{infer.dtype_name(indices_dtype)}.")
    if family == "Scatter":
        depth, k = 1, _prod(indices_shape)
    else:
        depth, k = indices_shape[-1], _prod(indices_shape[:-1])
    check_zero = op.endswith("Div") and x_name.startswith(("int", "uint")) and _prod(updates_shape) > 0
    return depth, k, x_shape[:depth], depth > 0 and k > 0, check_zero


@constexpr
def _graph_plan(op, family, in_place, x_shape, indices_shape, updates_shape, x_dtype, indices_dtype,
                updates_dtype, ascend):
    return static_plan(op, family, in_place, x_shape, indices_shape, updates_shape, x_dtype, indices_dtype,
                       updates_dtype, ascend)


def check_on_host(op, x_shape, indices, updates, plan):
    """PYNATIVE: the checks of the aot kernels, in their order (indices, then divisors), on
    the host with numpy; raises with their message before anything is launched."""
    depth, _, bounds, check_index, check_zero = plan
    if check_index:
        idx = indices.asnumpy()
        vectors = idx.reshape(-1, depth).astype(np.int64)
        bad = (vectors < 0) | (vectors >= np.asarray(bounds, np.int64))
        if bad.any():
            flat = int(np.argmax(bad.reshape(-1)))
            position = np.unravel_index(flat, idx.shape)
            raise ScatterIndexError(index_message(op, x_shape, flat % depth, vectors.reshape(-1)[flat], position,
                                                  idx.shape))
    if check_zero:
        upd = updates.asnumpy()
        zero = upd == 0
        if zero.any():
            position = np.unravel_index(int(np.argmax(zero.reshape(-1))), upd.shape)
            raise ScatterZeroDivisionError(zero_division_message(op, position, upd.shape))


# ------------------------------------------------------------------ GRAPH mode

def _ok_state():
    return ops.ones((), mstype.bool_), ops.zeros((3,), mstype.int64)


def _index_state(indices, k, depth, bounds):
    """(all index components in range, [2, flat position of the first bad one, its value])."""
    vectors = ops.reshape(indices, (k, depth)).astype(mstype.int64)
    in_range = ops.logical_and(vectors >= 0, vectors < Tensor(bounds, mstype.int64))
    flat_ok = ops.reshape(in_range, (k * depth,))
    first = ops.argmax(ops.logical_not(flat_ok).astype(mstype.int32)).astype(mstype.int64)
    value = ops.gather(ops.reshape(vectors, (k * depth,)), first, 0)
    info = ops.stack([Tensor(INDEX_OUT_OF_RANGE, mstype.int64), first, value])
    return ops.all(flat_ok), info


def _zero_state(updates):
    """(no zero in updates, [3, flat position of the first zero, 0])."""
    zero = ops.reshape(updates, (-1,)) == 0
    first = ops.argmax(zero.astype(mstype.int32)).astype(mstype.int64)
    info = ops.stack([Tensor(DIVISION_BY_ZERO, mstype.int64), first, Tensor(0, mstype.int64)])
    return ops.logical_not(ops.any(zero)), info


class GraphScatter(nn.Cell):
    """One operator on the hybrid path in a graph: rules, validity flag, Assert (not on
    Ascend), gate, ``HybridScatter``, and for the in-place families ``ops.assign``."""

    def __init__(self, op_name, family, target=None):
        super().__init__()
        target = target or device_target()
        self.op_name = op_name
        self.family = family
        self.in_place = family != "TensorScatter"
        self.ascend = target == "Ascend"
        self.use_assert = not self.ascend  # ops.Assert: "Supported Platforms: GPU CPU"
        self.check = ops.Assert(3)
        self.scatter = hybrid_module().HybridScatter(op_name, ascend=True)

    def construct(self, x, indices, updates):
        depth, k, bounds, check_index, check_zero = _graph_plan(
            self.op_name, self.family, self.in_place, x.shape, indices.shape, updates.shape, x.dtype,
            indices.dtype, updates.dtype, self.ascend)
        updates = ops.cast(updates, x.dtype)  # the in-place rule allowed it; else the dtypes are equal
        if check_index:
            index_ok, index_info = _index_state(indices, k, depth, bounds)
        else:
            index_ok, index_info = _ok_state()
        if check_zero:
            zero_ok, zero_info = _zero_state(updates)
        else:
            zero_ok, zero_info = _ok_state()
        valid = ops.logical_and(index_ok, zero_ok)
        if self.use_assert:
            # the index error first, as the aot kernels report it
            info = ops.select(ops.broadcast_to(index_ok, (3,)), zero_info, index_info)
            done = self.check(valid, (info,))
            indices = ops.depend(indices, done)
            updates = ops.depend(updates, done)
        if check_zero:  # divisors of 1 write nothing (and out-of-range vectors are skipped)
            updates = ops.select(ops.broadcast_to(valid, updates.shape), updates, ops.ones_like(updates))
        elif check_index:  # -1 everywhere: every index vector is skipped
            indices = ops.select(ops.broadcast_to(valid, indices.shape), indices, ops.full_like(indices, -1))
        out = self.scatter(x, indices, updates)
        if self.in_place:
            return ops.assign(x, out)
        return out


# ------------------------------------------------------------------ the callable

class HybridOp:
    """One operator (primitive instance or function) on the hybrid path. Python calls
    ``__call__`` (PYNATIVE); MindSpore's graph parser calls the instance attribute
    ``__call__`` = ``graph_call`` (``__ms_class__``, see the module docstring)."""
    __ms_class__ = True

    def __init__(self, op_name, family, convert):
        self.op_name = op_name
        self.family = family
        self.in_place = family != "TensorScatter"
        self._convert = convert  # the primitive's PYNATIVE implicit conversion and argument check
        self.__call__ = self.graph_call

    def __getattr__(self, name):
        # built at first use, in Python: at the first PYNATIVE call, or while MindSpore's parser
        # resolves `self.cell` in graph_call (only for a branch that is taken)
        if name == "cell":
            cell = GraphScatter(self.op_name, self.family)
            self.__dict__["cell"] = cell
            return cell
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def graph_call(self, input_x, indices, updates):
        return self.cell(input_x, indices, updates)

    def __call__(self, input_x, indices, updates):
        # PYNATIVE. Imported here: primitives imports this module.
        from .primitives import _PYNATIVE_LOCK, _result  # pylint: disable=import-outside-toplevel
        with _PYNATIVE_LOCK:
            input_x, indices, updates = self._convert(input_x, indices, updates)
            if not isinstance(indices, Tensor):
                indices = Tensor(indices)
            if not isinstance(updates, Tensor):
                updates = Tensor(updates, input_x.dtype)
            plan = static_plan(self.op_name, self.family, self.in_place, input_x.shape, indices.shape,
                               updates.shape, input_x.dtype, indices.dtype, updates.dtype,
                               device_target() == "Ascend")
            check_on_host(self.op_name, input_x.shape, indices, updates, plan)
            out = self.cell.scatter(input_x, indices, updates)
            if self.in_place:
                ops.assign(input_x, out)
                _pynative_executor.sync()
                return _result(input_x, out)
            _pynative_executor.sync()
            return out
