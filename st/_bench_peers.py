"""Peers of the benchmark (python -m st.bench): numpy, PyTorch and JAX doing the
same scatter on the same data, and the memory-bandwidth probe.

Each maker takes a ``Case`` (see bench.py) and returns a zero-argument callable that runs
one complete, synchronous call, or raises ``Skip`` with the reason. The peers are
imported lazily: a missing package skips its column, it never fails the benchmark.

What each peer runs (x: (rows, cols), i: (n,) row indices, u: (n, cols)):

=================  ===================================  ======================================
op                 torch (eager, in place where it can)  jax (jit; x donated for in-place ops)
=================  ===================================  ======================================
scatter_add        ``x.index_add_(0, i, u)``             ``x.at[i].add(u)``
scatter_min        ``x.scatter_reduce_(0, I, u, 'amin',  ``x.at[i].min(u)``
                   include_self=True)``
tensor_scatter_max ``x.scatter_reduce(0, I, u, 'amax',   ``x.at[i].max(u)`` (x kept: no donation)
                   include_self=True)`` (out of place)
=================  ===================================  ======================================

(I = i broadcast to u's shape, a stride-0 view made once outside the timing.)
numpy: ``np.add.at`` / ``np.minimum.at`` in place, ``y = x.copy(); np.maximum.at(y, i, u)``.
"""
import os
import time
import warnings

import numpy as np


def aligned_copy(a):
    """A copy of `a` on a 64-byte boundary, as torch's and XLA's allocators give theirs
    (numpy's 16-byte alignment moved the same kernel by up to 15% between two copies)."""
    from ms_scatter.testing import aligned_empty  # pylint: disable=import-outside-toplevel
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


class Skip(Exception):
    """This implementation does not run for this case; the message says why."""


_NUMPY_AT = {"scatter_add": np.add.at, "scatter_min": np.minimum.at, "tensor_scatter_max": np.maximum.at}


def numpy_maker(case, limit_s):
    """np.<ufunc>.at; skipped when one call is estimated (from a call on a prefix of the
    indices) to take more than `limit_s` seconds."""
    if case.x.dtype.name == "bfloat16":
        raise Skip("numpy: no ufunc.at for bfloat16")
    at = _NUMPY_AT[case.op]
    x = aligned_copy(case.x)
    idx, upd = case.idx, case.upd
    sub = min(case.n, 4096)
    t0 = time.perf_counter()
    at(x, idx[:sub], upd[:sub])
    est = (time.perf_counter() - t0) * case.n / sub
    if est > limit_s:
        raise Skip(f"numpy: estimated {est:.1f} s per call (> {limit_s:g} s), not run")
    if case.op == "tensor_scatter_max":
        def call():
            y = x.copy()
            at(y, idx, upd)
    else:
        def call():
            at(x, idx, upd)
    return call


# ---------------------------------------------------------------- torch

_torch = None


def torch_module():
    """The torch module, or raise Skip (not installed)."""
    global _torch
    if _torch is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import torch
        except Exception as err:  # ImportError, or a broken install
            raise Skip(f"torch not available ({type(err).__name__}: {err})") from None
        _torch = torch
    return _torch


def torch_info():
    try:
        torch = torch_module()
    except Skip as s:
        return str(s)
    return f"torch {torch.__version__} ({torch.get_num_threads()} threads)"


def torch_maker(case):
    torch = torch_module()
    if case.x.dtype.name == "bfloat16":  # numpy has no bfloat16 torch takes: through float32
        x = torch.from_numpy(case.x.astype(np.float32)).to(torch.bfloat16)
        u = torch.from_numpy(case.upd.astype(np.float32)).to(torch.bfloat16)
    else:
        x = torch.from_numpy(aligned_copy(case.x))
        u = torch.from_numpy(case.upd)
    i = torch.from_numpy(case.idx.astype(np.int64))
    expanded = i.view(-1, 1).expand(-1, case.cols)
    if case.op == "scatter_add":
        def call():
            x.index_add_(0, i, u)
    elif case.op == "scatter_min":
        def call():
            x.scatter_reduce_(0, expanded, u, "amin", include_self=True)
    elif case.op == "tensor_scatter_max":
        def call():
            x.scatter_reduce(0, expanded, u, "amax", include_self=True)
    else:
        raise Skip(f"torch: no mapping for {case.op}")
    return call


# ---------------------------------------------------------------- jax

_jax = None


def jax_module():
    """(jax, jax.numpy), or raise Skip (not installed)."""
    global _jax
    if _jax is None:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                import jax
                import jax.numpy as jnp
        except Exception as err:
            raise Skip(f"jax not available ({type(err).__name__}: {err})") from None
        _jax = (jax, jnp)
    return _jax


def jax_info():
    try:
        jax, _ = jax_module()
    except Skip as s:
        return str(s)
    try:
        dev = jax.devices()[0].platform
    except Exception as err:  # pragma: no cover - a broken jaxlib
        dev = f"no device ({err})"
    return f"jax {jax.__version__} ({dev})"


_jax_fns = {}


def _jax_fn(op):
    jax, _ = jax_module()
    if op not in _jax_fns:
        if op == "scatter_add":
            _jax_fns[op] = jax.jit(lambda x, i, u: x.at[i].add(u), donate_argnums=0)
        elif op == "scatter_min":
            _jax_fns[op] = jax.jit(lambda x, i, u: x.at[i].min(u), donate_argnums=0)
        elif op == "tensor_scatter_max":
            _jax_fns[op] = jax.jit(lambda x, i, u: x.at[i].max(u))
        else:
            raise Skip(f"jax: no mapping for {op}")
    return _jax_fns[op]


def jax_maker(case):
    jax, _ = jax_module()
    fn = _jax_fn(case.op)
    i = jax.device_put(case.idx)
    if case.x.dtype.name == "bfloat16":
        import jax.numpy as jnp
        u = jax.device_put(case.upd.astype(np.float32)).astype(jnp.bfloat16)
        state = [jax.device_put(case.x.astype(np.float32)).astype(jnp.bfloat16)]
    else:
        u = jax.device_put(case.upd)
        state = [jax.device_put(case.x)]
    if case.op == "tensor_scatter_max":
        def call():
            fn(state[0], i, u).block_until_ready()
    else:
        def call():
            state[0] = fn(state[0], i, u)  # x donated: updated in its own buffer
            state[0].block_until_ready()
    return call


# ---------------------------------------------------------------- bandwidth probe

def copy_maker(case):
    """numpy copy that touches the case's byte count: reads and writes bytes/2 each."""
    half = max(case.bytes // 2, 64)
    src = np.ones(half, np.uint8)
    dst = np.zeros(half, np.uint8)

    def call():
        np.copyto(dst, src)
    return call


def rmw_maker(case, arrays):
    """The access probe (the CPU library's ms_scatter_probe_rmw, not an operator): the kernel's
    traffic on the kernel's own buffers (arrays = (x, indices, updates, out)) without the
    reduction, on the thread count the kernel's last call ran on."""
    import ctypes  # pylint: disable=import-outside-toplevel

    from ms_scatter.testing import kernel_library  # pylint: disable=import-outside-toplevel
    lib = kernel_library()
    probe = getattr(lib, "ms_scatter_probe_rmw", None)
    if probe is None:
        raise Skip("rmw: this kernel library has no access probe")
    last = lib.ms_scatter_last_threads
    last.restype = ctypes.c_int
    probe.restype = ctypes.c_int
    threads = last()
    x, idx, upd, out = arrays
    tensor = out is not None
    if not tensor:
        out = np.zeros(1, np.int32)
    keep = [x, idx, upd, out]
    params = (ctypes.c_void_p * 4)(*[a.ctypes.data for a in keep])
    ndims = (ctypes.c_int * 4)(*[a.ndim for a in keep])
    shape_bufs = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in keep]
    shapes = (ctypes.POINTER(ctypes.c_int64) * 4)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64))
                                                    for b in shape_bufs])
    dtypes = (ctypes.c_char_p * 4)(*[a.dtype.name.encode() for a in keep])

    def call():
        rc = probe(threads, int(tensor), 4, params, ndims, shapes, dtypes)
        if rc:
            raise RuntimeError(f"ms_scatter_probe_rmw returned {rc}")
    call.keep_alive = (keep, shape_bufs)
    call.threads = threads
    return call
