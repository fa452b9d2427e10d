"""Shared fixtures of the unit tests.

The kernels are called directly through ctypes (ms_scatter.testing.call_kernel), without
MindSpore's graph machinery; the fixtures here add what the tests need around it:
per-case seeded generators, a bit-exact comparison, a caller that keeps 0-d arrays 0-d,
and family-aware index builders for the hand-written policy cases.
"""
import ctypes
import os
import zlib

import numpy as np
import pytest

import ms_scatter
from ms_scatter.testing import call_kernel, entry_name, kernel_library, split_op


# The test files that compile for minutes or start processes, run first: under pytest-xdist
# (the README's test command, `-n 2 --dist loadfile`) each worker starts on one of them, so
# that none is left running alone at the end; the other files follow, those with the most
# tests first (what xdist's loadfile does by itself). (The hook sees every collected item,
# st/'s too.)
SLOW_FIRST = ("tests/test_sanitizers.py", "tests/test_aarch64.py", "tests/test_gpu.py", "st/test_distributed.py",
              "tests/test_cpu_variants.py", "st/test_patch.py")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False  # xdist keeps the order below instead of its own


def pytest_collection_modifyitems(config, items):
    rank = {path: n for n, path in enumerate(SLOW_FIRST)}
    root = str(config.rootpath)
    files = [os.path.relpath(str(item.path), root).replace(os.sep, "/") for item in items]
    count, first = {}, {}
    for n, f in enumerate(files):
        count[f] = count.get(f, 0) + 1
        first.setdefault(f, n)
    order = sorted(range(len(items)), key=lambda n: (rank.get(files[n], len(rank)), -count[files[n]],
                                                     first[files[n]], n))
    items[:] = [items[n] for n in order]


def pytest_report_header(config):
    """Which build of the CPU library these tests run (tests/test_cpu_variants.py reads it)."""
    return f"ms_scatter CPU variant: {ms_scatter.cpu_variant()} ({os.path.basename(ms_scatter._lib.CPU_LIBRARY)})"


def _rng_for(case_id):
    """A generator seeded by a stable hash of the case's id (not Python's salted hash)."""
    return np.random.default_rng(zlib.crc32(str(case_id).encode()))


@pytest.fixture(scope="session")
def rng_for():
    return _rng_for


def _assert_bits_equal(got, expected, what=""):
    """Bit-exact equality: same dtype and shape, NaN exactly where expected has NaN, and
    every other element with identical bits (so 0.0 != -0.0)."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if got.dtype.kind == "f" or got.dtype.name == "bfloat16":
        nan_got, nan_exp = np.isnan(got.astype(np.float32)), np.isnan(expected.astype(np.float32))
        assert np.array_equal(nan_got, nan_exp), f"{what}: NaN positions differ\n got {got}\n expected {expected}"
        uint = np.dtype(f"u{got.dtype.itemsize}")
        same = got.view(uint) == expected.view(uint)
        bad = ~same & ~nan_exp
        assert not bad.any(), (f"{what}: {int(bad.sum())} element(s) differ, first at "
                               f"{tuple(int(i) for i in np.argwhere(bad)[0])}\n got {got}\n expected {expected}")
    else:
        assert np.array_equal(got, expected), f"{what}: values differ\n got {got}\n expected {expected}"


@pytest.fixture(scope="session")
def bits_equal():
    return _assert_bits_equal


def _prepare_call(op, x, indices, updates, output="token"):
    """A launcher of one entry point on these very buffers (no copy: the in-place entries
    write `x`); returns (run, out) where run() launches the kernel and returns its code.
    Arrays keep their rank: a 0-d indices or updates array is passed with ndim 0, as
    MindSpore passes a 0-d tensor."""
    fn = getattr(kernel_library(), entry_name(op, output))
    fn.restype = ctypes.c_int
    out = np.zeros((1,), np.int32) if output == "token" else np.zeros_like(x)
    arrays = [x, indices, updates, out]
    assert all(a.flags.c_contiguous for a in arrays)
    params = (ctypes.c_void_p * 4)(*[a.ctypes.data for a in arrays])
    ndims = (ctypes.c_int * 4)(*[a.ndim for a in arrays])
    shape_bufs = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
    shapes = (ctypes.POINTER(ctypes.c_int64) * 4)(
        *[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in shape_bufs])
    dtypes = (ctypes.c_char_p * 4)(*[a.dtype.name.encode() for a in arrays])

    def run():
        return fn(4, params, ndims, shapes, dtypes, None, None)

    run.keep_alive = (arrays, shape_bufs)
    return run, out


@pytest.fixture(scope="session")
def prepare_call():
    return _prepare_call


def _call_raw(op, x, indices, updates, output="token"):
    """Like ms_scatter.testing.call_kernel (the kernel works on a copy of x; returns
    (code, x after the call, output)), but 0-d arrays stay 0-d."""
    x = np.array(x, copy=True, order="C")
    run, out = _prepare_call(op, x, np.array(indices, copy=True, order="C"),
                             np.array(updates, copy=True, order="C"), output)
    return run(), x, out


@pytest.fixture(scope="session")
def call_raw():
    return _call_raw


def _family_indices(op, first_axis, index_dtype="int32"):
    """Indices of `op`'s family that select first-axis rows `first_axis` (a list): shape
    (k,) for Scatter*, (k, 1) for ScatterNd*/TensorScatter* (depth 1, same meaning)."""
    family, _ = split_op(op)
    idx = np.asarray(first_axis, dtype=index_dtype)
    return idx if family == "Scatter" else idx.reshape(-1, 1)


@pytest.fixture(scope="session")
def family_indices():
    return _family_indices


def _run_ok(op, x, indices, updates, output):
    """Run one entry point that must succeed; return (result, x after the call, output)."""
    rc, x_after, out = call_kernel(op, x, indices, updates, output)
    assert rc == 0, f"{op}/{output} failed with code {rc}: {ms_scatter.last_error()[1]}"
    result = out if output == "tensor" else x_after
    return result, x_after, out


@pytest.fixture(scope="session")
def run_ok():
    return _run_ok
