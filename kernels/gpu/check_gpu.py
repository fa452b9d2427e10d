"""Standalone device check of the CUDA kernel library (numpy + cupy + ctypes; no MindSpore,
no installed ms_scatter).

    python kernels/gpu/check_gpu.py [--lib PATH] [--quick] [--no-bench] [--nvcc PATH]

1. Builds libms_scatter_gpu.so with build_gpu.py for the local GPU's architecture (or
   takes --lib).
2. Calls every entry point (21 operators: _token/_return or the TensorScatter entry) for
   every value dtype x index dtype through ctypes on CuPy device buffers, against the
   project's numpy loop oracle (ops/testing.py, imported by file path with
   infer/__init__.py: the same oracle as the CPU tests, not a copy), bit for bit, each
   call twice (determinism); plus the error paths (out-of-range and negative indices,
   integer division by zero: the code, the CPU library's message, input_x unchanged),
   the policies (index order, float16 rounded once), a non-default stream, two
   threads on two streams updating one input_x, and the row-shard entries (blocks of a
   table against the oracle on the whole, an index past the table on every block).
3. Measures ScatterAdd float32 on a 1e6 x 64 input_x with 1e6 indices: effective
   bandwidth, against a plain device copy and cupyx.scatter_add (atomics, not
   deterministic) as references.

Prints pass/fail counts; exits 1 if anything failed. tests/test_gpu.py uses the same
functions under pytest.
"""
import ctypes
import importlib.util
import os
import sys
import tempfile
import threading
import time
import types
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def _load_by_path(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_build_gpu():
    name = "_ms_scatter_build_gpu"
    return sys.modules.get(name) or _load_by_path(name, os.path.join(HERE, "build_gpu.py"))


def load_testing(root=REPO):
    """ops/testing.py (oracle, random_case, split_op, entry_name) without MindSpore: a
    stand-in package holding infer/__init__.py as its `infer`, so that testing.py's
    `from . import infer` resolves to the real file."""
    pkg_name = "_ms_scatter_oracle"
    if pkg_name + ".testing" in sys.modules:
        return sys.modules[pkg_name + ".testing"]
    pkg = types.ModuleType(pkg_name)
    pkg.__path__ = []
    sys.modules[pkg_name] = pkg
    pkg.infer = _load_by_path(pkg_name + ".infer", os.path.join(root, "infer", "__init__.py"))
    pkg.testing = _load_by_path(pkg_name + ".testing", os.path.join(root, "ops", "testing.py"))
    return pkg.testing


def rng_for(case_id):
    return np.random.default_rng(zlib.crc32(str(case_id).encode()))


def bits_equal(got, expected):
    """None if bit-identical (NaN where expected has NaN), else a short description."""
    got, expected = np.asarray(got), np.asarray(expected)
    if got.dtype != expected.dtype or got.shape != expected.shape:
        return f"dtype/shape {got.dtype}{got.shape} != {expected.dtype}{expected.shape}"
    if got.dtype.kind == "f":
        nan_got, nan_exp = np.isnan(got), np.isnan(expected)
        if not np.array_equal(nan_got, nan_exp):
            return "NaN positions differ"
        uint = np.dtype(f"u{got.dtype.itemsize}")
        bad = (got.view(uint) != expected.view(uint)) & ~nan_exp
    else:
        bad = got != expected
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        return f"{int(bad.sum())} element(s) differ, first at {at}: got {got[at]!r}, expected {expected[at]!r}"
    return None


# ---------------------------------------------------------------------- calling the library

class GpuLibrary:
    """The GPU kernel library, called exactly as MindSpore calls an aot kernel: device
    pointers, host shape arrays, dtype names, and a cudaStream_t."""

    def __init__(self, path, testing):
        import cupy  # noqa: F401  (fail early where there is no CuPy)
        self.path = path
        self.testing = testing
        self.lib = ctypes.CDLL(path)
        self.lib.ms_scatter_last_error.restype = ctypes.c_int
        self.lib.ms_scatter_last_error.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_ulonglong)]

    def fn(self, entry):
        f = getattr(self.lib, entry)
        f.restype = ctypes.c_int
        return f

    def last_error(self):
        buf = ctypes.create_string_buffer(1024)
        count = ctypes.c_ulonglong(0)
        code = self.lib.ms_scatter_last_error(buf, len(buf), ctypes.byref(count))
        return code, buf.value.decode("utf-8", "replace"), count.value

    def prepare(self, entry, arrays, stream=None):
        """A launcher of `entry` on CuPy arrays (x, indices, updates, out; a row-shard entry:
        x, indices, updates, shard, out): returns run() -> code (asynchronous apart from the
        kernel's own validation round trip)."""
        import cupy as cp
        f = self.fn(entry)
        k = len(arrays)
        params = (ctypes.c_void_p * k)(*[a.data.ptr for a in arrays])
        ndims = (ctypes.c_int * k)(*[a.ndim for a in arrays])
        shape_bufs = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
        shapes = (ctypes.POINTER(ctypes.c_int64) * k)(
            *[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in shape_bufs])
        dtypes = (ctypes.c_char_p * k)(*[a.dtype.name.encode() for a in arrays])
        stream = stream if stream is not None else cp.cuda.get_current_stream()
        handle = ctypes.c_void_p(stream.ptr)

        def run():
            return f(k, params, ndims, shapes, dtypes, handle, None)

        run.keep_alive = (arrays, shape_bufs, params, ndims, shapes, dtypes, stream)
        return run

    def call(self, op, x, indices, updates, output="token", stream=None, shard=None):
        """Run one entry point on copies of numpy arrays on the device (the row-shard entry
        with shard = (row_begin, global_rows)); returns (code, x after the call, out) as numpy
        arrays, and checks that indices/updates were not written (raises AssertionError)."""
        import cupy as cp
        entry = self.testing.entry_name(op, output, sharded=shard is not None)
        # np.array, not np.ascontiguousarray: a 0-d array must stay 0-d (ndim 0, as MindSpore passes it)
        x, indices, updates = (np.array(a, order="C") for a in (x, indices, updates))
        xd, idd, ud = cp.asarray(x), cp.asarray(indices), cp.asarray(updates)
        out = cp.zeros((1,), cp.int32) if entry.endswith("_token") else cp.zeros_like(xd)
        stream = stream if stream is not None else cp.cuda.get_current_stream()
        info = [] if shard is None else [cp.asarray(np.asarray(shard, np.int64))]
        rc = self.prepare(entry, [xd, idd, ud] + info + [out], stream)()
        stream.synchronize()
        assert cp.asnumpy(idd).tobytes() == indices.tobytes(), f"{entry}: indices modified"
        assert cp.asnumpy(ud).tobytes() == updates.tobytes(), f"{entry}: updates modified"
        return rc, cp.asnumpy(xd), cp.asnumpy(out)


# ---------------------------------------------------------------------- the checks

VALUE_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")
INDEX_DTYPES = ("int32", "int64")
SHAPES = {  # (x shape, index depth), as tests/test_kernels.py
    "Scatter": [((7,), 1), ((5, 3), 1), ((4, 3, 2), 1)],
    "ScatterNd": [((7,), 1), ((5, 3), 1), ((5, 3), 2), ((4, 3, 2), 1), ((4, 3, 2), 2), ((4, 3, 2), 3)],
}
SHAPES["TensorScatter"] = SHAPES["ScatterNd"]


def all_entries(testing):
    """[(op, output)] for every exported aot entry point (testing.infer's families and
    reductions: _token and _return, or the one TensorScatter entry)."""
    out = []
    for family in testing.infer.FAMILIES:
        for reduction in testing.infer.REDUCTIONS:
            for output in (("tensor",) if family == "TensorScatter" else ("token", "return")):
                out.append((family + reduction, output))
    return out


def check_ok(lib, testing, op, output, x, indices, updates, what, stream=None):
    """One call that must succeed: oracle bit for bit, the entry's output contract, and a
    second call bit-identical. Returns a list of failure strings."""
    with np.errstate(over="ignore"):
        expected = testing.oracle(op, x, indices, updates)
    fails = []
    rc, x_after, out = lib.call(op, x, indices, updates, output, stream)
    if rc != 0:
        return [f"{what}: code {rc}: {lib.last_error()[1]}"]
    result = out if output == "tensor" else x_after
    diff = bits_equal(result, expected)
    if diff:
        fails.append(f"{what}: {diff}")
    if output == "return" and out.tobytes() != x_after.tobytes():
        fails.append(f"{what}: _return output != updated input_x")
    if output == "token" and (out.dtype != np.int32 or out.shape != (1,) or out[0] != 0):
        fails.append(f"{what}: bad token {out!r}")
    if output == "tensor" and x_after.tobytes() != np.array(x, order="C").tobytes():
        fails.append(f"{what}: TensorScatter modified input_x")
    rc2, x_after2, out2 = lib.call(op, x, indices, updates, output, stream)
    if rc2 != 0 or x_after2.tobytes() != x_after.tobytes() or out2.tobytes() != out.tobytes():
        fails.append(f"{what}: second run differs (code {rc2}): not deterministic")
    return fails


def check_entry(lib, testing, op, output, dtype, index_dtype, big=False):
    """Every oracle case of tests/test_kernels.py's test_matches_oracle for one entry,
    dtype and index dtype, plus a larger case (and with big=True a 2**19-element one).
    Returns (number of calls checked, failures)."""
    family = testing.split_op(op)[0]
    fails, checked = [], 0
    for x_shape, depth in SHAPES[family]:
        destinations = int(np.prod(x_shape[:depth]))
        for duplicates in (True, False):
            counts = (1, 5, 30) if duplicates else sorted({1, min(4, destinations), destinations})
            for n_index in counts:
                case = f"{op}-{output}-{x_shape}-{depth}-{dtype}-{index_dtype}-{duplicates}-{n_index}"
                x, indices, updates = testing.random_case(rng_for(case), op, x_shape, n_index, dtype, index_dtype,
                                                          duplicates, depth)
                fails += check_ok(lib, testing, op, output, x, indices, updates, case)
                checked += 1
        if family == "ScatterNd":  # indices of rank 1; 0-d updates when depth == rank
            case = f"{op}-{output}-{x_shape}-{depth}-{dtype}-{index_dtype}-rank1"
            x, indices, updates = testing.random_case(rng_for(case), op, x_shape, 1, dtype, index_dtype, False, depth)
            fails += check_ok(lib, testing, op, output, x, indices.reshape(depth), updates.reshape(x_shape[depth:]),
                              case)
            checked += 1
    for x_shape, depth in [((33, 17), 1), ((6, 5, 4, 3), 2 if family != "Scatter" else 1)]:
        case = f"{op}-{output}-{dtype}-{index_dtype}-{x_shape}-large"
        x, indices, updates = testing.random_case(rng_for(case), op, x_shape, 200, dtype, index_dtype, True, depth)
        fails += check_ok(lib, testing, op, output, x, indices, updates, case)
        checked += 1
    if big:
        x_shape, depth = ((16384, 64), 1) if family == "Scatter" else ((128, 128, 64), 2)
        case = f"{op}-{output}-{dtype}-{index_dtype}-big"
        x, indices, updates = testing.random_case(rng_for(case), op, x_shape, 8192, dtype, index_dtype, True, depth)
        fails += check_ok(lib, testing, op, output, x, indices, updates, case)
        checked += 1
    # empty indices: nothing scattered, outputs still written
    x = testing.random_case(rng_for("empty"), op, (5, 3), 1, dtype, index_dtype, True, 1)[0]
    idx = np.zeros((0,) if family == "Scatter" else (0, 1), index_dtype)
    fails += check_ok(lib, testing, op, output, x, idx, np.zeros((0, 3), dtype), f"{op}-{output}-{dtype}-empty")
    checked += 1
    return checked, fails


def _shape_str(shape):
    return str(tuple(int(s) for s in shape))


def check_errors(lib, testing, op, output, dtype, index_dtype):
    """Out-of-range / negative indices (code 2) and integer division by zero (code 3):
    the CPU library's message, nothing written. Returns (checked, failures)."""
    family, reduction = testing.split_op(op)
    fails, checked = [], 0
    x = testing.random_case(rng_for(f"err-{op}-{dtype}"), op, (4, 3), 1, dtype, index_dtype, True, 1)[0]
    updates = np.ones((3, 3), dtype)
    for bad in (4, -1, 1 << 40):
        if bad == 1 << 40 and index_dtype == "int32":
            bad = 2 ** 31 - 1
        rows = [1, bad, 2]
        idx = np.asarray(rows, index_dtype) if family == "Scatter" else np.asarray(rows, index_dtype).reshape(3, 1)
        rc, x_after, out = lib.call(op, x, idx, updates, output)
        checked += 1
        what = f"{op}-{output}-{dtype}-{index_dtype}-index-{bad}"
        pos = "(1,)" if family == "Scatter" else "(1, 0)"
        expected = (f"For '{op}', each value of 'indices' must be in [0, 4) (dimension 0 of 'input_x' with shape "
                    f"(4, 3)), but got {bad} at position {pos} of 'indices' (shape {_shape_str(idx.shape)}).")
        code, message, _ = lib.last_error()
        if rc != 2 or code != 2:
            fails.append(f"{what}: code {rc} (last error {code}), expected 2")
        elif message != expected:
            fails.append(f"{what}: message {message!r}, expected {expected!r}")
        if x_after.tobytes() != x.tobytes():
            fails.append(f"{what}: input_x modified")
        if out.any():
            fails.append(f"{what}: output written")
    if reduction == "Div" and np.dtype(dtype).kind in "iu":
        idx = np.asarray([0, 3], index_dtype)
        idx = idx if family == "Scatter" else idx.reshape(2, 1)
        upd = np.full((2, 3), 2, dtype)
        upd[1, 2] = 0
        rc, x_after, out = lib.call(op, x, idx, upd, output)
        checked += 1
        what = f"{op}-{output}-{dtype}-{index_dtype}-zero"
        expected = (f"For '{op}', integer division by zero: 'updates' must not contain 0 for dtype of 'input_x', "
                    f"but got 0 at position (1, 2) of 'updates' (shape (2, 3)).")
        code, message, _ = lib.last_error()
        if rc != 3 or code != 3:
            fails.append(f"{what}: code {rc} (last error {code}), expected 3")
        elif message != expected:
            fails.append(f"{what}: message {message!r}, expected {expected!r}")
        if x_after.tobytes() != x.tobytes():
            fails.append(f"{what}: input_x modified")
        # a bad index wins over a zero, as on the CPU (indices are checked first)
        idx_bad = np.asarray([0, 9], index_dtype)
        idx_bad = idx_bad if family == "Scatter" else idx_bad.reshape(2, 1)
        rc, x_after, _ = lib.call(op, x, idx_bad, upd, output)
        checked += 1
        if rc != 2 or x_after.tobytes() != x.tobytes():
            fails.append(f"{what}: bad index and zero: code {rc}, expected 2 and input_x unchanged")
    return checked, fails


def check_policies(lib, testing):
    """Index order, float16 rounded once per slice, a non-default stream, and two
    threads on two streams updating one input_x. Returns (checked, failures)."""
    import cupy as cp
    fails, checked = [], 0
    # ((0 + 1e8) + 1) - 1e8 == 0 in index order; another order gives 1.
    for op, output in (("ScatterAdd", "token"), ("ScatterNdAdd", "return"), ("TensorScatterAdd", "tensor")):
        x = np.zeros((3, 2), np.float32)
        upd = np.array([[1e8, 1e8], [1, 1], [-1e8, -1e8]], np.float32)
        idx = np.array([1, 1, 1], np.int64)
        idx = idx if op.startswith("ScatterAdd") else idx.reshape(3, 1)
        rc, x_after, out = lib.call(op, x, idx, upd, output)
        res = out if output == "tensor" else x_after
        checked += 1
        if rc != 0 or res[1, 0] != 0.0:
            fails.append(f"index order {op}: code {rc}, got {res[1]}")
        # 2048 + 1 + 1 in float16: 2050 when rounded once, 2048 step by step
        x16 = np.full((2, 3), 2048, np.float16)
        rc, x_after, out = lib.call(op, x16, idx[:2], np.ones((2, 3), np.float16), output)
        res = out if output == "tensor" else x_after
        checked += 1
        if rc != 0 or res[1].tolist() != [2050.0] * 3:
            fails.append(f"float16 once {op}: code {rc}, got {res[1]}")
    # a non-default (non-blocking) stream
    stream = cp.cuda.Stream(non_blocking=True)
    x, idx, upd = testing.random_case(rng_for("stream"), "ScatterNdMax", (64, 32, 8), 500, "float32", "int64", True, 2)
    fails += check_ok(lib, testing, "ScatterNdMax", "return", x, idx, upd, "non-default stream", stream)
    checked += 1
    # two threads, two streams, one input_x: no lost update (integer Add is order-free)
    rng = rng_for("concurrent")
    shared = cp.zeros((4096, 64), cp.int64)
    expected = np.zeros((4096, 64), np.int64)
    runs, keep = [], []
    for t in range(4):
        i = rng.integers(0, 4096, size=4096).astype(np.int64)
        u = rng.integers(-9, 10, size=(4096, 64)).astype(np.int64)
        np.add.at(expected, i, u)
        s = cp.cuda.Stream(non_blocking=True)
        arrays = [shared, cp.asarray(i), cp.asarray(u), cp.zeros((1,), cp.int32)]
        keep.append((arrays, s))
        runs.append(lib.prepare("ScatterAdd_token", arrays, s))
    cp.cuda.Device().synchronize()
    codes = []
    threads = [threading.Thread(target=lambda r=r: codes.append(r())) for r in runs]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    cp.cuda.Device().synchronize()
    checked += 1
    if codes != [0] * len(runs) or not np.array_equal(cp.asnumpy(shared), expected):
        fails.append(f"concurrent in-place calls on two streams: codes {codes}, "
                     f"equal={np.array_equal(cp.asnumpy(shared), expected)}")
    return checked, fails


BIG_DTYPES = ("float16", "float32", "int32")


def check_shards(lib, testing):
    """The row-shard entries: the blocks (4, 3, 3 rows) of a 10-row table, each through its
    own entry with the whole batch, put together equal the oracle on the whole table bit
    for bit; an index past the global rows fails every block (code 2, nothing written).
    Returns (number of calls checked, failures)."""
    fails, checked = [], 0
    blocks = ((0, 4), (4, 3), (7, 3))
    for family in testing.infer.FAMILIES:
        for reduction in testing.infer.REDUCTIONS:
            op = family + reduction
            output = "tensor" if family == "TensorScatter" else "token"
            for dtype in ("float32", "float16", "int32", "int64"):
                for index_dtype in INDEX_DTYPES:
                    case = f"{op}-{dtype}-{index_dtype}-shards"
                    depth = 1 if family == "Scatter" else 2
                    x, indices, updates = testing.random_case(rng_for(case), op, (10, 3), 12, dtype, index_dtype,
                                                              True, depth)
                    with np.errstate(over="ignore"):
                        expected = testing.oracle(op, x, indices, updates)
                    bad = indices.copy()
                    bad.reshape(-1)[-depth] = 10
                    got = []
                    for begin, count in blocks:
                        block = x[begin:begin + count]
                        rc, after, out = lib.call(op, block, indices, updates, output, shard=(begin, 10))
                        if rc != 0:
                            fails.append(f"{case} block {begin}: code {rc}: {lib.last_error()[1]}")
                        got.append(out if output == "tensor" else after)
                        rc, after, _ = lib.call(op, block, bad, updates, output, shard=(begin, 10))
                        if rc != 2 or after.tobytes() != np.array(block, order="C").tobytes():
                            fails.append(f"{case} block {begin}: index past the table: code {rc} or written")
                        checked += 2
                    diff = bits_equal(np.concatenate(got), expected)
                    if diff:
                        fails.append(f"{case}: blocks differ from the oracle: {diff}")
    return checked, fails


def run_all(lib, testing, quick=False, log=print):
    """Every entry x dtype x index dtype. Returns (passed, failed, failures)."""
    passed = failed = 0
    failures = []
    entries = all_entries(testing)
    for op, output in entries:
        t0 = time.perf_counter()
        n_ok = n_bad = 0
        for dtype in VALUE_DTYPES:
            for index_dtype in INDEX_DTYPES:
                if quick:
                    big = False
                else:
                    big = dtype in BIG_DTYPES and index_dtype == "int64"
                checked, fails = check_entry(lib, testing, op, output, dtype, index_dtype, big)
                c2, f2 = check_errors(lib, testing, op, output, dtype, index_dtype)
                checked += c2
                fails += f2
                n_bad += len(fails)
                n_ok += checked - min(len(fails), checked)
                failures += fails
        passed += n_ok
        failed += n_bad
        log(f"{op:22s} {output:7s} {n_ok:5d} ok {n_bad:3d} failed  ({time.perf_counter() - t0:.1f} s)")
    checked, fails = check_policies(lib, testing)
    passed += checked - min(len(fails), checked)
    failed += len(fails)
    failures += fails
    log(f"{'policies':30s} {checked - min(len(fails), checked):5d} ok {len(fails):3d} failed")
    checked, fails = check_shards(lib, testing)
    passed += checked - min(len(fails), checked)
    failed += len(fails)
    failures += fails
    log(f"{'row shards':30s} {checked - min(len(fails), checked):5d} ok {len(fails):3d} failed")
    return passed, failed, failures


# ---------------------------------------------------------------------- bandwidth

def _time(fn, stream, iters):
    stream.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    stream.synchronize()
    return (time.perf_counter() - t0) / iters


def bench(lib, rows=1_000_000, cols=64, n=1_000_000, iters=20, log=print):
    """ScatterAdd float32, x (rows, cols), n random int64 indices (with duplicates, and a
    permutation without), token entry (in place, what scatter_add runs)."""
    import cupy as cp
    import cupyx
    stream = cp.cuda.get_current_stream()
    rs = cp.random.RandomState(0)
    x = cp.zeros((rows, cols), cp.float32)
    upd = rs.standard_normal((n, cols), dtype=cp.float32)
    token = cp.zeros((1,), cp.int32)
    results = {}
    for label, idx in (("random (duplicates)", rs.randint(0, rows, size=n, dtype=cp.int64)),
                       ("permutation (no duplicates)", rs.permutation(rows)[:n].astype(cp.int64))):
        run = lib.prepare("ScatterAdd_token", [x, idx, upd, token], stream)

        def call():
            rc = run()
            if rc != 0:
                raise RuntimeError(f"ScatterAdd_token failed: {lib.last_error()[1]}")

        for _ in range(3):
            call()
        t = _time(call, stream, iters)
        unique = int(cp.unique(idx).size)
        moved = idx.nbytes + upd.nbytes + 2 * unique * cols * 4  # indices + updates read, rows read + written
        results[label] = (t, moved / t / 1e9)
        log(f"ScatterAdd f32 {rows}x{cols}, {n} indices, {label}: {t * 1e3:.3f} ms, {unique} rows touched, "
            f"effective {moved / t / 1e9:.0f} GB/s")
        # reference: cupyx.scatter_add (atomicAdd; order of float additions varies run to run)
        t_at = _time(lambda: cupyx.scatter_add(x, idx, upd), stream, iters)
        log(f"  reference cupyx.scatter_add (atomics, not deterministic): {t_at * 1e3:.3f} ms, "
            f"{moved / t_at / 1e9:.0f} GB/s")
        results[label + " atomics"] = (t_at, moved / t_at / 1e9)
    y = cp.empty_like(upd)
    t_copy = _time(lambda: cp.copyto(y, upd), stream, iters)
    log(f"reference device copy of {upd.nbytes / 1e6:.0f} MB: {t_copy * 1e3:.3f} ms, "
        f"{2 * upd.nbytes / t_copy / 1e9:.0f} GB/s (read + write)")
    results["copy"] = (t_copy, 2 * upd.nbytes / t_copy / 1e9)
    # fixed cost of one call (launches + the validation round trip)
    xs, ids, us = cp.zeros((1024, cols), cp.float32), cp.zeros((1,), cp.int64), cp.ones((1, cols), cp.float32)
    run = lib.prepare("ScatterAdd_token", [xs, ids, us, token], stream)
    run()
    t_small = _time(run, stream, 200)
    log(f"one-index call (fixed cost per call): {t_small * 1e6:.1f} us")
    results["latency"] = (t_small, 0.0)
    return results


# ---------------------------------------------------------------------- main

def local_arch():
    import cupy as cp
    return str(cp.cuda.Device().compute_capability)


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", help="an already built library (default: build one for the local GPU)")
    ap.add_argument("--nvcc", help="nvcc (default: found on PATH / CUDA_HOME)")
    ap.add_argument("--quick", action="store_true", help="no 2**19-element cases")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--bench-only", action="store_true")
    ap.add_argument("--bench-rows", type=int, default=1_000_000, help="rows of input_x (64 columns)")
    ap.add_argument("--bench-n", type=int, default=1_000_000, help="number of indices")
    ap.add_argument("--bench-iters", type=int, default=20)
    args = ap.parse_args(argv)

    import cupy as cp
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    print(f"device: {props['name'].decode()} (sm_{local_arch()}), CuPy {cp.__version__}, "
          f"driver {cp.cuda.runtime.driverGetVersion()}, runtime {cp.cuda.runtime.runtimeGetVersion()}", flush=True)
    path = args.lib
    if not path:
        build_gpu = load_build_gpu()
        nvcc = args.nvcc or build_gpu.find_nvcc()
        if not nvcc:
            print("nvcc not found", file=sys.stderr)
            return 2
        path = os.path.join(tempfile.mkdtemp(prefix="ms_scatter_gpu_"), "libms_scatter_gpu.so")
        t0 = time.perf_counter()
        build_gpu.build(path, nvcc, archs=(local_arch(),), ptx=False)
        print(f"built {path} for sm_{local_arch()} with {nvcc} in {time.perf_counter() - t0:.1f} s", flush=True)
    testing = load_testing()
    lib = GpuLibrary(path, testing)
    os.environ.setdefault("MS_SCATTER_QUIET", "1")  # the error cases print nothing (read once per error)
    failed = 0
    if not args.bench_only:
        t0 = time.perf_counter()
        passed, failed, failures = run_all(lib, testing, quick=args.quick, log=lambda s: print(s, flush=True))
        for f in failures[:40]:
            print("FAIL " + f)
        if len(failures) > 40:
            print(f"... and {len(failures) - 40} more")
        print(f"oracle check: {passed} passed, {failed} failed ({time.perf_counter() - t0:.0f} s)", flush=True)
    if not args.no_bench:
        bench(lib, rows=args.bench_rows, n=args.bench_n, iters=args.bench_iters, log=lambda s: print(s, flush=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
