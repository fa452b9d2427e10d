"""The kernel layer under the 21 primitives and 21 functions: one aot entry point of a kernel
library as a MindSpore ``Custom`` op with ms_scatter's own inference (``ScatterKernel``), its
Python (PYNATIVE) call and its graph nodes, the one conversion and validation of a call's
inputs, the in-place result (``Depend``) and the row-shard kernels (``ShardKernel``).
ops/primitives.py builds the public objects on it, ops/_grad.py the kernels of its gradient
rules, ops/distributed.py the row-shard functions; none of those is imported here.

Dynamic shapes (a -1 dimension or an unknown rank at compile time: ``Cell.set_inputs``,
``jit(dynamic=1)``): MindSpore infers such a node's shape again at each launch, without
Python, through the library's ``<entry>InferShape`` (kernels/include/ms_scatter/entries.h).
So each kernel that our functional forms call (the token kernels, the TensorScatter
kernels) is, in a graph, one of two graph nodes chosen at compile time: the static one
(exactly the primitive as before) or, where a shape is unknown, one with the primitive
attribute ``cpp_infer_shape``. Python calls (PYNATIVE) use the object itself, which is
never a graph node: MindSpore treats a primitive that has run in a dynamic-shape graph
differently at later PYNATIVE launches (it infers its shape again on its backend thread).
"""
import ctypes
import math
import weakref

import numpy as np
from mindspore import Parameter, Tensor, ops
from mindspore.common import dtype as mstype
from ._compat import _pynative_executor
from mindspore.ops import Primitive, constexpr
from mindspore.ops import functional as F
from mindspore.ops import signature as sig
from mindspore.ops.operations import Depend as _MsDepend

from . import _ascend, _eager, infer
from ._memo import Memo
from ._memory import OutputPool
from ._graph import GraphMethod, run_in_graphs_as, shape_unknown, trace_context
from ._lib import (CPU_LIBRARY, PYNATIVE_LOCK as _PYNATIVE_LOCK, caller_waits_setter, env_count, error_count,
                   kernel_func, raise_code, raise_kernel_error)

# input_x is written (ordered by MindSpore's auto-monad). No dtype groups: MindSpore's
# implicit conversion would name the op "primitive[Custom]"; the in-place functions
# convert updates themselves (_in_place_updates), with the op's name and error type.
IN_PLACE_SIGNATURE = (
    sig.make_sig('x', sig.sig_rw.RW_WRITE),
    sig.make_sig('indices'),
    sig.make_sig('updates'),
)
_ARG_NAMES = ("input_x", "indices", "updates")
_TOKEN = Tensor([0], mstype.int32)  # what a direct in-place kernel call returns


try:  # the executor's and the tensor's own entry points (each Python wrapper costs a call)
    from mindspore._c_expression import TensorPy as _TensorPy
    _sync = _pynative_executor._executor.sync
    _requires_grad = _pynative_executor._executor.requires_grad
    _data_ptr = _TensorPy._data_ptr
except (ImportError, AttributeError):  # pragma: no cover - other MindSpore versions
    _sync, _requires_grad = _pynative_executor.sync, _pynative_executor.requires_grad

    def _data_ptr(tensor):
        return tensor.data_ptr()

_INT64_P = ctypes.POINTER(ctypes.c_int64)
_ALIGNED_OUTPUT_BYTES = 64 << 10  # below this the few extra numpy calls cost more than they save


def _pool_bytes():
    return env_count("MS_SCATTER_OUTPUT_POOL_BYTES", "a number of bytes (0: no pool)", 1 << 30)


# From 32 MiB (glibc's largest reused block) to MS_SCATTER_OUTPUT_POOL_BYTES (default 1 GiB,
# idle memory kept) an output's memory is our pool's: a fresh block page-faults all of it on
# every call (docs/performance.md, "Large PYNATIVE outputs").
_OUTPUTS = OutputPool(min_bytes=32 << 20, idle_bytes=_pool_bytes())


def _direct_output_ok(x):
    """Whether a direct TensorScatter (none while a gradient is recorded: MindSpore must then
    see the op for its bprop) writes this output: below 32 MiB, or in our pool."""
    nbytes = x.nbytes
    return nbytes < _OUTPUTS.min_bytes or _OUTPUTS.holds(nbytes)


def _empty_like(x, dtype_name):
    """A direct TensorScatter's output: numpy memory shared by a Tensor (cheaper than
    mint.empty_like's tensor or a launched op), starting on a 64-byte boundary (numpy's and
    MindSpore's CPU memory is 16-byte aligned, and a row that straddles one more cache line
    slows the kernel: docs/performance.md, "Notes from the kernels"). From 32 MiB, in our
    pool's memory."""
    return _empty(tuple(x.shape), _eager.numpy_dtype(dtype_name))


def _empty(shape, dtype):
    """A numpy-backed output tensor of `shape` and numpy `dtype`, as _empty_like makes it."""
    if math.prod(shape) * dtype.itemsize < _ALIGNED_OUTPUT_BYTES:
        return Tensor.from_numpy(np.empty(shape, dtype))
    return Tensor.from_numpy(_OUTPUTS.empty(shape, dtype))


def bind_arguments(op, args, kwargs):
    """(input_x, indices, updates) from a call's positional and keyword arguments (the
    built-ins take both), or a TypeError that names the op."""
    if not kwargs and len(args) == 3:
        return args
    if len(args) > 3:
        raise infer.op_error(TypeError, op, f"takes 3 inputs (input_x, indices, updates), but got {len(args)}.")
    values = dict(zip(_ARG_NAMES, args))
    for name, value in kwargs.items():
        if name not in _ARG_NAMES:
            raise infer.op_error(TypeError, op, f"got an unexpected keyword argument '{name}' (the inputs are "
                                                f"input_x, indices, updates).")
        if name in values:
            raise infer.op_error(TypeError, op, f"got multiple values for argument '{name}'.")
        values[name] = value
    missing = [n for n in _ARG_NAMES if n not in values]
    if missing:
        raise infer.op_error(TypeError, op, f"missing input(s): {', '.join(missing)}.")
    return tuple(values[n] for n in _ARG_NAMES)


def check_eager_inputs(op, input_x, indices, updates):
    """A Python call's tensors have data: a Tensor made by an initializer or with ``init=``
    has none until ``init_data()`` (a Parameter made from it has), and a shape-only
    placeholder (``Tensor(shape=[None, 3], ...)``, for ``Cell.set_inputs``) never has; the
    kernels would read memory that does not exist. Called once per PYNATIVE call."""
    for name, value in zip(_ARG_NAMES, (input_x, indices, updates)):
        if not isinstance(value, Tensor):
            continue
        if value.has_init:
            raise infer.op_error(RuntimeError, op, f"'{name}' has no data yet: a Tensor made by an initializer "
                                                   f"(or with init=) is materialised by its init_data() or as a "
                                                   f"Parameter's data, but got an uninitialised Tensor of shape "
                                                   f"{tuple(value.shape)}.")
        if any(d < 0 for d in value.shape):
            raise infer.op_error(ValueError, op, f"'{name}' must be a Tensor with data, but got a shape-only "
                                                 f"placeholder of shape {tuple(value.shape)} (such tensors describe "
                                                 f"the inputs of a graph: Cell.set_inputs).")


@constexpr
def _updates_dtype(op, x_dtype, updates_dtype):
    """The dtype the updates of an in-place call are converted to (input_x's), or a
    ScatterTypeError (a TypeError and a RuntimeError); at compile time in a graph."""
    return getattr(mstype, infer.in_place_updates_dtype(op, x_dtype, updates_dtype))


def in_place_updates(op, input_x, updates):
    """MindSpore's implicit conversion for an in-place op, by the op's own rule: updates
    of a lower dtype take input_x's; one that would need input_x converted is refused."""
    if not isinstance(input_x, Tensor) or not isinstance(updates, Tensor):
        return updates  # not tensors: the kernel's inference raises, naming the argument
    if input_x.dtype == updates.dtype:
        return updates
    target = _updates_dtype(op, input_x.dtype, updates.dtype)
    if target != updates.dtype:
        return ops.cast(updates, target)
    return updates


class ScatterKernel(GraphMethod, ops.Custom):
    """One aot entry point of the kernel library, with ms_scatter's own inference."""

    def _setup(self, op_name, family, entry, token=False, side_effect=False, bprop=None, sharded=False,
               graph=None, no_ascend=None):
        """graph: None for a primitive that is its own graph node (as MindSpore's are);
        "dispatch" for the objects our functional forms call, which in a graph run as one
        of two nodes (_graph_call); "static" / "dynamic" for those nodes themselves.
        no_ascend: for an operator without Ascend kernels, the error its calls raise there."""
        self.op_name = op_name
        self.family = family
        self._token = token
        self._sharded = sharded
        self._infer_memo = Memo(self._INFER_MEMO_SIZE)
        # the aot library of the device target, or on Ascend a placeholder: calls then go
        # through ops/_ascend.py's AscendOp; the row-shard entries (a 4th input,
        # ops/distributed.py) exist in the aot libraries only
        if sharded:
            (self._library, func), func_type = kernel_func(entry), "aot"
        else:
            self._library, func, func_type = _ascend.kernel_choice(op_name, entry)
        super().__init__(func, out_shape=self._infer_shape, out_dtype=self._infer_dtype,
                         func_type=func_type, bprop=bprop)
        self.init_prim_io_names(inputs=['input_x', 'indices', 'updates'] + (['shard'] if sharded else []),
                                outputs=['y'])
        if side_effect:
            self.add_prim_attr('side_effect_mem', True)
        if graph in ("static", "dynamic"):
            # Graph nodes are inferred by the library alone (<entry>InferShape / InferType, at
            # compile time and, for dynamic shapes, at each launch): MindSpore re-infers the
            # nodes of a graph part it compiles at run time (GNN code, graphs with values of
            # any type) on a copy of the primitive that is no PrimitivePy, where a Python
            # __infer__ cannot run ("The prim is not a PrimitivePy"). The Python rules run
            # before the node (_graph_call); Custom's C++ inference reads reg_op_name.
            self.add_prim_attr("cpp_infer_shape", True)
            self.add_prim_attr("cpp_infer_type", True)
            self.add_prim_attr("reg_op_name", op_name)
        if func_type == "aot":
            self._hybrid = None
        else:
            self._hybrid = _ascend.refuse(self, no_ascend) if no_ascend else _ascend.attach(self)
        self._caller_waits = caller_waits_setter(self._library) if self._library else None
        # PYNATIVE calls on the CPU run the kernel directly (ops/_eager.py); not the
        # in-place '_return' entries (graphs only: ops/_grad.py, InPlaceCall)
        self._direct = _eager.DirectCall(self._library, op_name, entry, token) if (
            self._library == CPU_LIBRARY and not sharded and (token or not infer.FAMILY[family].in_place)
            and graph not in ("static", "dynamic")) else None
        self._check_memo = Memo(self._INFER_MEMO_SIZE)
        self._fast = Memo(self._FAST_MEMO_SIZE)  # eager_call's plans, by types, shapes and dtypes
        self._graph = graph
        self._setup_args = (op_name, family, entry, token, side_effect, bprop, sharded)
        self._no_ascend = no_ascend
        if graph == "dispatch" and func_type == "aot":
            # What our own graph code compiles for `self.kernel(...)`: the static or the dynamic
            # node. These kernels are only ever called as attributes (never graph values), through
            # the parser's jit_class rule: an __ms_class__ object's instance attribute __call__.
            # (As a graph of their own, ops/_graph.py's rule, they failed PYNATIVE gradients
            # under jit inside the custom-bprop InPlaceCall: "The pointer
            # [func_graph->get_return()] is null", MaybeDropFuncGraphs, MindSpore 2.10.)
            self.__ms_class__ = True
            self.__call__ = _graph_call(op_name, family, self._graph_node("static"), self._graph_node("dynamic"))

    def _graph_node(self, kind):
        """This kernel as a graph node of kind "static" or "dynamic" (see _graph_call)."""
        graph_node = type(self).__new__(type(self))
        graph_node._setup(*self._setup_args, graph=kind, no_ascend=self._no_ascend)  # pylint: disable=protected-access
        return graph_node

    def _infer_shape(self, x_shape, indices_shape, updates_shape):
        rule, kwargs = infer.family_shape_rule(self.family)
        shape = rule(self.op_name, x_shape, indices_shape, updates_shape, **kwargs)
        return (1,) if self._token else shape

    def _infer_dtype(self, x_dtype, indices_dtype, updates_dtype):
        dtype = infer.scatter_dtype(self.op_name, x_dtype, indices_dtype, updates_dtype)
        return mstype.int32 if self._token else dtype

    _INFER_MEMO_SIZE = 64

    def __infer__(self, input_x, indices, updates):
        # Inference is a pure function of the shapes and dtypes: a PYNATIVE loop pays for it
        # once per signature (successes only; a failing signature raises every time).
        # (Keyed by element types, which hash ten times faster than a TensorType.)
        try:
            key = (tuple(input_x["shape"]), tuple(indices["shape"]), tuple(updates["shape"]),
                   input_x["dtype"].element_type(), indices["dtype"].element_type(),
                   updates["dtype"].element_type())
            hit = self._infer_memo.get(key)
        except (AttributeError, TypeError):  # not a tensor type (raised below), or unhashable
            key, hit = None, None
        if hit is not None:
            return {"shape": hit[0], "dtype": hit[1], "value": None}
        result = self._infer_uncached(input_x, indices, updates)
        if key is not None:
            self._infer_memo.put(key, (tuple(result["shape"]), result["dtype"]))
        return result

    def _infer_uncached(self, input_x, indices, updates):
        for name, arg in (("input_x", input_x), ("indices", indices), ("updates", updates)):
            if not hasattr(arg["dtype"], "element_type"):
                raise infer.op_error(TypeError, self.op_name, f"'{name}' must be a Tensor, but got {arg['dtype']}.")
        # dtype rules first (as MindSpore's scatter ops check them), then shapes.
        dtype = self._infer_dtype(input_x["dtype"], indices["dtype"], updates["dtype"])
        shape = self._infer_shape(input_x["shape"], indices["shape"], updates["shape"])
        return {"shape": shape, "dtype": dtype, "value": None}

    def convert(self, input_x, indices, updates):
        """A PYNATIVE call's inputs after MindSpore's implicit conversion, by the op's own rule,
        or the TypeError that names the op (an input that is no Tensor, a refused dtype).
        MindSpore caches a signature per primitive name, and every Custom op is named "Custom",
        so the conversion is done here; the Ascend path (ops/_ascend.py) calls it too."""
        for name, value in (("input_x", input_x), ("indices", indices), ("updates", updates)):
            if not isinstance(value, Tensor) and (name == "input_x" or not isinstance(value, (int, float))):
                raise infer.op_error(TypeError, self.op_name,
                                     f"'{name}' must be a Tensor, but got {type(value).__name__}.")
        if isinstance(input_x, Tensor) and isinstance(updates, Tensor) and input_x.dtype != updates.dtype:
            if getattr(self, '__mindspore_signature__', None) is IN_PLACE_SIGNATURE:
                updates = in_place_updates(self.op_name, input_x, updates)
            else:
                infer.scatter_dtype(self.op_name, input_x.dtype, indices.dtype, updates.dtype)
        return input_x, indices, updates

    def _check_direct(self, input_x, indices, updates):
        """The kernel's dtype names of a direct call, after the inference checks (memoised
        per shapes and dtypes, successes only, like __infer__)."""
        key = (input_x.shape, indices.shape, updates.shape, input_x.dtype, indices.dtype, updates.dtype)
        names = self._check_memo.get(key)
        if names is None:
            infer.infer(self.op_name, self.family, input_x.shape, indices.shape, updates.shape,
                        input_x.dtype, indices.dtype, updates.dtype)
            names = (infer.dtype_name(input_x.dtype), infer.dtype_name(indices.dtype),
                     infer.dtype_name(updates.dtype))
            self._check_memo.put(key, names)
        return names

    _FAST_MEMO_SIZE = 64

    def eager_call(self, input_x, indices, updates):
        """A PYNATIVE call of this kernel on the CPU in one step, what the in-place functions
        and primitives (their result: the updated input_x) and the TensorScatter ones (a new
        output) return, for a signature (the three inputs' types, shapes and dtypes) whose
        first call has passed every check of the full path (_remember). Each call still
        checks what can change between calls with the same signature: data (has_init), a
        gradient being recorded, a jit trace, the device target, contiguity. Returns None
        where the full path must run (it then raises, converts, copies or launches)."""
        try:  # keyed by types and shapes, the dtypes compared by identity (cheaper than hashing them)
            plan = self._fast.get((type(input_x), type(indices), type(updates), input_x.shape, indices.shape,
                                   updates.shape))
            if (plan is None or plan[0] is not input_x.dtype or plan[1] is not indices.dtype
                    or plan[2] is not updates.dtype):
                return None
        except (AttributeError, TypeError):  # not tensors, or unhashable shapes
            return None
        if (input_x.has_init or indices.has_init or updates.has_init or _requires_grad()
                or trace_context() is not None or not _ascend.host_direct()
                or not (input_x.is_contiguous() and indices.is_contiguous() and updates.is_contiguous())):
            return None
        _, _, _, (params, ndims, shapes, names, _), sizes, shared, out_dtype = plan
        with _PYNATIVE_LOCK:
            _sync()
            params[0] = x_ptr = _data_ptr(input_x) if sizes[0] else 0
            params[1] = _data_ptr(indices) if sizes[1] else 0
            params[2] = _data_ptr(updates) if sizes[2] else 0
            out = None
            if out_dtype is not None:
                out = _empty_like(input_x, out_dtype)
                params[3] = _data_ptr(out) if sizes[0] else 0
            rc = self._direct.raw_fn(4, params, ndims, shapes, names, None, None)
            if rc:
                raise_code(self._library, rc)
        if out is not None:
            return out
        return _shared_result(input_x, x_ptr or None) if shared else input_x

    def _remember(self, input_x, indices, updates, names):
        """After a full-path direct call that converted nothing: eager_call's plan for its signature."""
        if self._token:
            out_dtype = None
        elif _direct_output_ok(input_x):
            out_dtype = names[0]
        else:
            return
        key = (type(input_x), type(indices), type(updates), input_x.shape, indices.shape, updates.shape)
        sig = self._direct.signature((tuple(input_x.shape), tuple(indices.shape), tuple(updates.shape)), names)
        sizes = tuple(math.prod(t.shape) > 0 for t in (input_x, indices, updates))
        self._fast.put(key, (input_x.dtype, indices.dtype, updates.dtype, sig, sizes, isinstance(input_x, Parameter),
                             out_dtype))

    def __call__(self, *args, **kwargs):
        if not self._token and not kwargs and len(args) == 3 and self._direct is not None and self._hybrid is None:
            out = self.eager_call(*args)  # a TensorScatter call on the CPU, its signature seen before
            if out is not None:
                return out
        if not self._sharded:  # a row-shard kernel takes a 4th input (ops/distributed.py)
            args = bind_arguments(self.op_name, args, kwargs)
        if self._hybrid is not None:
            return self._hybrid(*args)
        # Reached in PYNATIVE only (GRAPH mode never calls a primitive's __call__). Wait for
        # the kernel so that a bad index raises here, with the kernel's own message.
        # One call at a time: MindSpore 2.10's PYNATIVE launches from several Python
        # threads at once intermittently hand a kernel the wrong buffers, and the kernel
        # library has one error channel per process.
        with _PYNATIVE_LOCK:
            if not self._token:  # the in-place family checks at its entry points
                check_eager_inputs(self.op_name, *args[:3])
            given = args[2]
            args = self.convert(*args)
            tracing = trace_context()
            if tracing is not None and self._token:
                # jit(capture_mode="trace"): recorded, not run; the recorded graph runs once
                # for this call when the recording ends, so the write happens once
                return tracing.run_op(self, Tensor([0], mstype.int32), *args)
            if (self._direct is not None and tracing is None and isinstance(args[1], Tensor)
                    and isinstance(args[2], Tensor) and _ascend.device_target() == "CPU"):
                if self._token:
                    names = self._check_direct(*args)
                    self._direct(*args, names)
                    if args[2] is given:
                        self._remember(*args, names)
                    return _TOKEN
                if not _pynative_executor.requires_grad() and _direct_output_ok(args[0]):
                    names = self._check_direct(*args)
                    out = _empty_like(args[0], names[0])
                    self._direct(*args, names, out=out)
                    if args[2] is given:
                        self._remember(*args, names)
                    return out
            before = error_count(self._library)
            waits = self._caller_waits
            if waits is not None:
                waits(1)
            try:
                out = super().__call__(*args)
                _pynative_executor.sync()
            except RuntimeError as err:
                raise_kernel_error(self._library, before, err)
            finally:
                if waits is not None:
                    waits(0)
            return out


def _shape(value):
    return F.shape(value) if isinstance(value, Tensor) else ()  # not a Tensor: __infer__ says so


def _dtype(value):
    return value.dtype if isinstance(value, Tensor) else None


def _known_or_unknown(shape):
    """A compile-time shape in infer/'s terms: None (unknown rank) -> (-2,), None dims -> -1."""
    if shape is None:
        return (-2,)
    return tuple(-1 if d is None else d for d in shape)


@constexpr(check=False)
def _check_graph_call(op, family, x_shape, indices_shape, updates_shape, x_dtype, indices_dtype, updates_dtype):
    """The primitive's rules (infer/), at compile time, with their error types: the graph
    nodes are inferred by the library alone, which could only raise a RuntimeError."""
    for name, dtype in (("input_x", x_dtype), ("indices", indices_dtype), ("updates", updates_dtype)):
        if dtype is None:
            raise infer.op_error(TypeError, op, f"'{name}' must be a Tensor, but got a value of another type.")
    infer.infer(op, family, _known_or_unknown(x_shape), _known_or_unknown(indices_shape),
                _known_or_unknown(updates_shape), x_dtype, indices_dtype, updates_dtype)
    return True


def _graph_call(op, family, static, dynamic):
    """A kernel call in a graph: the rules checked, then the static node where every shape is
    known at compile time, the dynamic one otherwise (compile-time constants: no branch runs
    in the graph)."""
    def call(input_x, indices, updates):
        _check_graph_call(op, family, _shape(input_x), _shape(indices), _shape(updates), _dtype(input_x),
                          _dtype(indices), _dtype(updates))
        if shape_unknown(_shape(input_x), _shape(indices), _shape(updates)):
            return dynamic(input_x, indices, updates)
        return static(input_x, indices, updates)
    return call


class Depend(_MsDepend):  # keeps the primitive name "Depend", which graph mode compiles
    """``Depend(input_x, token)``: in a graph, the updated input_x ordered after the kernel.
    In PYNATIVE (where MindSpore calls ``__call__``) a Tensor sharing the Parameter's
    memory, so that the result prints and behaves like the built-ins' output (O(1))."""

    def __init__(self, view=False):
        super().__init__()
        self._view = view

    def __call__(self, value, expr):
        if trace_context() is not None:
            return Primitive.__call__(self, value, expr)  # launched, so that jit's trace records it
        if not isinstance(value, Parameter):
            return value
        # view=True (used while a gradient is recorded): an op autograd sees, which waits
        # for the kernel; otherwise a Tensor sharing the Parameter's memory, made once.
        return value.view(value.shape) if self._view else _shared_result(value)


_SHARED_RESULTS = Memo(1024)  # id(Parameter) -> (weak reference to it, the Tensor sharing its memory)


def _shared_result(param, ptr=None):
    """A Tensor sharing the Parameter's memory, as the built-ins return; kept per Parameter
    and storage (creating one costs ~4 us, a quarter of a tiny PYNATIVE call), so repeated
    calls on one Parameter return the same object, whose values are the Parameter's.
    `ptr`: the Parameter's data pointer where the caller has just read it."""
    if ptr is None:
        try:
            ptr = param.data_ptr()
        except (RuntimeError, TypeError, ValueError):  # a tensor without a data pointer here: no keeping
            return Tensor(param)
    hit = _SHARED_RESULTS.get(id(param))
    if hit is not None:
        ref, out = hit
        if ref() is param and _data_ptr(out) == ptr and out.shape == param.shape and out.dtype is param.dtype:
            return out
    out = Tensor(param)
    key = id(param)
    _SHARED_RESULTS.put(key, (weakref.ref(param, lambda ref: _forget_result(key, ref)), out))
    return out


def _forget_result(key, ref):
    """The Parameter is gone: drop its kept result, which would otherwise hold its memory."""
    hit = _SHARED_RESULTS.get(key)
    if hit is not None and hit[0] is ref:
        del _SHARED_RESULTS[key]


result = Depend()
result_view = Depend(view=True)


def out_of_place_kernel(op_name, bprop):
    """A TensorScatter kernel made as an instance of its primitive is (ops/primitives.py), for
    our own graph code (ops/_grad.py's rules): Python calls run it; a graph compiles it as its
    "dispatch" twin (the static or the dynamic node); on the Ascend path it is attached there.
    `bprop`: its gradient rule."""
    record = infer.operator(op_name)
    kernel = ScatterKernel.__new__(ScatterKernel)
    kernel._setup(op_name, record.family, op_name, bprop=bprop)  # pylint: disable=protected-access
    if kernel._hybrid is None:  # pylint: disable=protected-access
        run_in_graphs_as(kernel, kernel._graph_node("dispatch"))  # pylint: disable=protected-access
    return kernel


class ShardKernel(ScatterKernel):
    """One row-shard entry of the aot library: (input_x = a block of rows, indices of
    global rows, updates, shard = int64 (row_begin, global_rows)); in place with a token
    (Scatter*, ScatterNd*) or out of place (TensorScatter*), with `bprop` as its gradient
    rule (the out-of-place ones: ops/_grad.py's). ops/distributed.py builds on them."""

    def __init__(self, op_name, bprop=None):
        record = infer.operator(op_name)
        family, token = record.family, record.in_place
        entry = f"{op_name}_shard_token" if token else f"{op_name}_shard"
        self._setup(op_name, family, entry, token=token, side_effect=token, bprop=bprop, sharded=True)

    def _check_info(self, shape, dtype):
        if infer.dtype_name(dtype) != "int64":
            raise infer.op_error(TypeError, self.op_name,
                                 f"'shard' must be an int64 tensor (row_begin, global_rows), but got "
                                 f"{infer.dtype_name(dtype)}.")
        if tuple(shape) not in ((2,), (-1,), (-2,)):
            raise infer.op_error(ValueError, self.op_name,
                                 f"'shard' must have shape (2,) (row_begin, global_rows), but got {tuple(shape)}.")

    def _infer_shape(self, x_shape, indices_shape, updates_shape, shard_shape=None):
        indices_shape = tuple(indices_shape)
        if not infer.operator(self.op_name).depth_one and indices_shape and indices_shape[-1] == 0:
            raise infer.op_error(ValueError, self.op_name,
                                 f"a row-sharded 'input_x' needs index vectors of depth >= 1, but got indices "
                                 f"of shape {indices_shape}.")
        return super()._infer_shape(x_shape, indices_shape, updates_shape)

    def _infer_dtype(self, x_dtype, indices_dtype, updates_dtype, shard_dtype=None):
        return super()._infer_dtype(x_dtype, indices_dtype, updates_dtype)

    def __infer__(self, input_x, indices, updates, shard):  # pylint: disable=arguments-differ
        if not hasattr(shard["dtype"], "element_type"):
            raise infer.op_error(TypeError, self.op_name, f"'shard' must be a Tensor, but got {shard['dtype']}.")
        self._check_info(shard["shape"], shard["dtype"])
        return super().__infer__(input_x, indices, updates)

    def convert(self, input_x, indices, updates, shard):  # pylint: disable=arguments-differ
        if not isinstance(shard, Tensor):
            raise infer.op_error(TypeError, self.op_name, f"'shard' must be a Tensor, but got {type(shard).__name__}.")
        if self._token:
            updates = in_place_updates(self.op_name, input_x, updates)
        return super().convert(input_x, indices, updates) + (shard,)


class FusedKernel(ops.Custom):
    """One fused entry of the CPU library (kernels/cpu/message.h: its inputs as listed there),
    its graph node inferred by the library (<entry>InferShape / InferType), as the engine's are.

    A Python call (PYNATIVE) runs the entry directly on the tensors' memory, as the engine's
    out-of-place calls do (MindSpore's launch of an aot Custom costs ~1.5 ms a call), writing
    a numpy-backed output of ``output(shapes)`` (its dtype the first input's, or `dtype`);
    while a gradient is recorded, under a jit trace or off the CPU it launches the Custom. A
    kernel's error is raised as our own error type with its message either way. `also`: a
    second output the entry writes when given one (its shape function; the first input's
    dtype), which the direct call then returns after the first, as a tuple (a launched aot
    Custom has one output)."""

    _MEMO_SIZE = 64

    def __init__(self, entry, bprop, output=None, dtype=None, also=None):
        path, func = kernel_func(entry, "CPU")
        super().__init__(func, out_shape=lambda *shapes: None, out_dtype=lambda *dtypes: None, func_type="aot",
                         bprop=bprop)
        self.add_prim_attr("cpp_infer_shape", True)
        self.add_prim_attr("cpp_infer_type", True)
        self.add_prim_attr("reg_op_name", entry)
        self._library, self._entry, self._output, self._dtype = path, entry, output, dtype
        self._also = also
        self._fn, self._memo = None, Memo(self._MEMO_SIZE)

    def _signature(self, args):
        """(params, ndims, shapes, dtypes, keep-alive, output shape, output numpy dtype) for
        these inputs' shapes and dtypes, kept."""
        key = tuple((a.shape, a.dtype) for a in args)
        hit = self._memo.get(key)
        if hit is None:
            shapes = [tuple(a.shape) for a in args]
            names = [infer.dtype_name(a.dtype) for a in args]
            out_shape = tuple(self._output(shapes))
            out_name = self._dtype or names[0]
            also_shape = None if self._also is None else tuple(self._also(shapes))
            shapes.append(out_shape)
            names.append(out_name)
            if also_shape is not None:
                shapes.append(also_shape)
                names.append(names[0])
            k = len(shapes)
            bufs = [(ctypes.c_int64 * max(len(d), 1))(*d) for d in shapes]
            hit = ((ctypes.c_void_p * k)(), (ctypes.c_int * k)(*[len(d) for d in shapes]),
                   (_INT64_P * k)(*[ctypes.cast(b, _INT64_P) for b in bufs]),
                   (ctypes.c_char_p * k)(*[n.encode() for n in names]), bufs, out_shape,
                   _eager.numpy_dtype(out_name), also_shape, _eager.numpy_dtype(names[0]))
            self._memo.put(key, hit)
        return hit

    def _direct(self, args):
        for a in args:
            if not isinstance(a, Tensor) or a.has_init or not a.is_contiguous():
                return None
        if self._fn is None:
            fn = ctypes.CDLL(self._library)[self._entry]
            fn.restype = ctypes.c_int
            self._fn = fn
        params, ndims, shapes, names, _, out_shape, out_dtype, also_shape, also_dtype = self._signature(args)
        out = _empty(out_shape, out_dtype)
        outs = (out,) if also_shape is None else (out, _empty(also_shape, also_dtype))
        k = len(args)
        with _PYNATIVE_LOCK:
            _sync()
            for i, a in enumerate(args + outs):
                params[i] = _data_ptr(a) if a.size else 0
            rc = self._fn(k + len(outs), params, ndims, shapes, names, None, None)
            if rc:
                raise_code(self._library, rc)
        return out if also_shape is None else outs

    def __call__(self, *args):
        # reached in PYNATIVE only (a graph never calls a primitive's __call__)
        if (self._output is not None and not _requires_grad() and trace_context() is None
                and _ascend.host_direct()):
            out = self._direct(args)
            if out is not None:
                return out
        with _PYNATIVE_LOCK:
            before = error_count(self._library)
            try:
                out = super().__call__(*args)
                _sync()
            except RuntimeError as err:
                raise_kernel_error(self._library, before, err)
        return out


_ROW_COUNTS = Memo(64)


@constexpr
def row_count(n):
    """The (n,) int8 tensor a fused kernel reads its output's number of rows from (only its
    length is read), kept per n: made without launching an op (a Python call that launched
    one would wait for it before the kernel runs)."""
    hit = _ROW_COUNTS.get(n)
    if hit is None:
        hit = _ROW_COUNTS.put(n, Tensor(np.zeros(n, np.int8)))
    return hit


@constexpr
def fused_path():
    """Whether calls made now take the fused CPU kernels (the device target is the CPU, no
    Ascend emulation); elsewhere the callers' composites of the engine's kernels run."""
    return _ascend.host_direct()
