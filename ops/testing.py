"""The numpy loop oracle, a direct (no MindSpore) caller of the kernel library, and the
process's resident memory (rss_mb).

They are used by tests/, st/ and the benchmark. The oracle applies the index vectors one
at a time, in index order, with the project's policies:

* float16 and bfloat16 accumulate in float32: each destination slice starts from input_x,
  takes all of its updates in index order in float32, and is rounded once;
* Max/Min propagate a NaN from either side (numpy.maximum/minimum's rule);
* integer Add/Sub/Mul wrap as the dtype does; integer Div truncates toward zero,
  MIN / -1 wraps to MIN, and a zero in updates is an error before anything is written;
* an index outside [0, dim) is an error before anything is written.
"""
import ctypes
import math

import numpy as np

from . import infer


def aligned_empty(shape, dtype, align=64):
    """An uninitialised C-contiguous numpy array whose data starts on an `align`-byte
    boundary (numpy's and MindSpore's CPU memory is 16-byte aligned: rows of 256 bytes then
    straddle 5 cache lines instead of 4, and the same kernel ran 10-15% slower on them)."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


class OracleIndexError(IndexError):
    pass


class OracleZeroDivisionError(ZeroDivisionError):
    pass


def np_dtype(dtype):
    """np.dtype of a name or dtype; 'bfloat16' is MindSpore's numpy bfloat16."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        from mindspore.common.np_dtype import bfloat16  # pylint: disable=import-outside-toplevel
        return np.dtype(bfloat16)
    return np.dtype(dtype)


def is_float(dtype):
    """numpy float dtypes and MindSpore's numpy bfloat16 (kind 'V')."""
    dtype = np_dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def acc_dtype(dtype):
    """The accumulator of a value dtype: float32 for the 16-bit floats."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.name in ("float16", "bfloat16") else dtype


def split_op(op):
    """'ScatterNdAdd' -> ('ScatterNd', 'Add')."""
    for family in sorted(infer.FAMILIES, key=len, reverse=True):
        if op.startswith(family) and op[len(family):] in infer.REDUCTIONS:
            return family, op[len(family):]
    raise ValueError(f"unknown operator {op!r}")


def _trunc_div(a, b):
    with np.errstate(all="ignore"):
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        q = q + fix.astype(q.dtype)
        return np.where(b == -1, np.negative(a), q).astype(a.dtype) if np.issubdtype(a.dtype, np.signedinteger) \
            else q.astype(a.dtype)


def reduce_step(reduction, acc, v):
    """One update of destination values `acc` by values `v` (same dtype)."""
    with np.errstate(all="ignore"):
        if reduction == "Add":
            return acc + v
        if reduction == "Sub":
            return acc - v
        if reduction == "Mul":
            return acc * v
        if reduction == "Div":
            return _trunc_div(acc, v) if np.issubdtype(acc.dtype, np.integer) else acc / v
        if reduction == "Max":
            return np.where((acc >= v) | np.isnan(acc) if acc.dtype.kind == "f" else (acc >= v), acc, v)
        if reduction == "Min":
            return np.where((acc <= v) | np.isnan(acc) if acc.dtype.kind == "f" else (acc <= v), acc, v)
        if reduction == "Update":
            return v.copy()
    raise ValueError(reduction)


def oracle(op, x, indices, updates):
    """Result of `op` (e.g. 'ScatterAdd') applied to numpy arrays; input arrays unchanged."""
    family, reduction = split_op(op)
    x = np.asarray(x)
    indices = np.asarray(indices)
    updates = np.asarray(updates, dtype=x.dtype)
    if family == "Scatter":
        vectors = indices.reshape(-1, 1)
        depth = 1
    else:
        depth = indices.shape[-1]
        vectors = indices.reshape(int(np.prod(indices.shape[:-1])), depth)
    slice_shape = x.shape[depth:]
    upd = updates.reshape((vectors.shape[0],) + slice_shape)
    for k, vec in enumerate(vectors):
        for d, v in enumerate(vec):
            if v < 0 or v >= x.shape[d]:
                raise OracleIndexError(f"index {int(v)} at vector {k} out of range [0, {x.shape[d]})")
    if reduction == "Div" and np.issubdtype(x.dtype, np.integer) and np.any(upd == 0):
        raise OracleZeroDivisionError("integer division by zero")
    acc = acc_dtype(x.dtype)
    work = x.astype(acc, copy=True)
    for k, vec in enumerate(vectors):
        dest = tuple(int(v) for v in vec)
        work[dest] = reduce_step(reduction, work[dest], upd[k].astype(acc))
    return work.astype(x.dtype)


def random_case(rng, op, x_shape, n_index, dtype, index_dtype, duplicates=True, depth=None):
    """A seeded random (x, indices, updates) for `op`; `n_index` index vectors arranged in
    a 2-d batch shape when possible; values avoid zero for integer Div."""
    family, reduction = split_op(op)
    dtype = np_dtype(dtype)
    if family == "Scatter":
        depth = 1
    elif depth is None:
        depth = min(len(x_shape), 2)
    x = _values(rng, x_shape, dtype, reduction)
    dims = x_shape[:depth]
    if duplicates or n_index > int(np.prod(dims)):
        cols = [rng.integers(0, max(d, 1), size=n_index) for d in dims]
    else:
        flat = rng.permutation(int(np.prod(dims)))[:n_index]
        cols = list(np.unravel_index(flat, dims)) if depth else []
    vectors = np.stack(cols, axis=-1) if depth else np.zeros((n_index, 0), np.int64)
    batch = (n_index // 2, 2) if n_index % 2 == 0 and n_index >= 4 else (n_index,)
    if family == "Scatter":
        indices = vectors.reshape(batch).astype(index_dtype)
    else:
        indices = vectors.reshape(batch + (depth,)).astype(index_dtype)
    updates = _values(rng, batch + tuple(x_shape[depth:]), dtype, reduction)
    return x, indices, updates


def _values(rng, shape, dtype, reduction):
    if is_float(dtype):
        v = rng.standard_normal(shape) * 4
        if reduction in ("Mul", "Div"):
            v = np.where(np.abs(v) < 0.25, 1.5, v)
        return v.astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -20), min(info.max, 20)
    v = rng.integers(lo, hi + 1, size=shape)
    if reduction in ("Mul", "Div"):
        v = np.where(v == 0, 3 if reduction == "Div" else 2, v)
        if reduction == "Mul":
            v = np.clip(v, -3 if info.min < 0 else 1, 3)
    return v.astype(dtype)


# ---------------------------------------------------------------- direct kernel calls

_lib_cache = {}


def kernel_library(path=None):
    from ._lib import CPU_LIBRARY
    path = path or CPU_LIBRARY
    if path not in _lib_cache:
        lib = ctypes.CDLL(path)
        _lib_cache[path] = lib
    return _lib_cache[path]


def entry_name(op, output="token", sharded=False):
    """Entry point of `op` in the library: Scatter*/ScatterNd* have '_token' (in place,
    1-element output) and '_return' (in place + copy); TensorScatter* one entry. The row-shard
    entries (sharded=True): '<op>_shard_token', 'TensorScatter<R>_shard'."""
    family, _ = split_op(op)
    if sharded:
        return f"{op}_shard" if family == "TensorScatter" else f"{op}_shard_token"
    return op if family == "TensorScatter" else f"{op}_{output}"


class KernelCall:
    """A prepared call of one entry point on numpy buffers (no copies): `run()` launches
    the kernel on them exactly as MindSpore would and returns its code. `x` is updated in
    place by the in-place entries. Used by call_kernel and the benchmark. With `shard`
    (int64 (row_begin, global_rows)) the row-shard entry is called, x being the shard."""

    def __init__(self, op, x, indices, updates, output="token", library=None, out=None, shard=None):
        self.entry = entry_name(op, output, sharded=shard is not None)
        self.fn = getattr(kernel_library(library), self.entry)
        self.fn.restype = ctypes.c_int
        if out is None:
            out = np.zeros((1,), np.int32) if self.entry.endswith("_token") else np.zeros_like(x)
        inputs = [x, indices, updates] + ([] if shard is None else [shard])
        self.arrays = arrays = inputs + [out]
        for a in arrays:
            if not a.flags.c_contiguous:
                raise ValueError("KernelCall needs C-contiguous arrays")
        k = self.nparam = len(arrays)
        self.params = (ctypes.c_void_p * k)(*[a.ctypes.data for a in arrays])
        self.ndims = (ctypes.c_int * k)(*[a.ndim for a in arrays])
        self._shape_bufs = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
        self.shapes = (ctypes.POINTER(ctypes.c_int64) * k)(
            *[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in self._shape_bufs])
        self.dtypes = (ctypes.c_char_p * k)(*[a.dtype.name.encode() for a in arrays])

    @property
    def out(self):
        return self.arrays[-1]

    def run(self):
        return self.fn(self.nparam, self.params, self.ndims, self.shapes, self.dtypes, None, None)


def call_kernel(op, x, indices, updates, output="token", library=None, shard=None):
    """Run one entry point on numpy arrays exactly as MindSpore would call it (the row-shard
    entry when `shard` = (row_begin, global_rows) is given: x is then the shard).

    Returns (return code, x after the call, output array). The caller's `x` is not
    modified: the kernel works on a copy."""
    x = np.array(x, copy=True, order="C")  # np.ascontiguousarray would turn 0-d arrays into (1,)
    if shard is not None:
        shard = np.asarray(shard, np.int64)
    call = KernelCall(op, x, np.asarray(indices, order="C"), np.asarray(updates, order="C"), output, library,
                      shard=shard)
    rc = call.run()
    return rc, x, call.out


def rss_mb():
    """This process's resident memory (VmRSS), MB; Linux only."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")
