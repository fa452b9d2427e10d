"""Where the kernel libraries are, and how a kernel's error code becomes a Python error.

The libraries are built by ``pip install .`` (setup.py) into ``ms_scatter/kernels/``;
nothing is compiled at import or first call. The CPU library is built once per variant
(x86-64-v4, -v3, -v2; kernels/cpu_variants.py): the one this CPU runs best (or the one
MS_SCATTER_CPU_VARIANT names) is chosen here, once, at import.
"""
import ctypes
import os
import threading

from mindspore import context

from . import infer
from .kernels import cpu_variants

# ops/ is installed as the package ms_scatter and kernels/ as ms_scatter.kernels.
KERNEL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernels")
CPU_VARIANT, CPU_LIBRARY = cpu_variants.select(KERNEL_DIR)
if CPU_LIBRARY is None:  # nothing built here: library_path() says so
    CPU_LIBRARY = os.path.join(KERNEL_DIR, cpu_variants.library_file("<none built>"))
GPU_LIBRARY = os.path.join(KERNEL_DIR, "libms_scatter_gpu.so")


def cpu_variant():
    """The build of the CPU kernel library this process loads ('x86-64-v4', 'x86-64-v3',
    'x86-64-v2', 'native', 'armv8-a'): the best one this CPU runs, or MS_SCATTER_CPU_VARIANT."""
    return CPU_VARIANT

# Error codes returned by the kernels (kernels/include/ms_scatter/plan.h).
BAD_ARGUMENTS, INDEX_OUT_OF_RANGE, DIVISION_BY_ZERO = 1, 2, 3
MAX_THREADS = 1024  # what set_num_threads accepts (the C side takes an int)


def env_count(name, what, default, maximum=None):
    """A non-negative integer environment variable (ASCII digits only: "²".isdigit() is true
    and int() refuses it), its default when unset or empty, else a ValueError naming it."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not (value.isascii() and value.isdigit()) or (maximum is not None and int(value) > maximum):
        limit = f" from 0 to {maximum}" if maximum is not None else ""
        raise ValueError(f"ms_scatter: {name} must be {what}{limit}, but got {value!r}.")
    return int(value)


# The kernels read MS_SCATTER_NUM_THREADS with atoi, which takes any text as 0 (automatic):
# checked here, at import, so that a typo is an error instead.
env_count("MS_SCATTER_NUM_THREADS", "a number of threads (0: automatic)", 0, MAX_THREADS)
if os.environ.get("MS_SCATTER_THREAD_RULE", "").strip() not in ("", "fixed"):
    raise ValueError(f"ms_scatter: MS_SCATTER_THREAD_RULE must be 'fixed' or unset, but got "
                     f"{os.environ['MS_SCATTER_THREAD_RULE']!r}.")


class ScatterIndexError(IndexError, RuntimeError):
    """An index value outside input_x. Catchable as IndexError or RuntimeError."""
    __module__ = "ms_scatter"  # shown as ms_scatter.ScatterIndexError in tracebacks


class ScatterZeroDivisionError(ZeroDivisionError, RuntimeError):
    """An integer ScatterDiv-family call with a zero in updates."""
    __module__ = "ms_scatter"  # shown as ms_scatter.ScatterZeroDivisionError in tracebacks


class ScatterKernelError(RuntimeError):
    """Any other kernel failure."""
    __module__ = "ms_scatter"  # shown as ms_scatter.ScatterKernelError in tracebacks


_ERROR_TYPES = {INDEX_OUT_OF_RANGE: ScatterIndexError, DIVISION_BY_ZERO: ScatterZeroDivisionError}

# PYNATIVE calls of every backend run one at a time (primitives.py and _ascend.py take it):
# MindSpore 2.10's PYNATIVE launches from several Python threads at once were seen to hand
# kernels the wrong buffers, and a kernel library has one error channel per process.
PYNATIVE_LOCK = threading.RLock()


def library_path(target=None):
    """The kernel library for a device target ('CPU' or 'GPU')."""
    target = target or context.get_context("device_target")
    path = GPU_LIBRARY if target == "GPU" else CPU_LIBRARY
    if not os.path.exists(path):
        raise RuntimeError(
            f"ms_scatter: no {target} kernel library at {path}. It is built by 'pip install .'; "
            + ("the GPU library is built only where a CUDA compiler was found at install time."
               if target == "GPU" else "reinstall the package."))
    if ":" in path:
        raise RuntimeError(f"ms_scatter: MindSpore's Custom op cannot load a library from a path with ':' ({path}).")
    return path


def kernel_func(entry, target=None):
    """(library path, ``func`` string of ops.Custom) for one exported entry point."""
    path = library_path(target)
    return path, f"{path}:{entry}"


_handles = {}


def _handle(path):
    if path not in _handles:
        lib = ctypes.CDLL(path)
        set_id = getattr(lib, "ms_scatter_set_int32_type_id", None)
        if set_id is not None:  # the token entries' InferType answers MindSpore's TypeId of int32
            from mindspore.common import dtype as mstype  # pylint: disable=import-outside-toplevel
            from mindspore._c_expression import typing  # pylint: disable=import-outside-toplevel
            set_id.argtypes = [ctypes.c_int]
            set_id(int(typing.type_to_type_id(mstype.int32)))
            set_id64 = getattr(lib, "ms_scatter_set_int64_type_id", None)  # (the arg outputs of message.h)
            if set_id64 is not None:
                set_id64.argtypes = [ctypes.c_int]
                set_id64(int(typing.type_to_type_id(mstype.int64)))
        lib.ms_scatter_last_error.restype = ctypes.c_int
        lib.ms_scatter_last_error.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_ulonglong)]
        _handles[path] = lib
    return _handles[path]


def _read_error(path):
    lib = _handle(path)
    buf = ctypes.create_string_buffer(1024)
    count = ctypes.c_ulonglong(0)
    code = lib.ms_scatter_last_error(buf, len(buf), ctypes.byref(count))
    return code, buf.value.decode("utf-8", "replace"), count.value


def last_error(target=None):
    """(code, message, count) of the last error a kernel of this library reported.

    In GRAPH mode MindSpore turns a kernel's error code into a generic RuntimeError; the
    kernel also prints its message to stderr, and this function returns it."""
    return _read_error(library_path(target))


def error_count(path):
    """Errors reported so far by the library at `path` (cheap: one C call)."""
    lib = _handle(path)
    count = ctypes.c_ulonglong(0)
    lib.ms_scatter_last_error(None, 0, ctypes.byref(count))
    return count.value


def raise_kernel_error(path, before_count, original):
    """Re-raise MindSpore's generic kernel failure as our own error with the kernel's message."""
    code, message, count = _read_error(path)
    if count == before_count:
        raise original
    raise _ERROR_TYPES.get(code, ScatterKernelError)(message) from None


def raise_code(path, code):
    """Raise the error a kernel of the library at `path` just returned `code` for, with its
    message (the caller holds the process-wide lock of ms_scatter's PYNATIVE calls)."""
    _, message, _ = _read_error(path)
    raise _ERROR_TYPES.get(code, ScatterKernelError)(message)


def caller_waits_setter(path):
    """The library's ``ms_scatter_set_caller_waits(int)`` (None where it has none, as the GPU
    library): PYNATIVE calls set it while the Python thread spin-waits for the kernel, so
    that the automatic thread count leaves that core alone."""
    fn = getattr(_handle(path), "ms_scatter_set_caller_waits", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int]
        fn.restype = None
    return fn


def set_num_threads(n, target="CPU"):
    """Threads the CPU kernels use on calls large enough to split: 0 = automatic (default:
    learnt per kind of work from the first calls of that kind, see thread_choices()),
    n >= 1 = n threads. Also MS_SCATTER_NUM_THREADS. Results never depend on it: each
    destination row is owned by one thread and takes its updates in index order."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"For 'set_num_threads', 'n' must be an int, but got {type(n).__name__}.")
    if not 0 <= n <= MAX_THREADS:
        raise ValueError(f"For 'set_num_threads', 'n' must be in [0, {MAX_THREADS}] (0: automatic), but got {n}.")
    _handle(library_path(target)).ms_scatter_set_num_threads(n)


_WORK_KINDS = ("direct", "direct-sorted", "float-accumulated", "float-accumulated-sorted", "copy")


def thread_choices():
    """What the automatic thread rule of the CPU kernels has learnt in this process, one
    dict per kind of work: ``kind`` (direct: the update applied in the storage type;
    float-accumulated: float16/bfloat16; -sorted: sorted indices; copy: input_x into an
    output), ``element_bytes``, ``work_log2`` (log2 of the elements updated, bytes for a
    copy), ``span_log2`` (log2 of the bytes of input_x touched), ``cores`` (available),
    ``threads`` (the count chosen; 0 while its first calls still try the counts),
    ``samples`` (timed calls) and ``ns_per_kunit`` (ns per 1024 elements or bytes at the
    chosen count). Empty with MS_SCATTER_THREAD_RULE=fixed or before a call large enough
    to split."""
    lib = _handle(library_path("CPU"))
    fn = lib.ms_scatter_thread_choices
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int]
    rows = fn(None, 0)
    buf = (ctypes.c_int64 * (8 * max(rows, 1)))()
    rows = min(rows, fn(buf, rows))
    out = []
    for r in range(rows):
        v = list(buf[8 * r:8 * r + 8])
        out.append({"kind": _WORK_KINDS[v[0]] if 0 <= v[0] < len(_WORK_KINDS) else str(v[0]),
                    "element_bytes": v[1], "work_log2": v[2], "span_log2": v[3], "cores": v[4],
                    "threads": v[5], "samples": v[6], "ns_per_kunit": v[7]})
    return sorted(out, key=lambda d: (d["kind"], d["element_bytes"], d["work_log2"], d["span_log2"], d["cores"]))


def get_num_threads(target="CPU"):
    """The setting (0 = automatic)."""
    return int(_handle(library_path(target)).ms_scatter_num_threads())


def _shape_args(shapes):
    bufs = [(ctypes.c_int64 * max(len(s), 1))(*[int(d) for d in s]) for s in shapes]
    ndims = (ctypes.c_int * len(shapes))(*[len(s) for s in shapes])
    ptrs = (ctypes.POINTER(ctypes.c_int64) * len(shapes))(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64))
                                                            for b in bufs])
    return ndims, ptrs, bufs


def format_error(op, first_axis, code, flat, value, x_shape, indices_shape, updates_shape):
    """The message of a data error a device reported as a status (code, flat position, value),
    in the kernels' one wording (plan.h, through the CPU library's ms_scatter_format_error)."""
    fn = _handle(CPU_LIBRARY).ms_scatter_format_error
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong,
                   ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.c_char_p,
                   ctypes.c_int]
    ndims, ptrs, keep = _shape_args([x_shape, indices_shape, updates_shape])
    buf = ctypes.create_string_buffer(1024)
    n = fn(op.encode(), int(bool(first_axis)), int(code), int(flat), int(value), ndims, ptrs, buf, len(buf))
    del keep
    if n < 0:
        return f"For '{op}', the kernel reported error {int(code)} at position {int(flat)} (value {int(value)})."
    return buf.value.decode("utf-8", "replace")


def error_type(code):
    return _ERROR_TYPES.get(code, ScatterKernelError)


def host_call(entry, arrays):
    """Run one entry point of the CPU library on numpy arrays (x, indices, updates, out), as
    MindSpore calls it; raises the library's error (with its message) on failure."""
    lib = _handle(CPU_LIBRARY)
    fn = getattr(lib, entry)
    fn.restype = ctypes.c_int
    for a in arrays:
        if not a.flags.c_contiguous:
            raise ValueError("host_call needs C-contiguous arrays")
    params = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    ndims, ptrs, keep = _shape_args([a.shape for a in arrays])
    dtypes = (ctypes.c_char_p * len(arrays))(*[a.dtype.name.encode() for a in arrays])
    before = error_count(CPU_LIBRARY)
    rc = fn(len(arrays), params, ndims, ptrs, dtypes, None, None)
    del keep
    if rc != 0:
        code, message, count = _read_error(CPU_LIBRARY)
        if count == before:
            raise ScatterKernelError(f"ms_scatter: {entry} failed with code {rc}")
        raise error_type(code)(message)


def call_counts(target=None, entries=False):
    """{operator: kernel launches so far} of this library's kernels, the operators that ran
    (e.g. ``{'ScatterAdd': 3, 'TensorScatterMax': 1}``), counted by the kernel itself in every
    mode, GRAPH included. ``entries=True``: every entry point of the library by its own name
    (``ScatterAdd_token``, ``TensorScatterMax``, ...), zeros included. (The Ascend C kernels
    of the Ascend path are not counted.)"""
    lib = _handle(library_path(target))
    fn = lib.ms_scatter_call_counts
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int]
    n = fn(None, None, 0)
    names, counts = (ctypes.c_char_p * n)(), (ctypes.c_ulonglong * n)()
    fn(names, counts, n)
    raw = {names[k].decode(): counts[k] for k in range(n)}
    if entries:
        return raw
    by_op = {}
    for entry, count in raw.items():
        op = _ENTRY_OPERATOR.get(entry, entry)
        if count:
            by_op[op] = by_op.get(op, 0) + count
    return by_op


# Each entry point's operator (kernels/include/ms_scatter/entries.h names them so).
_ENTRY_OPERATOR = {op + suffix: op for op in infer.OPERATORS
                   for suffix in ("", "_token", "_return", "_shard_token", "_shard")}
_ENTRY_OPERATOR.update({op: op for op in infer.OWN_ENTRY_OPERATORS})
_ENTRY_OPERATOR.update({f"Gspmm{r}": "Gspmm" for r in ("Sum", "Mean", "Max", "Min")})  # the fused kernels (message.h)
_ENTRY_OPERATOR.update({f"Gsddmm{o}": "Gsddmm" for o in ("Add", "Sub", "Mul", "Dot")})
_ENTRY_OPERATOR.update({"GspmmTieGrad": "Gspmm", "GspmmTieGradWeight": "Gspmm"})  # (max/min's gradient)
_ENTRY_OPERATOR.update({"ScatterTieGradX": "ScatterTieGrad", "ScatterTieGradUpdates": "ScatterTieGrad",
                        "ScatterGradGather": "ScatterGradGather"})  # (the family's gradients)
_ENTRY_OPERATOR.update({"SegmentArgMax": "SegmentArgmax", "SegmentArgMin": "SegmentArgmin",
                        "SegmentArgValues": "SegmentArg", "SegmentSoftmax": "SegmentSoftmax",
                        "SegmentSoftmaxGrad": "SegmentSoftmax"})
_ENTRY_OPERATOR.update({f"Segment{f}{r}": f"Segment{f}" for f in ("Reduce", "Csr")
                        for r in ("Sum", "Mean", "Max", "Min", "Prod")})
