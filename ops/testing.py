"""Helpers of the tests and the benchmark: the numpy loop oracle (ms_scatter.reference, where
its policies are listed), seeded random cases, a direct (no MindSpore) caller of the kernel
library, and the process's resident memory (rss_mb).
"""
import ctypes

import numpy as np

from . import infer
from ._memory import aligned_empty  # noqa: F401  (the benchmark's buffers)
from .reference import (OracleIndexError, OracleZeroDivisionError, acc_dtype, is_float,  # noqa: F401
                        np_dtype, oracle, reduce_step, split_op)


def random_case(rng, op, x_shape, n_index, dtype, index_dtype, duplicates=True, depth=None):
    """A seeded random (x, indices, updates) for `op`; `n_index` index vectors arranged in
    a 2-d batch shape when possible; values avoid zero for integer Div."""
    record = infer.operator(op)
    reduction = record.reduction
    dtype = np_dtype(dtype)
    if record.depth_one:
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
    if record.depth_one:
        indices = vectors.reshape(batch).astype(index_dtype)
    else:
        indices = vectors.reshape(batch + (depth,)).astype(index_dtype)
    updates = _values(rng, batch + tuple(x_shape[depth:]), dtype, reduction)
    return x, indices, updates


def _values(rng, shape, dtype, reduction):
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    if dtype.kind == "c":  # distinct bits in both halves of every element
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
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
    if op in infer.OWN_ENTRY_OPERATORS:  # UnsortedSegment<S>, ScatterNd: one out-of-place entry
        return op
    in_place = infer.operator(op).in_place
    if sharded:
        return f"{op}_shard_token" if in_place else f"{op}_shard"
    return f"{op}_{output}" if in_place else op


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
