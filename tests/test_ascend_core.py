"""The Ascend backend on the host: its CANN-free core and its Ascend C kernel layer.

The Ascend op is kernels/ascend/op_kernel/ms_scatter_kernel.h (a thin layer of GM <-> UB
moves) around kernels/ascend/scatter_core.h (tiling, checks, the per-core loop). Neither can be
compiled for a chip here (no CANN toolkit), so every test below runs twice
(tests/_ascend_build.py builds both into one library with g++, ~15 s cold, reused while the
sources are unchanged):

* "core": the core with tests/ascend_core_driver.cc's HostMem in place of the AI core's memory;
* "kernel": the kernel layer itself, compiled as AI core code against tests/ascend_stub/
  kernel_operator.h, our host stand-ins of the Ascend C calls it makes (DataCopyPad, Cast,
  TPipe/TBuf, Get/SetValue): a check of our code, not of CANN.

Both enforce the device's rules (window sizes, UB addresses on 32-byte blocks, the UB size,
GM moves inside their tensors, no 32-byte block of an output written by two cores) and run
the cores of a call in a permuted order; the host tiling is the one op_host calls
(tiling_for_call).

Checked against the numpy loop oracle, bit for bit: every reduction x every value dtype the
Ascend op registers x both index dtypes, the three families as the Python layer maps them
(Scatter* indices as (..., 1)), depth 0..3, duplicates, empty tensors; both ways a core runs
(resident blocks / streaming, with the float16 workspace), UB sizes from tiny to real, 1..48
cores, core orders; float16 rounded once, NaN in Max/Min, integer wrap, truncating division;
errors (status, nothing scattered, first bad value in index order, the one wording via
ms_scatter_format_error); and the tiling's invariants.
"""
import ctypes
import importlib.util
import itertools
import os
import zlib

import numpy as np
import pytest

from ms_scatter import _lib, infer
from ms_scatter.testing import call_kernel, kernel_library, oracle, random_case, split_op

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("_ms_scatter_ascend_build", os.path.join(HERE, "_ascend_build.py"))
ascend_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ascend_build)

REDUCTIONS = infer.REDUCTIONS  # the one list (ms_scatter.infer)
ASCEND_DTYPES = ("float16", "float32", "int8", "int16", "int32", "int64", "uint8")  # no float64 on an AI core
REAL_UB = 192 * 1024  # Atlas A2 vector core


@pytest.fixture(scope="module")
def library():
    return ascend_build.Core(ascend_build.build())


class Engine:
    """The core on HostMem ("core"), or the Ascend C kernel layer on the stand-in API ("kernel")."""

    def __init__(self, lib, kernel):
        self.lib, self.kernel = lib, kernel

    def run(self, *args, **kwargs):
        return self.lib.run(*args, kernel=self.kernel, **kwargs)

    def last_error(self):
        return self.lib.last_error()


@pytest.fixture(params=["core", "kernel"])
def core(library, request):
    """Every test runs twice: on the CANN-free core, and through the kernel layer."""
    return Engine(library, request.param == "kernel")


def _rng(*case):
    return np.random.default_rng(zlib.crc32(repr(case).encode()))


def as_ascend_call(op, indices):
    """What the Python layer passes to the Ascend op: Scatter* indices gain a depth axis."""
    family, reduction = split_op(op)
    return reduction, (indices[..., None] if family == "Scatter" else indices)


def run_ok(core, op, x, indices, updates, **kw):
    reduction, idx = as_ascend_call(op, indices)
    rc, y, status, tiling, stats, problem = core.run(reduction, x, idx, updates, **kw)
    assert rc == 0, f"rc {rc}: {problem or core.last_error()}"
    assert status.tolist() == [0, 0, 0, 0], status
    return y, tiling, stats


# ------------------------------------------------------------------ results against the oracle

@pytest.mark.parametrize("dtype", ASCEND_DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_every_reduction_and_dtype_matches_the_oracle(core, bits_equal, reduction, dtype):
    """Each family, both index dtypes, and both ways a core runs (resident / streaming) at
    two UB sizes and several core counts: all bit-identical to the oracle."""
    for family, index_dtype in itertools.product(("Scatter", "ScatterNd", "TensorScatter"), ("int32", "int64")):
        op = family + reduction
        shape, depth = ((6, 5), None) if family == "Scatter" else ((4, 3, 6), 2)
        x, idx, upd = random_case(_rng(op, dtype, index_dtype), op, shape, 14, dtype, index_dtype, depth=depth)
        expected = oracle(op, x, idx, upd)
        for force_mode, ub, cores in ((1, 4096, 8), (2, 4096, 8), (0, 320, 3), (2, 320, 48), (0, REAL_UB, 40)):
            y, tiling, _ = run_ok(core, op, x, idx, upd, force_mode=force_mode, ub_bytes=ub, cores=cores,
                                  order_seed=7)
            bits_equal(y, expected, f"{op} {dtype}/{index_dtype} mode={force_mode} ub={ub} cores={cores}")


@pytest.mark.parametrize("shape, depth, n", [
    ((9,), 1, 20),           # one element per row
    ((5, 1), 1, 7),
    ((3, 4, 5), 3, 10),      # depth == rank: one element per row
    ((3, 4, 5), 1, 10),
    ((2, 3, 64), 2, 30),     # rows of two blocks: column split
    ((300, 16), 1, 700),     # many rows, many vectors
    ((4, 6), 0, 3),          # depth 0: every vector selects all of x
])
@pytest.mark.parametrize("dtype", ("float16", "float32", "int8", "int64"))
def test_shapes_modes_and_core_orders(core, bits_equal, shape, depth, n, dtype):
    op = "ScatterNdAdd"
    x, idx, upd = random_case(_rng(shape, depth, dtype), op, shape, n, dtype, "int32", depth=depth)
    expected = oracle(op, x, idx, upd)
    for force_mode, ub, cores, order in itertools.product((0, 1, 2), (256, 2048, REAL_UB), (1, 5, 48), (0, 1, 9)):
        y, _, _ = run_ok(core, op, x, idx, upd, force_mode=force_mode, ub_bytes=ub, cores=cores, order_seed=order)
        bits_equal(y, expected, f"{shape} d={depth} {dtype} mode={force_mode} ub={ub} cores={cores} order={order}")


@pytest.mark.parametrize("x_shape, idx_shape, upd_shape", [
    ((0, 3), (0, 1), (0, 3)),      # empty x, no vectors
    ((4, 0), (5, 1), (5, 0)),      # empty rows, vectors still checked
    ((4, 3), (0, 1), (0, 3)),      # no vectors: y = x
    ((4, 3), (2, 0, 1), (2, 0, 3)),
])
def test_empty_tensors(core, bits_equal, x_shape, idx_shape, upd_shape):
    x = np.arange(int(np.prod(x_shape)), dtype=np.float32).reshape(x_shape)
    idx = np.zeros(idx_shape, np.int64) + (1 if x_shape[0] > 1 else 0)
    upd = np.ones(upd_shape, np.float32)
    for force_mode in (1, 2):
        y, _, _ = run_ok(core, "ScatterNdMul", x, idx, upd, force_mode=force_mode, cores=8)
        bits_equal(y, oracle("ScatterNdMul", x, idx, upd), f"{x_shape} {idx_shape}")


def test_duplicates_apply_in_index_order(core, bits_equal):
    """Update: the last occurrence wins; Sub/Div are order-sensitive; many cores, each core
    walks the vectors in index order."""
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    idx = np.array([[5], [2], [5], [5], [2], [7]], np.int32)
    upd = np.arange(1, 19, dtype=np.float32).reshape(6, 3)
    for op in ("ScatterNdUpdate", "ScatterNdSub", "ScatterNdDiv"):
        for force_mode, cores in ((1, 8), (2, 8), (2, 1)):
            y, _, _ = run_ok(core, op, x, idx, upd, force_mode=force_mode, cores=cores, order_seed=3)
            bits_equal(y, oracle(op, x, idx, upd), f"{op} mode={force_mode}")
    y, _, _ = run_ok(core, "ScatterNdUpdate", x, idx, upd)
    assert y[5].tolist() == upd[3].tolist() and y[2].tolist() == upd[4].tolist()


@pytest.mark.parametrize("force_mode", [1, 2])
def test_float16_accumulates_in_float32_and_rounds_once(core, bits_equal, force_mode):
    """2049 + 1 + 1 + ... in float16: rounding after every update would stay at 2048 (the
    spacing there is 2); accumulating in float32 and rounding once gives the oracle's sum."""
    x = np.full((4, 8), 2048, np.float16)
    idx = np.zeros((64, 1), np.int32)
    upd = np.ones((64, 8), np.float16)
    y, tiling, _ = run_ok(core, "ScatterNdAdd", x, idx, upd, force_mode=force_mode, ub_bytes=1024)
    expected = oracle("ScatterNdAdd", x, idx, upd)
    bits_equal(y, expected, "float16 sum")
    assert y[0, 0] == np.float16(2112) and y[1, 0] == np.float16(2048)
    per_update = np.float16(2048)
    for _ in range(64):
        per_update = np.float16(per_update + np.float16(1))
    assert per_update == np.float16(2048)  # what rounding after every update would give
    assert tiling["workspace_acc"] == (1 if force_mode == 2 else 0)  # streaming float16: float workspace


@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize("reduction", ["Max", "Min"])
def test_nan_propagates_from_either_side(core, bits_equal, reduction, dtype):
    x = np.array([[np.nan, 1.0], [2.0, 3.0], [4.0, np.nan]], dtype)
    idx = np.array([[0], [1], [1], [2]], np.int64)
    upd = np.array([[5.0, np.nan], [np.nan, 0.0], [7.0, 8.0], [1.0, 9.0]], dtype)
    y, _, _ = run_ok(core, "ScatterNd" + reduction, x, idx, upd)
    bits_equal(y, oracle("ScatterNd" + reduction, x, idx, upd), reduction)
    assert np.isnan(y[0]).all() and np.isnan(y[1, 0]) and np.isnan(y[2, 1])


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_integer_wrap_and_truncating_division(core, bits_equal, dtype):
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, -7 if info.min < 0 else 7, 100], dtype)
    idx = np.array([[0], [1], [2], [3]], np.int32)
    for reduction, upd in (("Add", [1, -1 if info.min < 0 else 1, 0, 0]), ("Mul", [2, 3, 1, 3]),
                           ("Div", [1, -1 if info.min < 0 else 3, 2, -3 if info.min < 0 else 7]),
                           ("Sub", [-1 if info.min < 0 else 0, 1, 0, 0])):
        u = np.array(upd, dtype)
        y, _, _ = run_ok(core, "ScatterNd" + reduction, x, idx, u)
        bits_equal(y, oracle("ScatterNd" + reduction, x, idx, u), f"{reduction} {dtype}")


# ------------------------------------------------------------------ errors: status, nothing scattered

def _format(op, code, flat, value, x, indices, updates):
    """The message of a device status, through the CPU library's ms_scatter_format_error."""
    lib = kernel_library()
    fn = lib.ms_scatter_format_error
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong,
                   ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.c_char_p,
                   ctypes.c_int]
    arrays = [np.asarray(a) for a in (x, indices, updates)]
    ndims = (ctypes.c_int * 3)(*[a.ndim for a in arrays])
    bufs = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
    shapes = (ctypes.POINTER(ctypes.c_int64) * 3)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in bufs])
    out = ctypes.create_string_buffer(1024)
    n = fn(op.encode(), int(split_op(op)[0] == "Scatter"), code, flat, value, ndims, shapes, out, len(out))
    return n, out.value.decode()


def _cpu_message(op, x, indices, updates):
    rc, _, _ = call_kernel(op, x, indices, updates, "tensor" if op.startswith("Tensor") else "token")
    assert rc != 0
    return rc, _lib.last_error()[1]


@pytest.mark.parametrize("op, x_shape, indices, what", [
    ("ScatterAdd", (4, 3), [[1, 2], [9, 0]], "too large"),
    ("ScatterMax", (4, 3), [[1, -1], [9, 0]], "negative first"),
    ("ScatterNdUpdate", (4, 3, 2), [[[0, 1], [3, 3]]], "second component"),
    ("TensorScatterSub", (4, 3, 2), [[[0, 1], [2, 2]], [[-4, 0], [1, 1]]], "negative"),
])
@pytest.mark.parametrize("force_mode", [1, 2])
def test_bad_index_status_nothing_scattered_and_the_cpu_message(core, monkeypatch, op, x_shape, indices, what,
                                                                force_mode):
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")
    family, _ = split_op(op)
    idx = np.array(indices, np.int32)
    depth = 1 if family == "Scatter" else idx.shape[-1]
    lead = idx.shape if family == "Scatter" else idx.shape[:-1]
    x = np.arange(np.prod(x_shape), dtype=np.float32).reshape(x_shape)
    upd = np.ones(lead + x_shape[depth:], np.float32)
    reduction, ascend_idx = as_ascend_call(op, idx)
    for cores in (1, 8):
        rc, y, status, _, _, problem = core.run(reduction, x, ascend_idx, upd, cores=cores, force_mode=force_mode,
                                                y_fill=-5)
        assert rc == 0, problem
        flat = int(np.argmax(((idx < 0) | (idx >= np.array(x_shape[:depth]))).reshape(-1)))
        assert status.tolist() == [_lib.INDEX_OUT_OF_RANGE, flat, int(idx.reshape(-1)[flat]), 0], what
        assert np.array_equal(y, x), "an invalid call must scatter nothing (y == x)"
    n, message = _format(op, int(status[0]), int(status[1]), int(status[2]), x, idx, upd)
    assert n == len(message) > 0
    assert (_lib.INDEX_OUT_OF_RANGE, message) == _cpu_message(op, x, idx, upd)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8"])
def test_integer_division_by_zero(core, monkeypatch, dtype):
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")
    x = np.arange(12, dtype=dtype).reshape(4, 3)
    idx = np.array([[1], [3], [0]], np.int64)
    upd = np.array([[1, 2, 3], [4, 0, 6], [0, 1, 1]], dtype)
    for force_mode, cores in ((1, 1), (2, 8)):
        rc, y, status, tiling, _, _ = core.run("Div", x, idx, upd, cores=cores, force_mode=force_mode, y_fill=9)
        assert rc == 0 and tiling["check_zero"] == 1
        assert status.tolist() == [_lib.DIVISION_BY_ZERO, 4, 0, 0]
        assert np.array_equal(y, x)
    n, message = _format("ScatterNdDiv", 3, 4, 0, x, idx, upd)
    assert n > 0 and (_lib.DIVISION_BY_ZERO, message) == _cpu_message("ScatterNdDiv", x, idx, upd)
    # floats divide by zero (IEEE); the index error is reported before a zero divisor
    _, _, status, tiling, _, _ = core.run("Div", x.astype(np.float32), idx, upd.astype(np.float32))
    assert status[0] == 0 and tiling["check_zero"] == 0
    _, _, status, _, _, _ = core.run("Div", x, np.array([[1], [4], [0]], np.int64), upd)
    assert status.tolist() == [_lib.INDEX_OUT_OF_RANGE, 1, 4, 0]


def test_status_codes_are_plan_h_codes():
    assert (_lib.INDEX_OUT_OF_RANGE, _lib.DIVISION_BY_ZERO) == (2, 3)
    src = open(ascend_build.CORE).read()
    assert "kStatusOk = 0, kStatusIndex = 2, kStatusZero = 3" in src


def test_format_error_refuses_invalid_calls():
    x, idx, upd = np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32), np.zeros((2, 3), np.float32)
    assert _format("ScatterNdAdd", 2, 1, 7, x, idx, upd)[0] > 0
    assert _format("ScatterNdAdd", 2, 2, 7, x, idx, upd)[0] == -1          # position outside indices
    assert _format("ScatterNdAdd", 9, 0, 7, x, idx, upd)[0] == -1          # not a data error
    assert _format("ScatterNdAdd", 2, 0, 7, x, idx, np.zeros((3, 3), np.float32))[0] == -1  # bad shapes


def test_bad_shapes_and_float64_are_refused(core):
    x = np.zeros((4, 3), np.float32)
    rc, *_ = core.run("Add", x, np.zeros((2, 1), np.int32), np.zeros((2, 4), np.float32))
    assert rc == ascend_build.BAD_ARGUMENTS and "the shape of 'updates' must match" in core.last_error()
    rc, *_ = core.run("Add", x.astype(np.float64), np.zeros((2, 1), np.int32), np.zeros((2, 3)))
    assert rc == ascend_build.BAD_ARGUMENTS and core.last_error() == (
        "For 'MsScatterNdAdd', the Ascend kernel has no dtype float64 with indices of int32.")
    rc, *_ = core.run("Add", x, np.zeros((2, 1), np.int32), np.zeros((2, 3), np.float32), ub_bytes=64)
    assert rc == ascend_build.BAD_ARGUMENTS and "no tiling fits a UB of 64 bytes" in core.last_error()


# ------------------------------------------------------------------ the tiling

@pytest.mark.parametrize("shape, dtype, n", [
    ((1000, 64), "float32", 500), ((1000, 64), "float16", 500), ((100000,), "float32", 5000),
    ((10, 3), "int8", 5), ((200000, 8), "float16", 100), ((7, 5, 96), "int64", 30), ((3, 1000), "uint8", 9),
])
@pytest.mark.parametrize("ub, cores", [(REAL_UB, 40), (REAL_UB, 1), (4096, 48)])
def test_tiling_invariants(core, bits_equal, shape, dtype, n, ub, cores):
    """Cores used <= cores available, windows inside the UB, the float workspace only for
    streaming float16, the grid covers the tensor, and several cores take part in a large
    call. (That no two cores write a 32-byte block is checked by the driver on every call.)"""
    x, idx, upd = random_case(_rng(shape, dtype, n), "ScatterNdAdd", shape, n, dtype, "int32", depth=1)
    y, t, (ran, _) = run_ok(core, "ScatterNdAdd", x, idx, upd, ub_bytes=ub, cores=cores)
    bits_equal(y, oracle("ScatterNdAdd", x, idx, upd), "result")
    elem = np.dtype(dtype).itemsize
    acc = 4 if dtype == "float16" else elem
    assert 1 <= t["cores"] == ran <= cores
    stage = elem if acc != elem else 0
    assert t["acc_window"] * (acc + stage) + t["upd_window"] * elem + t["idx_window"] * 4 + 64 <= ub
    assert t["acc_window"] * acc % 32 == 0 and t["idx_window"] % max(t["depth"], 1) == 0
    assert t["col_groups"] * t["cols_per_group"] >= t["slice"] and t["cols_per_group"] * elem % 32 in (
        0, t["slice"] * elem % 32)
    row_groups = t["cores"] // t["col_groups"]
    assert row_groups * t["rows_per_group"] >= t["rows"]
    assert t["workspace_bytes"] == (t["rows"] * t["slice"] * 4 + 31) // 32 * 32 * (
        dtype == "float16" and not t["resident"])
    if t["resident"]:
        assert t["block_rows"] >= 1 and t["block_rows"] * t["pitch"] <= t["acc_window"]
    if x.nbytes >= 64 * 1024 and cores > 1:
        assert t["cores"] > 1, "a large call must be split across cores"


def test_column_split_when_rows_are_whole_blocks(core):
    x = np.zeros((4, 256), np.float32)
    idx, upd = np.zeros((3, 1), np.int32), np.ones((3, 256), np.float32)
    _, t, _ = run_ok(core, "ScatterNdAdd", x, idx, upd, cores=8, ub_bytes=REAL_UB)
    assert t["col_groups"] == 8 and t["cols_per_group"] == 32
    x = np.zeros((64, 3), np.float32)  # rows of 12 bytes: no column split, rows cut on 32-byte blocks
    _, t, _ = run_ok(core, "ScatterNdAdd", x, np.zeros((3, 1), np.int32), np.ones((3, 3), np.float32), cores=8)
    assert t["col_groups"] == 1 and t["rows_per_group"] * 12 % 32 == 0
