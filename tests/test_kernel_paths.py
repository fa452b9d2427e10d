"""Each code path of the CPU engine against the numpy oracle, bit for bit, on buffers that
start off a cache line, with special values in input_x and updates.

The engine picks its loop from the call (kernels/cpu/scatter_cpu.cc): float16/bfloat16 on
sorted offsets take runs accumulated in registers; unsorted ones over a dense span of up to
2^20 slices are counted, then either streamed onto float slots (few distinct slices) or
counting-sorted into runs (many); a larger dense span takes the blocked counting sort and a
sparse one the comparison sort; float32/float64/integers the direct loop; and calls
large enough to split run on several threads. The row loops are SIMD where the build has
it, with a masked or scalar tail for the last elements of a slice, so slice widths around
the vector width are covered, and MindSpore's 16-byte-aligned tensors (offsets 16 and 48
bytes), as well as an odd element offset.
"""
import numpy as np
import pytest

from ms_scatter import infer
from ms_scatter.testing import KernelCall, kernel_library, np_dtype, oracle

REDUCTIONS = infer.REDUCTIONS  # the one list (ms_scatter.infer)
FLOATS = ("float16", "bfloat16", "float32", "float64")


def special_values(rng, shape, dtype, finite_products=False):
    """Random values with NaN, +-0, +-inf, values near the dtype's largest and subnormals
    (finite_products: magnitudes above 8 replaced by 1.5, so that products stay finite)."""
    v = (rng.standard_normal(shape) * 4).astype(np.float32)
    tiny = {"float16": 3e-6, "bfloat16": 5e-39, "float32": 5e-39, "float64": 5e-310}[dtype]
    huge = {"float16": 6e4, "bfloat16": 3e38, "float32": 3e38, "float64": 1e308}[dtype]
    choice = rng.integers(0, 40, size=shape)
    out = v.astype(np.float64)
    out[choice == 0] = np.nan
    out[choice == 1] = 0.0
    out[choice == 2] = -0.0
    out[choice == 3] = np.inf
    out[choice == 4] = -np.inf
    out[choice == 5] = tiny
    out[choice == 6] = -huge
    out[choice == 7] = huge
    if finite_products:
        out = np.where(np.abs(out) > 8, 1.5, out)
    with np.errstate(over="ignore"):
        return out.astype(np.float32).astype(np_dtype(dtype)) if dtype == "bfloat16" else out.astype(dtype)


def placed(a, offset_bytes):
    """A copy of `a` whose data starts `offset_bytes` past a 64-byte boundary."""
    raw = np.empty(a.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset_bytes
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def indices_for(rng, pattern, rows, n):
    if pattern == "sorted":
        return np.sort(rng.integers(0, rows, size=n))
    if pattern == "runs":  # few destinations, long runs, sorted
        return np.sort(rng.choice(rows, size=3, replace=False)[rng.integers(0, 3, size=n)])
    if pattern == "few":
        return rng.choice(rows, size=5, replace=False)[rng.integers(0, 5, size=n)]
    return rng.integers(0, rows, size=n)


def run_case(op, dtype, rows, slice_, n, pattern, offset, bits_equal, seed, threads=None):
    rng = np.random.default_rng(seed)
    x = special_values(rng, (rows, slice_), dtype)
    upd = special_values(rng, (n, slice_), dtype, finite_products=op.endswith(("Div", "Mul")))
    idx = indices_for(rng, pattern, rows, n).astype(np.int32)
    tensor = op.startswith("TensorScatter")
    idx_arg = idx.reshape(-1, 1) if tensor else idx
    with np.errstate(all="ignore"):
        want = oracle(op, x, idx_arg, upd)
    xb, ib, ub = placed(x, offset), placed(idx_arg, offset), placed(upd, offset)
    out = placed(np.zeros_like(x), offset) if tensor else None
    lib = kernel_library()
    before = lib.ms_scatter_num_threads()
    if threads is not None:
        lib.ms_scatter_set_num_threads(threads)
    try:
        call = KernelCall(op, xb, ib, ub, output="token", out=out)
        assert call.run() == 0
    finally:
        lib.ms_scatter_set_num_threads(before)
    got = out if tensor else xb
    what = f"{op} {dtype} {rows}x{slice_} n={n} {pattern} +{offset}B threads={threads}"
    if dtype == "bfloat16":
        got, want = got.view(np.uint16), want.view(np.uint16)
        nan_w = np.isnan(oracle_float(want))
        assert np.array_equal(np.isnan(oracle_float(got)), nan_w), what
        assert np.array_equal(got[~nan_w], want[~nan_w]), what
    else:
        bits_equal(got, want, what)


def oracle_float(bits16):
    return (bits16.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("pattern", ["uniform", "sorted", "runs", "few"])
def test_slots_and_runs(reduction, dtype, pattern, bits_equal):
    """Small spans: the float slots (unsorted) and the register runs (sorted) of the 16-bit
    floats, the direct loop of the others; slice widths around the vector widths and the
    register blocks (64 and 128 lanes), aligned and 16 / 48 bytes off."""
    for k, (slice_, offset) in enumerate([(1, 16), (7, 48), (16, 0), (17, 16), (64, 16), (100, 48), (200, 16)]):
        run_case("Scatter" + reduction, dtype, 300, slice_, 500, pattern, offset, bits_equal,
                 seed=[k, len(pattern), REDUCTIONS.index(reduction), FLOATS.index(dtype)])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("reduction", ["Add", "Max", "Update"])
def test_odd_element_offset(reduction, dtype, bits_equal):
    """A buffer that starts an odd number of elements past a line (2 or 4 bytes)."""
    off = 2 if dtype != "float32" else 4
    for pattern in ("uniform", "sorted"):
        run_case("Scatter" + reduction, dtype, 200, 33, 400, pattern, off, bits_equal, seed=[off, len(pattern)])


@pytest.mark.parametrize("reduction", ["Add", "Min", "Div", "Update"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_runs_blocked_and_sparse(reduction, dtype, bits_equal):
    """Unsorted 16-bit floats beyond the float slots: many distinct slices (counted into
    runs), a dense span of more than 2^20 slices (the blocked counting sort), and a sparse one
    (the comparison sort)."""
    run_case("Scatter" + reduction, dtype, 66000, 64, 17000, "uniform", 16, bits_equal, seed=[1, len(reduction)])
    run_case("Scatter" + reduction, dtype, 1_100_000, 3, 300_000, "uniform", 48, bits_equal, seed=[3, len(reduction)])
    run_case("Scatter" + reduction, dtype, 100000, 5, 60, "uniform", 48, bits_equal, seed=[2, len(reduction)])


@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterMin", "TensorScatterMax", "ScatterUpdate"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("pattern", ["uniform", "sorted"])
def test_threads_on_misaligned_rows(op, dtype, pattern, bits_equal):
    """Calls large enough to split, on 1, 2 and 3 threads, rows 16 bytes off a line."""
    for threads in (1, 2, 3):
        run_case(op, dtype, 4096, 64, 8192, pattern, 16, bits_equal, seed=[threads, len(pattern)], threads=threads)
