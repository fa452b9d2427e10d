"""The Ascend path: the 21 primitives and 21 functions on an Ascend device target, through
MindSpore 2.10's route for Ascend kernels: ``ops.Custom("<OpName>", func_type="aot")`` naming
an op of a CANN custom-op package (ours: vendor "ms_scatter", built by ``pip install .`` where
a CANN toolkit is found, see kernels/ascend/build_ascend.py).

The package: seven CANN ops ``MsScatterNd<R>`` (R = Add ... Update), one engine
(kernels/ascend/scatter_core.h): inputs x, indices (..., d), updates; outputs y (x with the
updates, out of place) and status int64[4] = [code, flat position, value, 0] (code 0, 2 = index
out of range, 3 = integer division by zero). The kernel checks every index vector (and every
integer divisor) before it scatters anything; on an error y equals x.

At import (this module is imported by ``import ms_scatter``) the package's vendor directory is
put first in ASCEND_CUSTOM_OPP_PATH: MindSpore reads that variable once, at its first aclnn
lookup, so ms_scatter must be imported before the process runs its first Ascend op (or the
variable exported by the user: ``python -m ms_scatter.kernels.ascend`` prints the line).

Which path runs: a primitive takes this path when it is *constructed* with the device target
Ascend; a function decides at each call in PYNATIVE and at each compile in GRAPH mode / under
``jit`` (``use_ascend_path``, asked by ops/_graph.py's FunctionPath). ``MS_SCATTER_ASCEND_EMULATION=<library>`` takes
the path on any target with that library's ``MsScatterNd<R>`` aot entries as the op (the
tests: tests/ascend_core_driver.cc, the same core built for the host).

How a call runs (x = input_x, u = updates):

* every family is ScatterNd: Scatter* indices get a trailing axis of 1 (a reshape);
* PYNATIVE (``AscendOp.__call__``): MindSpore's implicit conversion, ms_scatter's shape and
  dtype rules, the op; its status is read back (32 bytes) and an error is raised as on the
  other backends (``ScatterIndexError`` / ``ScatterZeroDivisionError``, the CPU kernels'
  message, formatted by the CPU library from the status), nothing written; then, for the
  in-place families, ``ops.assign(x, y)``: the result is the updated Parameter (a Tensor
  sharing its memory);
* GRAPH / jit (``AscendCall.construct``): the same rules at compile time, the op, and for the
  in-place families ``ops.assign(x, y)``; the result is the assigned Parameter. An invalid call
  writes nothing (y = x) and does not fail the step: MindSpore documents ``ops.Assert`` for
  CPU and GPU only, and an aot kernel on Ascend reports through outputs only.

How MindSpore is made to run that graph for a *primitive*: a primitive compiles as one kernel
node, which cannot assign; an Ascend-path primitive compiles as ``AscendOp.graph_call`` in every
graph position instead (ops/_graph.py, the mechanism every ms_scatter object uses).

Costs: in place is O(x) + O(u) here (the op writes y, the assign copies it into x), not O(u);
PYNATIVE also reads the status back (a 32-byte device-to-host copy, which waits for the op).
``MS_SCATTER_KERNELS=host`` (PYNATIVE only, for a target without our package): each call
copies x, indices and updates to the host, runs the CPU kernel there and copies the result back.
"""
import os

import numpy as np
from mindspore import Parameter, Tensor, context, nn, ops
from mindspore.common import dtype as mstype
from ._compat import _pynative_executor
from mindspore.ops import CustomRegOp, DataType, constexpr

from . import infer
from ._graph import GraphMethod, run_in_graphs_as
from ._lib import (INDEX_OUT_OF_RANGE, KERNEL_DIR, PYNATIVE_LOCK, ScatterIndexError, error_type, format_error,
                   host_call, kernel_func)

ENV = "MS_SCATTER_KERNELS"
SETTINGS = ("auto", "host")
EMULATION_ENV = "MS_SCATTER_ASCEND_EMULATION"
CUSTOM_OPP_ENV = "ASCEND_CUSTOM_OPP_PATH"

# What the Ascend op registers: every value dtype but float64 (an AI core has no double
# arithmetic), both index dtypes.
# what op_host registers (dtypes.h: MS_SCATTER_ASCEND_VALUE_DTYPES): the AI core has no double;
# bfloat16 and the wide unsigned types are not registered
ASCEND_VALUE_DTYPES = ("float16", "float32", "int8", "int16", "int32", "int64", "uint8")
ASCEND_MAX_RANK = 8  # of any argument (op_host/ms_scatter_nd.cpp: kMaxRank; the other backends take infer.MAX_RANK)
ASCEND_INDEX_DTYPES = infer.INDEX_DTYPES
OP_PREFIX = "MsScatterNd"
OPP_ROOT = os.path.join(KERNEL_DIR, "ascend", "opp")
VENDOR_DIR = os.path.join(OPP_ROOT, "vendors", "ms_scatter")
STATUS_WORDS = 4
CANN_VERSIONS = ("8.2", "8.3", "8.5", "9.0", "9.1")  # MindSpore 2.10's AscendEnvChecker

MISSING_PACKAGE = (
    "ms_scatter: no Ascend kernels are installed: ms_scatter was installed without a CANN toolkit, so its "
    "CANN custom-op package (kernels/ascend) was not built ({vendor} is missing). On a machine with a CANN "
    "toolkit (MindSpore 2.10 supports CANN {versions}): source the toolkit's set_env.sh (or set MS_SCATTER_CANN "
    "to its root) and reinstall from the ms-scatter sources: MS_SCATTER_ASCEND=1 pip install --no-deps "
    "--force-reinstall <ms-scatter source directory>. To run without it in PYNATIVE mode through host memory "
    "(each call copies input_x, indices and updates to the host, runs the CPU kernel and copies the result "
    "back), set MS_SCATTER_KERNELS=host.")

try:  # what context.get_context("device_target") reads, without its checks (a PYNATIVE call asks it)
    from mindspore._c_expression import MSContext as _MSContext
    from mindspore.context import ms_ctx_param as _ms_ctx_param

    _MS_CONTEXT = _MSContext.get_instance()  # the process's one context (what _Context wraps)
    _DEVICE_TARGET = _ms_ctx_param.device_target

    def device_target():
        return _MS_CONTEXT.get_param(_DEVICE_TARGET)
except ImportError:  # pragma: no cover - other MindSpore versions
    def device_target():
        return context.get_context("device_target")


# ------------------------------------------------------------------ the package and the switches

def package_installed():
    return os.path.isfile(os.path.join(VENDOR_DIR, "op_api", "lib", "libcust_opapi.so"))


def expose_package():
    """Put our vendor directory first in ASCEND_CUSTOM_OPP_PATH (if the package is installed).
    Returns the directory, or None."""
    if not package_installed():
        return None
    paths = [p for p in os.environ.get(CUSTOM_OPP_ENV, "").split(":") if p]
    if VENDOR_DIR not in paths:
        os.environ[CUSTOM_OPP_ENV] = ":".join([VENDOR_DIR] + paths)
    return VENDOR_DIR


expose_package()


def kernels_setting():
    """MS_SCATTER_KERNELS: 'auto' (default: our kernels of the device target) or 'host' (on an
    Ascend target without our package, PYNATIVE calls run on the host's CPU kernel)."""
    value = os.environ.get(ENV, "").strip().lower() or "auto"
    if value not in SETTINGS:
        raise ValueError(f"ms_scatter: {ENV} must be one of {', '.join(SETTINGS)}, but got {value!r}.")
    return value


def emulation_library():
    """MS_SCATTER_ASCEND_EMULATION: a host library with the Ascend op's aot entries (tests)."""
    return os.environ.get(EMULATION_ENV) or None


# os.environ's own dict (bytes keys on POSIX): a lookup in it is 20 times cheaper than os.environ.get
_ENVIRON = os.environ._data if isinstance(getattr(os.environ, "_data", None), dict) else None
_EMULATION_KEY = os.environ.encodekey(EMULATION_ENV) if _ENVIRON is not None else None


def host_direct():
    """Whether a PYNATIVE call now runs the CPU kernel directly (the device target is the CPU
    and no Ascend emulation library is set); once per fast call (ScatterKernel.eager_call)."""
    if _ENVIRON is not None:
        if _ENVIRON.get(_EMULATION_KEY):
            return False
    elif os.environ.get(EMULATION_ENV):
        return False
    return device_target() == "CPU"


def use_ascend_path(target=None):
    """Whether a primitive constructed now (a function called now) takes the Ascend path."""
    return emulation_library() is not None or (target or device_target()) == "Ascend"


def _never_launched(*args):
    raise RuntimeError("ms_scatter: an Ascend-path primitive's own kernel was launched; its calls go through "
                       "ms_scatter._ascend.AscendOp")


def kernel_choice(op_name, entry):
    """(library path or None, ``func`` of ops.Custom, func_type) of a primitive constructed now:
    the aot entry point of the device target's library, or on the Ascend path a placeholder
    (the primitive object is then never launched: its calls go through ``attach``)."""
    if use_ascend_path():
        return None, _never_launched, "pyfunc"
    path, func = kernel_func(entry)
    return path, func, "aot"


def attach(primitive):
    """Put an Ascend-path primitive on the Ascend path in every mode (module docstring):
    returns the ``AscendOp`` its ``__call__`` uses in PYNATIVE."""
    op = AscendOp(primitive.op_name, primitive.convert, primitive.get_bprop())
    run_in_graphs_as(primitive, op.graph_call)
    return op


def refuse(primitive, message):
    """Put an operator that has no Ascend kernels on the Ascend path as an error: a Python
    call raises ValueError(message), a graph fails to compile with it (returns the callable
    its ``__call__`` uses in PYNATIVE)."""
    def python_call(*args):  # pylint: disable=unused-argument
        raise ValueError(message)

    def graph_call(input_x, indices, updates):  # pylint: disable=unused-argument
        _refuse(message)
        return input_x
    run_in_graphs_as(primitive, graph_call)
    return python_call


# ------------------------------------------------------------------ the Ascend op

_DATA_TYPES = {"float16": DataType.F16_Default, "float32": DataType.F32_Default, "int8": DataType.I8_Default,
               "int16": DataType.I16_Default, "int32": DataType.I32_Default, "int64": DataType.I64_Default,
               "uint8": DataType.U8_Default}


def reg_info(name):
    """The registration of one CANN op (names and dtypes as op_host/ms_scatter_nd.cpp defines them)."""
    info = (CustomRegOp(name)
            .input(0, "x", "required").input(1, "indices", "required").input(2, "updates", "required")
            .output(0, "y", "required").output(1, "status", "required"))
    for value in ASCEND_VALUE_DTYPES:
        for index in ASCEND_INDEX_DTYPES:
            info = info.dtype_format(_DATA_TYPES[value], _DATA_TYPES[index], _DATA_TYPES[value],
                                     _DATA_TYPES[value], DataType.I64_Default)
    return info.target("Ascend").get_op_info()


def _out_shape(x_shape, indices_shape, updates_shape):
    return tuple(x_shape), (STATUS_WORDS,)


def _out_dtype(x_dtype, indices_dtype, updates_dtype):
    return x_dtype, mstype.int64


_kernels = {}


def ascend_kernel(reduction):
    """The ops.Custom of CANN op MsScatterNd<reduction> (one per reduction, shared), or of the
    emulation library's entry; RuntimeError with the build instructions if neither exists."""
    key = (reduction, emulation_library())
    if key not in _kernels:
        name = OP_PREFIX + reduction
        library = emulation_library()
        if library:
            kernel = ops.Custom(f"{library}:{name}", out_shape=_out_shape, out_dtype=_out_dtype, func_type="aot")
        else:
            if not package_installed():
                raise RuntimeError(MISSING_PACKAGE.format(vendor=VENDOR_DIR, versions=", ".join(CANN_VERSIONS)))
            kernel = ops.Custom(name, out_shape=_out_shape, out_dtype=_out_dtype, func_type="aot",
                                reg_info=reg_info(name))
        _kernels[key] = kernel
    return _kernels[key]


# ------------------------------------------------------------------ rules

def _prod(dims):
    out = 1
    for d in dims:
        out *= int(d)
    return out


def static_plan(op, x_shape, indices_shape, updates_shape, x_dtype, indices_dtype, updates_dtype):
    """The primitive's shape/dtype rules for one call (TypeError/ValueError as its inference
    raises them, and TypeError for float64, which the Ascend op does not register). Returns
    the number of index vectors (-1 when a shape is unknown)."""
    x_shape, indices_shape, updates_shape = tuple(x_shape), tuple(indices_shape), tuple(updates_shape)
    record = infer.operator(op)
    if record.in_place:
        updates_dtype = infer.in_place_updates_dtype(op, x_dtype, updates_dtype)
    infer.scatter_dtype(op, x_dtype, indices_dtype, updates_dtype)
    rule, kwargs = infer.family_shape_rule(record.family)
    rule(op, x_shape, indices_shape, updates_shape, **kwargs)
    for name, shape in (("input_x", x_shape), ("indices", indices_shape), ("updates", updates_shape)):
        if len(shape) > ASCEND_MAX_RANK and all(d != -2 for d in shape):
            raise infer.op_error(ValueError, op, f"on Ascend the rank of '{name}' must be <= {ASCEND_MAX_RANK}, "
                                                 f"but got {len(shape)}.")
    x_name = infer.dtype_name(x_dtype)
    if x_name not in ASCEND_VALUE_DTYPES:
        raise infer.op_error(TypeError, op, f"on Ascend 'input_x' must be one of {', '.join(ASCEND_VALUE_DTYPES)} "
                                            f"(an AI core has no float64 arithmetic), but got {x_name}.")
    lead = indices_shape if record.depth_one else indices_shape[:-1]
    if any(d < 0 for d in lead) or (not record.depth_one and (not indices_shape or indices_shape[-1] < 0)):
        return -1
    return _prod(lead)


@constexpr
def _graph_plan(op, x_shape, indices_shape, updates_shape, x_dtype, indices_dtype, updates_dtype):
    return static_plan(op, x_shape, indices_shape, updates_shape, x_dtype, indices_dtype, updates_dtype)


def raise_status(op, status, x_shape, indices_shape, updates_shape):
    """PYNATIVE: the error of a nonzero status, in the CPU kernels' wording."""
    code, flat, value = (int(v) for v in status[:3])
    if code == 0:
        return
    message = format_error(op, infer.operator(op).depth_one, code, flat, value, x_shape, indices_shape,
                           updates_shape)
    raise error_type(code)(message)


def check_indices_on_host(op, x_shape, indices):
    """The index check of the kernels, on the host, for calls with an empty input_x (the op is
    not launched on an empty y: MindSpore may skip such a launch, leaving the status unwritten);
    raises like raise_status."""
    idx = indices.asnumpy()
    depth = 1 if infer.operator(op).depth_one else idx.shape[-1]
    vectors = idx.reshape(-1, depth).astype(np.int64) if depth else np.zeros((0, 0), np.int64)
    bad = (vectors < 0) | (vectors >= np.asarray(x_shape[:depth], np.int64))
    if bad.any():
        flat = int(np.argmax(bad.reshape(-1)))
        raise ScatterIndexError(_index_message(op, flat, int(vectors.reshape(-1)[flat]), x_shape, idx.shape))


def _index_message(op, flat, value, x_shape, indices_shape):
    depth_one = infer.operator(op).depth_one
    depth = 1 if depth_one else indices_shape[-1]
    lead = tuple(indices_shape) if depth_one else tuple(indices_shape[:-1])
    updates_shape = lead + tuple(x_shape[depth:])
    return format_error(op, depth_one, INDEX_OUT_OF_RANGE, flat, value, x_shape, indices_shape,
                        updates_shape)


# ------------------------------------------------------------------ GRAPH mode

@constexpr
def _refuse(message):
    raise RuntimeError(message)


class AscendCall(nn.Cell):
    """One operator on the Ascend path in a graph: rules, the op, and for the in-place
    families ``ops.assign``. TensorScatter* get `bprop`, the gradient rule of their primitive
    (ms_scatter._grad's)."""

    def __init__(self, op_name, refusal="", bprop=None):
        super().__init__()
        record = infer.operator(op_name)
        reduction = record.reduction
        self.op_name = op_name
        self.in_place = record.in_place
        self.depth_one = record.depth_one
        # A graph that cannot run (no package) fails to compile with this message. (Raised
        # while MindSpore's parser resolves the cell, it would come out as "no attribute".)
        self.refusal = refusal
        self.kernel = None
        if not refusal:
            try:
                self.kernel = ascend_kernel(reduction)
            except RuntimeError as err:
                self.refusal = str(err)
        self._bprop = bprop if not self.in_place else None

    def construct(self, x, indices, updates):
        if self.refusal:
            _refuse(self.refusal)
            return x
        n = _graph_plan(self.op_name, x.shape, indices.shape, updates.shape, x.dtype, indices.dtype, updates.dtype)
        if n == 0:  # nothing to check or write
            return x
        updates = ops.cast(updates, x.dtype)  # the in-place rule allowed it; else the dtypes are equal
        if self.depth_one:
            indices = ops.expand_dims(indices, -1)
        y, _ = self.kernel(x, indices, updates)
        if self.in_place:
            return ops.assign(x, y)
        return y

    def bprop(self, x, indices, updates, out, dout):
        if self._bprop is None:
            raise RuntimeError(f"ms_scatter: gradients of '{self.op_name}' are not available on the Ascend path "
                               "(only TensorScatter* have them there).")
        return self._bprop(x, indices, updates, out, dout)


# ------------------------------------------------------------------ the callable

class AscendOp(GraphMethod):
    """One operator (primitive instance or function) on the Ascend path. Python calls
    ``__call__`` (PYNATIVE); a graph compiles ``graph_call`` (ops/_graph.py). `convert`: the
    primitive's PYNATIVE implicit conversion and argument check (``ScatterKernel.convert``);
    `bprop`: its gradient rule (``get_bprop()``), used by the out-of-place operators."""

    def __init__(self, op_name, convert, bprop=None):
        record = infer.operator(op_name)
        self.op_name = op_name
        self.reduction = record.reduction
        self.in_place = record.in_place
        self.depth_one = record.depth_one
        self._convert = convert
        self._bprop = bprop
        run_in_graphs_as(self, self.graph_call)

    def __getattr__(self, name):
        # built at first use, in Python: at the first PYNATIVE call, or while MindSpore's parser
        # resolves `self.cell` in graph_call (only for a branch that is taken)
        if name == "cell":
            refusal = ""
            if kernels_setting() == "host" and emulation_library() is None and not package_installed():
                refusal = (f"ms_scatter: MS_SCATTER_KERNELS=host runs '{self.op_name}' through host memory in "
                           "PYNATIVE mode only; a graph needs the Ascend kernels. "
                           + MISSING_PACKAGE.format(vendor=VENDOR_DIR, versions=", ".join(CANN_VERSIONS)))
            cell = AscendCall(self.op_name, refusal, self._bprop)
            self.__dict__["cell"] = cell
            return cell
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def graph_call(self, input_x, indices, updates):
        return self.cell(input_x, indices, updates)

    def __call__(self, input_x, indices, updates):
        # PYNATIVE
        with PYNATIVE_LOCK:
            input_x, indices, updates = self._convert(input_x, indices, updates)
            if not isinstance(indices, Tensor):
                indices = Tensor(indices)
            if not isinstance(updates, Tensor):
                updates = Tensor(updates, input_x.dtype)
            n = static_plan(self.op_name, input_x.shape, indices.shape, updates.shape, input_x.dtype, indices.dtype,
                            updates.dtype)
            if (kernels_setting() == "host" and emulation_library() is None and not package_installed()):
                return self._host_call(input_x, indices, updates)
            if n == 0:
                return self._result(input_x, None)
            if _prod(input_x.shape) == 0:  # nothing to write, but the indices are still checked
                check_indices_on_host(self.op_name, input_x.shape, indices)
                return self._result(input_x, None)
            kernel = ascend_kernel(self.reduction)
            if updates.dtype != input_x.dtype:
                updates = updates.astype(input_x.dtype)
            vectors = ops.expand_dims(indices, -1) if self.depth_one else indices
            y, status = kernel(input_x, vectors, updates)
            raise_status(self.op_name, status.asnumpy(), input_x.shape, indices.shape, updates.shape)
            return self._result(input_x, y)

    def _result(self, input_x, y):
        if not self.in_place:
            return y if y is not None else input_x.copy()
        if y is not None:
            ops.assign(input_x, y)
            _pynative_executor.sync()
        return Tensor(input_x) if isinstance(input_x, Parameter) else input_x

    def _host_call(self, input_x, indices, updates):
        """MS_SCATTER_KERNELS=host: the CPU kernel on host copies, the result copied back."""
        x = np.ascontiguousarray(input_x.asnumpy())
        arrays = [x, np.ascontiguousarray(indices.asnumpy()),
                  np.ascontiguousarray(updates.asnumpy().astype(x.dtype, copy=False))]
        if self.in_place:
            host_call(f"{self.op_name}_token", arrays + [np.zeros((1,), np.int32)])
            ops.assign(input_x, Tensor(x))
            _pynative_executor.sync()
            return Tensor(input_x) if isinstance(input_x, Parameter) else input_x
        out = np.empty_like(x)
        host_call(self.op_name, arrays + [out])
        return Tensor(out)

