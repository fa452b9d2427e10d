"""Kernel-level driver for the sanitizer build (run by .ci/sanitize.sh, not by pytest).

Drives a CPU kernel library built with -fsanitize=address,undefined through the same
ctypes calling convention MindSpore uses (ops/testing.py: KernelCall / call_kernel),
over every entry point (21 ops; token/return/tensor), every value and index dtype, and
shapes with empty and zero-size dimensions, 0-d and rank-1 indices, index depth 0 and
depth == rank; the error paths (bad index, integer division by zero, wrong shapes, bad
dtype strings, bad argument counts, short error buffers); the shape inference of
dynamic-shape graphs (ms_scatter_infer_shape) on random, unknown and 0-d shapes; the
multi-thread path at several thread counts (and that worker threads really ran); and
concurrent calls from Python threads. Every successful result is compared with the numpy loop oracle.

MindSpore is NOT imported: ops/testing.py and infer/__init__.py are loaded from the
source tree by file path under a stub package whose `_lib` only names the library.
(Importing the installed ms_scatter.testing, which imports MindSpore, also works under
LD_PRELOAD of libasan here; this keeps the sanitized process small and independent of
MindSpore's own allocators.)

    python tests/_sanitize_driver.py --library build/sanitize/libms_scatter_cpu_asan.so
    python tests/_sanitize_driver.py --canary asan|ubsan --canary-library build/sanitize/libcanary.so

Exit status 0 when every check passed; 1 with a list of failures otherwise. A sanitizer
finding aborts the process (abort_on_error / halt_on_error) with its own report.
"""
import argparse
import ctypes
import importlib.util
import itertools
import math
import os
import re
import sys
import threading
import time
import types
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def load_source_modules(repo, library):
    """(infer, testing) from the source tree, without importing MindSpore."""
    pkg = types.ModuleType("_mss_sanitize")
    pkg.__path__ = [os.path.join(repo, "ops")]
    sys.modules[pkg.__name__] = pkg
    lib_stub = types.ModuleType("_mss_sanitize._lib")
    lib_stub.CPU_LIBRARY = library  # what kernel_library() falls back to
    sys.modules[lib_stub.__name__] = lib_stub
    pkg._lib = lib_stub

    def load(name, path):
        spec = importlib.util.spec_from_file_location(f"_mss_sanitize.{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        setattr(pkg, name, module)
        return module

    infer = load("infer", os.path.join(repo, "infer", "__init__.py"))
    testing = load("testing", os.path.join(repo, "ops", "testing.py"))
    return infer, testing


class Driver:
    """library None: no library is loaded here; the cases (oracle_cases, thread_cases) are
    run elsewhere and their results given to verify (tests/test_aarch64.py). value_dtypes:
    default every dtype but bfloat16."""

    def __init__(self, library, repo, value_dtypes=None):
        self.repo = repo
        self.library = os.path.abspath(library) if library else None
        self.infer, self.T = load_source_modules(repo, self.library)
        self.lib = None
        if self.library:
            self.lib = self.T.kernel_library(self.library)
            self.lib.ms_scatter_last_error.restype = ctypes.c_int
            self.lib.ms_scatter_last_error.argtypes = [ctypes.c_char_p, ctypes.c_int,
                                                       ctypes.POINTER(ctypes.c_ulonglong)]
            self.lib.ms_scatter_num_threads.restype = ctypes.c_int
            self.lib.ms_scatter_set_num_threads.argtypes = [ctypes.c_int]
        self.ops = [f + r for f in self.infer.FAMILIES for r in self.infer.REDUCTIONS]
        # bfloat16 has no numpy dtype without MindSpore's (not imported here): its kernels are
        # the float16 templates with another conversion, checked by tests/test_kernels.py
        self.value_dtypes = tuple(value_dtypes) if value_dtypes is not None else \
            tuple(d for d in self.infer.VALUE_DTYPES if d != "bfloat16")
        self.calls = 0
        self.failures = []

    # ------------------------------------------------------------------ helpers

    def rng(self, *key):
        return np.random.default_rng(zlib.crc32(repr(key).encode()))

    def outputs(self, op):
        return ("tensor",) if self.T.split_op(op)[0] == "TensorScatter" else ("token", "return")

    def last_error(self):
        buf = ctypes.create_string_buffer(1024)
        count = ctypes.c_ulonglong(0)
        code = self.lib.ms_scatter_last_error(buf, len(buf), ctypes.byref(count))
        return code, buf.value.decode("utf-8", "replace"), count.value

    def fail(self, what):
        self.failures.append(what)
        if len(self.failures) <= 20:
            print("FAIL:", what, flush=True)

    def call(self, op, x, indices, updates, output):
        self.calls += 1
        return self.T.call_kernel(op, x, indices, updates, output, library=self.library)

    @staticmethod
    def same(a, b):
        """Same dtype/shape; equal with NaN == NaN; and -0.0 told from +0.0."""
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.name == "bfloat16":  # exact in float32
            a, b = a.astype(np.float32), b.astype(np.float32)
        if a.dtype.kind != "f":
            return np.array_equal(a, b)
        if not np.array_equal(a, b, equal_nan=True):
            return False
        ok = ~np.isnan(b)
        return np.array_equal(np.signbit(a[ok]), np.signbit(b[ok]))

    def expected(self, op, x, indices, updates):
        """(code, oracle result or None)."""
        try:
            with np.errstate(all="ignore"):
                return 0, self.T.oracle(op, x, indices, updates)
        except self.T.OracleIndexError:
            return 2, None
        except self.T.OracleZeroDivisionError:
            return 3, None

    def check(self, op, output, x, indices, updates, what):
        """One call against the oracle: code, result, output contract, inputs untouched."""
        x0, i0, u0 = x.tobytes(), indices.tobytes(), updates.tobytes()
        rc, x_after, out = self.call(op, x, indices, updates, output)
        if x.tobytes() != x0 or indices.tobytes() != i0 or updates.tobytes() != u0:
            self.fail(f"{what} {op}/{output}: caller's arrays modified")
        self.verify(op, output, x, indices, updates, what, rc, x_after, out,
                    self.last_error()[1] if rc else "")

    def verify(self, op, output, x, indices, updates, what, rc, x_after, out, message):
        """The result of one call (code, input_x after it, output; the library's message when it
        failed) against the oracle and the entry's output contract."""
        code, want = self.expected(op, x, indices, updates)
        x0 = x.tobytes()
        tag = f"{what} {op}/{output} x{x.shape}:{x.dtype} i{indices.shape}:{indices.dtype} u{updates.shape}"
        if rc != code:
            self.fail(f"{tag}: code {rc}, expected {code}: {message}")
            return
        if code:
            if x_after.tobytes() != x0:
                self.fail(f"{tag}: input_x written by a failing call (code {code})")
            return
        result = out if output == "tensor" else x_after
        if not self.same(result, want):
            self.fail(f"{tag}: result differs from the oracle")
        if output == "return" and out.tobytes() != x_after.tobytes():
            self.fail(f"{tag}: _return output != updated input_x")
        if output == "tensor" and x_after.tobytes() != x0:
            self.fail(f"{tag}: TensorScatter modified input_x")
        if output == "token" and (out.dtype != np.int32 or out.shape != (1,)):
            self.fail(f"{tag}: bad token")

    def values(self, rng, shape, dtype, reduction, special):
        dt = self.T.np_dtype(dtype)
        v = self.T._values(rng, shape, dt, reduction)
        if special and v.size:
            if self.T.is_float(dt):
                fi = np.finfo(dt if dt.kind == "f" else np.float32)  # bfloat16: float32's, rounded
                pool = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, fi.max, fi.min, fi.tiny,
                                 fi.smallest_subnormal, -fi.smallest_subnormal], fi.dtype).astype(dt)
            else:
                ii = np.iinfo(dt)
                pool = np.array([ii.min, ii.max, 0, 1, ii.max - 1] + ([-1, ii.min + 1] if ii.min else []), dt)
            mask = rng.random(v.shape) < 0.3
            v = np.where(mask, pool[rng.integers(0, len(pool), v.shape)], v).astype(dt)
        return v

    def indices_for(self, rng, x_shape, depth, batch, index_dtype, family):
        dims = x_shape[:depth]
        n = math.prod(batch)
        cols = [rng.integers(0, d, size=n) if d > 0 else np.zeros(n, np.int64) for d in dims]
        vectors = np.stack(cols, axis=-1) if depth else np.zeros((n, 0), np.int64)
        if family == "Scatter":
            return vectors.reshape(batch).astype(index_dtype)
        return vectors.reshape(tuple(batch) + (depth,)).astype(index_dtype)

    # ------------------------------------------------------------------ sections

    CASES = {  # family: [(x shape, depth, [index batch shapes])]
        "Scatter": [((7,), 1, [(), (1,), (5,), (2, 3), (0,), (2, 0)]),
                    ((5, 3), 1, [(), (4,), (3, 2), (0,)]),
                    ((4, 3, 2), 1, [(), (6,), (0, 2)]),
                    ((3, 0), 1, [(4,), (0,)]),
                    ((0, 3), 1, [(0,), (2,)])],  # (2,) into a 0-row x: code 2
        "ScatterNd": [((7,), 1, [(), (5,), (2, 3), (0,)]),
                      ((5, 3), 1, [(), (4,)]), ((5, 3), 2, [(), (6,), (0,)]),
                      ((4, 3, 2), 2, [(), (2, 3)]), ((4, 3, 2), 3, [(5,), (0, 3)]),
                      ((5, 3), 0, [(3,)]),
                      ((3, 0), 1, [(4,)]), ((0, 3), 1, [(2,), (0,)])],
        "TensorScatter": [((7,), 1, [(5,), (2, 3), (0,)]),
                          ((5, 3), 1, [(4,)]), ((5, 3), 2, [(6,), (0,)]),
                          ((4, 3, 2), 2, [(2, 3)]), ((4, 3, 2), 3, [(5,)]),
                          ((5, 3), 0, [(3,)]),
                          ((3, 0), 1, [(4,)]), ((0, 3), 1, [(2,), (0,)])],
    }

    def oracle_cases(self):
        """(op, output, x, indices, updates, what): every entry point x value dtype x index
        dtype x the shape classes of CASES, with and without special values."""
        for op in self.ops:
            family, reduction = self.T.split_op(op)
            for output, dtype, index_dtype in itertools.product(
                    self.outputs(op), self.value_dtypes, self.infer.INDEX_DTYPES):
                for x_shape, depth, batches in self.CASES[family]:
                    for batch in batches:
                        for special in (False, True):
                            rng = self.rng(op, output, dtype, index_dtype, x_shape, depth, batch, special)
                            x = self.values(rng, x_shape, dtype, reduction, special)
                            idx = self.indices_for(rng, x_shape, depth, batch, index_dtype, family)
                            upd_shape = tuple(batch) + tuple(x_shape[depth:])
                            upd = self.values(rng, upd_shape, dtype, reduction, special)
                            yield op, output, x, idx, upd, "oracle"

    def section_oracle(self):
        for case in self.oracle_cases():
            self.check(*case)

    def section_errors(self):
        for op in self.ops:
            family, reduction = self.T.split_op(op)
            for output in self.outputs(op):
                for index_dtype, dtype in (("int32", "float32"), ("int64", "int16"), ("int64", "float16")):
                    rng = self.rng("err", op, output, index_dtype, dtype)
                    x_shape, depth, batch = ((5, 4, 3), 1, (3,)) if family == "Scatter" else ((5, 4, 3), 2, (3,))
                    x = self.values(rng, x_shape, dtype, reduction, False)
                    idx = self.indices_for(rng, x_shape, depth, batch, index_dtype, family)
                    upd = self.values(rng, batch + x_shape[depth:], dtype, reduction, False)
                    info = np.iinfo(index_dtype)
                    flat_positions = [0, idx.size // 2, idx.size - 1]
                    for flat, bad in itertools.product(flat_positions, [5, 6, -1, int(info.min), int(info.max)]):
                        bad_idx = idx.copy()
                        bad_idx.reshape(-1)[flat] = bad
                        if self.expected(op, x, bad_idx, upd)[0] != 2:
                            continue  # e.g. 5 at a dimension of size > 5
                        self.check(op, output, x, bad_idx, upd, "bad-index")
                        pos = tuple(int(p) for p in np.unravel_index(flat, bad_idx.shape))
                        msg = self.last_error()[1]
                        if f"For '{op}'" not in msg or f"but got {bad} at position {pos}" not in msg:
                            self.fail(f"bad-index {op}/{output}: message {msg!r}")
                    # wrong updates shapes, straight to the kernel
                    for shape in (upd.shape + (1,), upd.shape[:-1], (upd.shape[0] + 1,) + upd.shape[1:], ()):
                        u = np.ones(shape, dtype)
                        rc, x_after, _ = self.call(op, x, idx, u, output)
                        if rc != 1 or x_after.tobytes() != x.tobytes():
                            self.fail(f"bad-updates-shape {op}/{output} {shape}: code {rc}")
                    # unsupported dtype strings
                    for xs, isx in ((b"bool", b"int32"), (b"BFloat16", b"int32"), (b"complex64", b"int64"),
                                    (b"uint128", b"int32"), (b"", b"int32"), (b"float32 ", b"int32"),
                                    (b"x" * 300, b"int32"), (b"float32", b"int16"), (b"float32", b"uint64"),
                                    (b"float32", b""), (b"float32", b"float32")):
                        if op.endswith("Update") and xs in (b"bool", b"complex64"):
                            continue  # Update copies these (a valid call, not of a float32 buffer)
                        xx = x.astype(np.float32)
                        call = self.T.KernelCall(op, xx, idx.copy(), upd.astype(np.float32), output,
                                                 library=self.library)
                        call.dtypes[0] = call.dtypes[2] = xs
                        call.dtypes[1] = isx
                        before = xx.tobytes()
                        self.calls += 1
                        rc = call.run()
                        if rc != 1 or xx.tobytes() != before:
                            self.fail(f"bad-dtype {op}/{output} {xs[:20]!r}/{isx!r}: code {rc}")
                    # x and updates of different (valid) dtypes
                    call = self.T.KernelCall(op, x.astype(np.float64), idx.copy(), upd.astype(np.float32), output,
                                             library=self.library)
                    self.calls += 1
                    if call.run() != 1:
                        self.fail(f"mixed dtypes {op}/{output}: accepted")
                    # argument count
                    call = self.T.KernelCall(op, x.copy(), idx.copy(), upd.copy(), output, library=self.library)
                    for nparam in (0, 3, 5):
                        self.calls += 1
                        if call.fn(nparam, call.params, call.ndims, call.shapes, call.dtypes, None, None) != 1:
                            self.fail(f"nparam={nparam} {op}/{output}: accepted")
                    if call.arrays[0].tobytes() != x.tobytes():
                        self.fail(f"nparam {op}/{output}: x written")
                # integer division by zero, before any write
                if reduction == "Div":
                    for dtype in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
                        rng = self.rng("div0", op, output, dtype)
                        x = self.values(rng, (4, 3), dtype, reduction, False)
                        idx = self.indices_for(rng, (4, 3), 1, (5,), "int64", family)
                        upd = self.values(rng, (5, 3), dtype, reduction, False)
                        for flat in (0, 7, 14):
                            u = upd.copy()
                            u.reshape(-1)[flat] = 0
                            self.check(op, output, x, idx, u, "div0")
                # rank/depth errors
                if family == "Scatter":  # a 0-d input_x is one element: updates take indices' shape
                    bad = [(np.array(1.0, np.float32), np.array([0], np.int32), np.ones((2,), np.float32))]
                else:  # ranks up to 64 (kMaxRank) are valid; numpy arrays stop at 32
                    bad = [(np.ones((5, 3), np.float32), np.array(0, np.int32), np.ones((5, 3), np.float32)),
                           (np.ones((5, 3), np.float32), np.zeros((1, 3), np.int32), np.ones((1,), np.float32))]
                    for rank in (17, 32):
                        self.check(op, output, np.ones((1,) * rank, np.float32), np.zeros((2, rank), np.int32),
                                   np.full((2,), 2.0, np.float32), "rank")
                for xb, ib, ub in bad:
                    rc, x_after, _ = self.call(op, xb, ib, ub, output)
                    if rc != 1 or x_after.tobytes() != xb.tobytes():
                        self.fail(f"rank/depth {op}/{output} x{xb.shape} i{ib.shape}: code {rc}")
        # the error buffer: short, empty and NULL buffers
        for length in (0, 1, 2, 17, 1023, 1024, 4096):
            buf = ctypes.create_string_buffer(max(length, 1))
            count = ctypes.c_ulonglong(0)
            self.lib.ms_scatter_last_error(buf, length, ctypes.byref(count))
            if length and len(buf.value) > length - 1:
                self.fail(f"ms_scatter_last_error(len={length}) wrote {len(buf.value)} characters")
        self.lib.ms_scatter_last_error(None, 0, None)
        self.lib.ms_scatter_last_error(None, 16, None)

    def thresholds(self):
        """(kParallelMinWork, kFewRowsBytes) from the kernel source the library was built from."""
        with open(os.path.join(self.repo, "kernels", "cpu", "scatter_cpu.cc")) as f:
            source = f.read()
        out = []
        for name in ("kParallelMinWork", "kFewRowsBytes"):
            m = re.search(name + r"\s*=\s*int64_t\(1\)\s*<<\s*(\d+)\s*;", source)
            if not m:
                raise SystemExit(f"{name} not found in scatter_cpu.cc: update _sanitize_driver.thresholds()")
            out.append(1 << int(m.group(1)))
        return out

    def big_case(self, op, dtype, index_dtype, order, rng):
        """A case that takes the multi-thread path: 256 index vectors of slices of
        kParallelMinWork / 256 elements over 2 * kFewRowsBytes or more of input_x, half of
        the indices on 8 hot rows (duplicates)."""
        family, reduction = self.T.split_op(op)
        work, span = self.thresholds()
        item = self.T.np_dtype(dtype).itemsize
        n = 256
        slice_ = max(1, work // n)
        rows = max(16, -(-2 * span // (slice_ * item)))
        rows += -rows % 8
        x_shape, depth = ((rows, slice_), 1) if family == "Scatter" else ((rows // 8, 8, slice_), 2)
        flat = np.concatenate([rng.integers(0, rows, n // 2), rng.choice(rows, 8)[rng.integers(0, 8, n - n // 2)]])
        flat[:2] = (0, rows - 1)  # the whole span
        rng.shuffle(flat)
        if order == "sorted":
            flat.sort()
        if family == "Scatter":
            idx = flat.astype(index_dtype)
        else:
            idx = np.stack(np.unravel_index(flat, x_shape[:2]), axis=-1).astype(index_dtype)
        x = self.values(rng, x_shape, dtype, reduction, True)
        upd = self.values(rng, (n,) + x_shape[depth:], dtype, reduction, True)
        if reduction == "Div" and not self.T.is_float(dtype):
            upd[upd == 0] = 1
        return x, idx, upd

    def infer_shape(self, entry, shapes, null_scalars=False):
        """ms_scatter_infer_shape (the library's shape inference for dynamic-shape graphs):
        (output shape, None) or (None, message). null_scalars: a 0-d shape as a NULL pointer."""
        self.calls += 1
        fn = self.lib.ms_scatter_infer_shape
        fn.restype = ctypes.c_int
        ndims = (ctypes.c_int * 3)(*[len(s) for s in shapes])
        bufs = [(ctypes.c_int64 * len(s))(*s) if s or not null_scalars else None for s in shapes]
        ptrs = (ctypes.POINTER(ctypes.c_int64) * 3)(
            *[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) if b is not None else None for b in bufs])
        out = (ctypes.c_int64 * 8)()
        msg = ctypes.create_string_buffer(256)  # shorter than some messages: truncated, terminated
        rank = fn(entry.encode(), ndims, ptrs, out, 8, msg, len(msg))
        return (tuple(out[:min(rank, 8)]), None) if rank >= 0 else (None, msg.value.decode())

    def section_infer_shape(self):
        """Random known shapes (the library's rule against infer/'s), shapes with unknown
        dimensions and unknown ranks (passed through), 0-d shapes as NULL pointers."""
        for op in self.ops:
            family = self.T.split_op(op)[0]
            rule, kwargs = self.infer.family_shape_rule(family)
            rng = self.rng("infer-shape", op)
            for output in self.outputs(op):
                entry = self.T.entry_name(op, output if output != "tensor" else "token")
                for _ in range(60):
                    shapes = [tuple(int(d) for d in rng.integers(0, 4, size=rng.integers(0, 4))) for _ in range(3)]
                    try:
                        rule(op, *shapes, **kwargs)
                        valid = True
                    except ValueError:
                        valid = False
                    for null in (False, True):
                        got, err = self.infer_shape(entry, shapes, null)
                        if (err is None) != valid:
                            self.fail(f"infer-shape {entry} {shapes}: library says {err!r}, infer/ valid={valid}")
                        elif valid and got != ((1,) if output == "token" else shapes[0]):
                            self.fail(f"infer-shape {entry} {shapes}: output {got}")
                        elif not valid and not err.startswith(f"For '{op}', "):
                            self.fail(f"infer-shape {entry} {shapes}: message {err!r}")
                    unknown = [tuple(-1 if rng.random() < 0.5 else d for d in s) for s in shapes]
                    if unknown != shapes:
                        got, err = self.infer_shape(entry, unknown)
                        if err is not None or got != ((1,) if output == "token" else unknown[0]):
                            self.fail(f"infer-shape {entry} {unknown}: {got} {err!r}")
                got, err = self.infer_shape(entry, [(-2,), (-2,), (-2,)])
                if err is not None or got != ((1,) if output == "token" else (-2,)):
                    self.fail(f"infer-shape {entry} unknown ranks: {got} {err!r}")

    def thread_cases(self):
        """(op, dtype, order, output, x, indices, updates) that take the multi-thread path: the
        float16 grouped path on six operators of the three families, and two operators per
        other value dtype, on random and sorted indices."""
        ops = ["ScatterAdd", "ScatterDiv", "ScatterNdMax", "ScatterNdAdd", "TensorScatterUpdate",
               "TensorScatterSub"]
        cases = [(op, "float16") for op in ops]  # float16: the grouped path, every op
        for i, dtype in enumerate(d for d in self.value_dtypes if d != "float16"):
            cases += [(ops[(2 * i) % len(ops)], dtype), (ops[(2 * i + 1) % len(ops)], dtype)]
        for (op, dtype), order in itertools.product(cases, ("random", "sorted")):
            index_dtype = "int32" if (len(op) + len(dtype)) % 2 else "int64"
            x, idx, upd = self.big_case(op, dtype, index_dtype, order, self.rng("threads", op, dtype, order))
            yield op, dtype, order, self.outputs(op)[-1], x, idx, upd

    def section_threads(self):
        tasks_before = len(os.listdir("/proc/self/task"))
        saved = self.lib.ms_scatter_num_threads()
        work, _ = self.thresholds()
        try:
            for op, dtype, order, output, x, idx, upd in self.thread_cases():
                code, want = self.expected(op, x, idx, upd)
                results = []
                for threads in (1, 2):
                    self.lib.ms_scatter_set_num_threads(threads)
                    rc, x_after, out = self.call(op, x, idx, upd, output)
                    results.append((rc, (out if output == "tensor" else x_after).tobytes()))
                if any(r != (0, results[0][1]) for r in results):
                    self.fail(f"threads {op} {dtype} {order}: codes {[r[0] for r in results]} or bytes differ")
                got = np.frombuffer(results[0][1], dtype).reshape(x.shape)
                if code != 0 or not self.same(got, want):
                    self.fail(f"threads {op} {dtype} {order}: differs from the oracle")
            # element-wise (slice 1) float16 accumulation with kParallelMinWork indices, many duplicates
            rng = self.rng("elementwise")
            x = self.values(rng, (1024, 1024), "float16", "Add", False)  # 2 MiB: above the 1 MiB span
            idx = rng.integers(0, 1024, (work, 2))
            idx[: work // 4] %= 16
            upd = self.values(rng, (work,), "float16", "Add", False)
            acc = x.astype(np.float32)
            np.add.at(acc, (idx[:, 0], idx[:, 1]), upd.astype(np.float32))  # in index order
            want = acc.astype(np.float16).tobytes()
            for threads in (1, 2):
                self.lib.ms_scatter_set_num_threads(threads)
                rc, x_after, _ = self.call("ScatterNdAdd", x, idx, upd, "token")
                if (rc, x_after.tobytes()) != (0, want):
                    self.fail(f"elementwise float16 ScatterNdAdd, {threads} threads: differs from np.add.at")
        finally:
            self.lib.ms_scatter_set_num_threads(saved)
        tasks_after = len(os.listdir("/proc/self/task"))
        if tasks_after <= tasks_before:
            self.fail(f"no worker thread was started ({tasks_before} -> {tasks_after} threads): "
                      "the multi-thread path was not exercised")
        print(f"  threads: {tasks_before} -> {tasks_after} OS threads in the process", flush=True)

    def section_concurrency(self):
        """Python threads launching kernels at once (ctypes releases the GIL): two in-place
        calls on one input_x, each on the multi-thread path, lose no update; two separate
        out-of-place calls are exact; the thread count changes meanwhile."""
        work, _ = self.thresholds()
        rng = self.rng("concurrency")
        cols = 1024
        n = max(8, work // cols)
        shared = np.zeros((4096, cols), np.int64)
        expected = shared.copy()
        jobs = []
        for t in range(2):
            idx = rng.integers(0, 4096, n).astype(np.int64)
            upd = rng.integers(-9, 10, (n, cols)).astype(np.int64)
            np.add.at(expected, idx, upd)
            jobs.append(self.T.KernelCall("ScatterAdd", shared, idx, upd, ("token", "return")[t],
                                          library=self.library))
        separate = []
        for t in range(2):
            x, idx, upd = self.big_case("TensorScatterMax", "float32", "int64", "random", self.rng("conc", t))
            call = self.T.KernelCall("TensorScatterMax", x, idx, upd, "tensor", library=self.library)
            jobs.append(call)
            separate.append((call, self.T.oracle("TensorScatterMax", x, idx, upd)))
        codes = []
        stop = threading.Event()

        def toggle():  # thread counts changing while kernels run
            k = 0
            while not stop.is_set():
                self.lib.ms_scatter_set_num_threads(k % 4)  # 0 = automatic
                k += 1
                time.sleep(0.0005)

        saved = self.lib.ms_scatter_num_threads()
        self.lib.ms_scatter_set_num_threads(2)
        toggler = threading.Thread(target=toggle)
        threads = [threading.Thread(target=lambda j=j: codes.append(j.run())) for j in jobs]
        for th in threads:
            th.start()
        toggler.start()
        for th in threads:
            th.join(300)
        stop.set()
        toggler.join()
        self.lib.ms_scatter_set_num_threads(saved)
        self.calls += len(jobs)
        if any(th.is_alive() for th in threads) or codes != [0] * len(jobs):
            self.fail(f"concurrency: codes {codes}")
        if not np.array_equal(shared, expected):
            self.fail("concurrency: lost update on a shared input_x")
        for call, want in separate:
            if not self.same(call.out, want):
                self.fail("concurrency: separate TensorScatterMax differs from the oracle")

    def section_shards(self):
        """The row-shard entries: the blocks of a table, each through its own entry with the
        whole batch, put together against the oracle (small and multi-thread cases); an
        index outside the global rows and a shard outside the table on every block."""
        def blocks_of(rows, parts):
            base, extra = divmod(rows, parts)
            begins = np.cumsum([0] + [base + (r < extra) for r in range(parts)])
            return [(int(begins[r]), int(begins[r + 1] - begins[r])) for r in range(parts)]

        def shard_check(op, x, idx, upd, parts, what):
            code, want = self.expected(op, x, idx, upd)
            output = "tensor" if self.T.split_op(op)[0] == "TensorScatter" else "token"
            got = []
            for begin, count in blocks_of(x.shape[0], parts):
                block = np.ascontiguousarray(x[begin:begin + count])
                self.calls += 1
                rc, after, out = self.T.call_kernel(op, block, idx, upd, output, library=self.library,
                                                    shard=(begin, x.shape[0]))
                if rc != code:
                    self.fail(f"shards {what} {op} block {begin}: code {rc}, expected {code}: {self.last_error()[1]}")
                    return
                if code and after.tobytes() != block.tobytes():
                    self.fail(f"shards {what} {op} block {begin}: written by a failing call")
                got.append(out if output == "tensor" else after)
            if not code and not self.same(np.concatenate(got), want):
                self.fail(f"shards {what} {op}: blocks differ from the oracle on the whole table")

        saved = self.lib.ms_scatter_num_threads()
        try:
            for k, op in enumerate(self.ops):
                family, reduction = self.T.split_op(op)
                for dtype in ("float32", "float16", "int8"):
                    for index_dtype in (("int32", "int64")[(k + len(dtype)) % 2],):
                        rng = self.rng("shards", op, dtype, index_dtype)
                        x_shape, depth = ((9, 3), 1) if family == "Scatter" else ((9, 3, 2), 2)
                        idx = self.indices_for(rng, x_shape, depth, (4, 2), index_dtype, family)
                        x = self.values(rng, x_shape, dtype, reduction, True)
                        upd = self.values(rng, (4, 2) + x_shape[depth:], dtype, reduction, True)
                        if reduction == "Div" and np.dtype(dtype).kind != "f":
                            upd[upd == 0] = 1
                        shard_check(op, x, idx, upd, 4, "small")
                        bad = idx.copy()
                        bad.reshape(-1)[-depth] = x_shape[0]  # a global row past the table
                        shard_check(op, x, bad, upd, 4, "bad index")
            for threads in (1, 2):
                self.lib.ms_scatter_set_num_threads(threads)
                for op, order in (("ScatterAdd", "random"), ("ScatterNdMax", "sorted"), ("TensorScatterSub", "random")):
                    for dtype in ("float32", "float16"):
                        x, idx, upd = self.big_case(op, dtype, "int64", order, self.rng("shards big", op, dtype))
                        shard_check(op, x, idx, upd, 3, f"{threads} threads")
        finally:
            self.lib.ms_scatter_set_num_threads(saved)
        block = np.ones((3, 2), np.float32)
        for info in ((-1, 9), (7, 9), (0, 2)):
            self.calls += 1
            rc, after, _ = self.T.call_kernel("ScatterAdd", block, np.array([0], np.int64), np.ones((1, 2), np.float32),
                                              library=self.library, shard=info)
            if rc != 1 or after.tobytes() != block.tobytes():
                self.fail(f"shards: info {info} accepted or written (code {rc})")

    # ------------------------------------------------------------------ fused message passing

    def message_call(self, entry, arrays):
        """One Gspmm*/Gsddmm* entry (kernels/cpu/message.h) on numpy arrays; returns its code."""
        self.calls += 1
        fn = getattr(self.lib, entry)
        fn.restype = ctypes.c_int
        k = len(arrays)
        params = (ctypes.c_void_p * k)(*[a.ctypes.data for a in arrays])
        ndims = (ctypes.c_int * k)(*[a.ndim for a in arrays])
        bufs = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
        shapes = (ctypes.POINTER(ctypes.c_int64) * k)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in bufs])
        dtypes = (ctypes.c_char_p * k)(*[a.dtype.name.encode() for a in arrays])
        return fn(k, params, ndims, shapes, dtypes, None, None)

    @staticmethod
    def message_oracle(entry, x, src, dst, rows, w):
        """The kernels' own order: each node's edges in edge order, in the accumulator type
        (float32 for float16), integers wrapping in their dtype."""
        acc = np.float32 if x.dtype == np.float16 else x.dtype.type
        feat = x.reshape(x.shape[0], int(np.prod(x.shape[1:]))).astype(acc)
        with np.errstate(all="ignore"):
            if entry.startswith("Gsddmm"):
                v = rows.reshape(rows.shape[0], -1).astype(acc)
                a, b = feat[src], v[dst]
                if entry == "GsddmmDot":
                    out = np.zeros(len(src), acc)
                    for f in range(a.shape[1]):
                        out = (out + a[:, f] * b[:, f]).astype(acc)
                    return out.astype(x.dtype)
                out = {"GsddmmAdd": a + b, "GsddmmSub": a - b, "GsddmmMul": a * b}[entry].astype(acc)
                return out.astype(x.dtype).reshape((len(src),) + x.shape[1:])
            out = np.zeros((len(rows), feat.shape[1]), acc)
            for node in range(len(rows)):
                edges = np.nonzero(dst == node)[0]
                for k, e in enumerate(edges):
                    m = feat[src[e]] if w is None else (feat[src[e]] * acc(w[e])).astype(acc)
                    if k == 0:
                        out[node] = (acc(0) + m).astype(acc) if entry.startswith(("GspmmSum", "GspmmMean")) else m
                    elif entry.startswith(("GspmmSum", "GspmmMean")):
                        out[node] = (out[node] + m).astype(acc)
                    elif entry == "GspmmProd":
                        out[node] = (out[node] * m).astype(acc)
                    elif entry == "GspmmMax":
                        out[node] = np.where((out[node] >= m) | np.isnan(out[node]), out[node], m)
                    else:
                        out[node] = np.where((out[node] <= m) | np.isnan(out[node]), out[node], m)
                if entry == "GspmmMean" and len(edges):
                    if out.dtype.kind == "f":
                        out[node] = (out[node] / acc(len(edges))).astype(acc)
                    elif out.dtype.kind == "i":
                        out[node] = np.trunc(out[node].astype(np.int64) / len(edges)).astype(acc)
                    else:
                        out[node] = (out[node].astype(np.uint64) // np.uint64(len(edges))).astype(acc)
            return out.astype(x.dtype).reshape((len(rows),) + x.shape[1:])

    @staticmethod
    def tie_oracle(x, src, dst, w, out, dout):
        """GspmmTieGrad / GspmmTieGradWeight by loops: each node's dout split evenly among the
        edges whose message rounds to its result, in edge order, in the accumulator type."""
        acc = np.float32 if x.dtype == np.float16 else x.dtype.type
        feat, o = x.reshape(x.shape[0], -1).astype(acc), out.reshape(out.shape[0], -1)
        g = dout.reshape(dout.shape[0], -1).astype(acc)
        with np.errstate(all="ignore"):
            messages = feat[src] if w is None else (feat[src] * w.astype(acc).reshape(-1, 1)).astype(acc)
            tied = messages.astype(x.dtype) == o[dst]
            count = np.zeros(o.shape, np.int64)
            np.add.at(count, dst, tied.astype(np.int64))
            share = np.where(count > 0, g / np.maximum(count, 1), 0).astype(acc)
            dx, dw = np.zeros(feat.shape, acc), np.zeros(len(src), acc)
            for e in range(len(src)):
                for f in range(feat.shape[1]):
                    if tied[e, f]:
                        q = share[dst[e], f] if w is None else acc(share[dst[e], f] * acc(w[e]))
                        dx[src[e], f] = acc(dx[src[e], f] + q)
                        dw[e] = acc(dw[e] + acc(share[dst[e], f] * feat[src[e], f]))
        return dx.astype(x.dtype).reshape(x.shape), dw.astype(x.dtype)

    def check_ties(self, x, src, dst, weight, out, rng):
        """max/min's gradient kernels on one forward result, against tie_oracle (floats; the
        integers for their memory only)."""
        dout = rng.integers(-3, 4, out.shape).astype(x.dtype)
        dx = np.full(x.shape, 9, x.dtype)
        extra = [] if weight is None else [weight]
        rc = self.message_call("GspmmTieGrad", [x, src, dst, out, dout] + extra + [dx])
        want_dx, want_dw = self.tie_oracle(x, src, dst, weight, out, dout)
        if rc != 0 or (x.dtype.kind == "f" and not self.same(dx, want_dx)):
            self.fail(f"GspmmTieGrad {x.dtype} E={len(src)} weighted={weight is not None}: rc {rc} "
                      f"{self.last_error()[1]!r}")
        if weight is not None:
            dw = np.full(len(src), 9, x.dtype)
            rc = self.message_call("GspmmTieGradWeight", [x, src, dst, out, dout, weight, dw])
            if rc != 0 or (x.dtype.kind == "f" and not self.same(dw, want_dw)):
                self.fail(f"GspmmTieGradWeight {x.dtype} E={len(src)}: rc {rc} {self.last_error()[1]!r}")

    @staticmethod
    def scatter_tie_oracle(out, dout, idx, xg, upd):
        """ScatterTieGradX / ScatterTieGradUpdates by loops (ops/_grad.py's Max/Min rule): each
        element's dout split evenly among input_x (where xg equals the result; always where no
        vector reached it) and the updates equal to it, the count and share rounded to the dtype."""
        acc = np.float32 if out.dtype == np.float16 else out.dtype.type
        depth = idx.shape[1]
        o = out.reshape(int(np.prod(out.shape[:depth])), -1)
        g = dout.reshape(o.shape)
        rows = np.ravel_multi_index(tuple(idx.T), out.shape[:depth]) if len(idx) else np.zeros(0, np.int64)
        u, xs = upd.reshape(len(idx), o.shape[1]), xg.reshape(len(idx), o.shape[1])
        with np.errstate(all="ignore"):
            count = np.zeros(o.shape, np.int64)
            won = np.ones(o.shape, bool)
            for k, r in enumerate(rows):
                count[r] += u[k] == o[r]
                won[r] = xs[k] == o[r]
            c = np.maximum(count + won, 1).astype(out.dtype).astype(acc)
            share = (g.astype(acc) / c).astype(out.dtype).astype(acc)
            dx = (share * won).astype(out.dtype)
            du = np.stack([share[r] * (u[k] == o[r]) for k, r in enumerate(rows)]).astype(out.dtype) \
                if len(rows) else np.zeros(u.shape, out.dtype)
        return dx.reshape(out.shape), du.reshape(upd.shape)

    def check_scatter_ties(self, dtype, index_dtype, rng):
        """The family's Max/Min gradient kernels and the gradients' gather against loops, at
        depths 1 and 2, with ties, NaN and an input_x no vector reaches."""
        dt = np.dtype(dtype)
        for shape, depth, n in (((5, 3), 1, 9), ((4, 3, 2), 2, 7), ((3, 2), 1, 0), ((6,), 1, 4)):
            x = rng.integers(0, 3, shape).astype(dt)
            idx = np.stack([rng.integers(0, shape[j], n) for j in range(depth)], 1).astype(index_dtype)
            idx = idx.reshape(n, depth)
            upd = rng.integers(0, 3, (n,) + shape[depth:]).astype(dt)
            if n:
                upd.reshape(-1)[0] = np.nan
            out = x.copy()
            for k in range(n):
                slot = tuple(idx[k])
                out[slot] = np.where(np.isnan(out[slot]) | (out[slot] >= upd[k]), out[slot], upd[k])
            xg = np.full(upd.shape, 7, dt)
            rc = self.message_call("ScatterGradGather", [x, idx, xg])
            want_xg = np.stack([x[tuple(v)] for v in idx]) if n else xg
            if rc != 0 or not self.same(xg, want_xg):
                self.fail(f"ScatterGradGather {dtype} {index_dtype} {shape} depth {depth}: rc {rc} "
                          f"{self.last_error()[1]!r}")
            dout = rng.integers(-3, 4, shape).astype(dt)
            want_dx, want_du = self.scatter_tie_oracle(out, dout, idx, xg, upd)
            dx, du = np.full(shape, 9, dt), np.full(upd.shape, 9, dt)
            rc = self.message_call("ScatterTieGradX", [out, dout, idx, xg, upd, dx])
            if rc != 0 or not self.same(dx, want_dx):
                self.fail(f"ScatterTieGradX {dtype} {index_dtype} {shape} depth {depth}: rc {rc} "
                          f"{self.last_error()[1]!r}")
            rc = self.message_call("ScatterTieGradUpdates", [out, dout, idx, xg, upd, du])
            if rc != 0 or not self.same(du, want_du):
                self.fail(f"ScatterTieGradUpdates {dtype} {index_dtype} {shape} depth {depth}: rc {rc} "
                          f"{self.last_error()[1]!r}")

    @staticmethod
    def arg_oracle(kind, x, ids, nodes):
        """segment_argmax / argmin by loops: per segment and feature the first row holding the
        max (min), the first NaN winning; E for an empty segment; negative ids dropped."""
        feat = x.reshape(x.shape[0], int(np.prod(x.shape[1:])))
        arg = np.full((nodes, feat.shape[1]), x.shape[0], np.int64)
        for f in range(feat.shape[1]):
            for node in range(nodes):
                best = None
                for row in np.nonzero(ids == node)[0]:
                    value = feat[row, f]
                    if best is None or (not np.isnan(best) and (np.isnan(value) or
                                                                 (value > best if kind == "max" else value < best))):
                        best, arg[node, f] = value, row
        return arg.reshape((nodes,) + x.shape[1:])

    def check_segment_arg(self, x, ids, nodes):
        """SegmentArgMax / SegmentArgMin against arg_oracle, then SegmentArgValues on the arg."""
        for kind in ("max", "min"):
            entry = f"SegmentArg{kind.title()}"
            arg = np.full((nodes,) + x.shape[1:], -7, np.int64)
            rc = self.message_call(entry, [x, ids, np.zeros(nodes, np.int8), arg])
            want = self.arg_oracle(kind, x, ids, nodes)
            if rc != 0 or not np.array_equal(arg, want):
                self.fail(f"{entry} {x.dtype} {ids.dtype} E={len(ids)}: rc {rc} {self.last_error()[1]!r}")
                continue
            values = np.full(arg.shape, 7, x.dtype)
            rc = self.message_call("SegmentArgValues", [x, ids, arg, values])
            padded = np.concatenate([x, np.zeros((1,) + x.shape[1:], x.dtype)])
            width = int(np.prod(x.shape[1:]))
            want = np.take_along_axis(padded.reshape(len(padded), width), arg.reshape(nodes, width), 0).reshape(arg.shape)
            if rc != 0 or not self.same(values, want):
                self.fail(f"SegmentArgValues {x.dtype} E={len(ids)}: rc {rc} {self.last_error()[1]!r}")
            both, both_values = np.full(arg.shape, -7, np.int64), np.full(arg.shape, 7, x.dtype)
            rc = self.message_call(entry, [x, ids, np.zeros(nodes, np.int8), both, both_values])
            if rc != 0 or not np.array_equal(both, arg) or not self.same(both_values, want):
                self.fail(f"{entry} with its values {x.dtype} E={len(ids)}: rc {rc} {self.last_error()[1]!r}")

    def check_segment_reduce(self, x, ids, nodes):
        """SegmentReduce<R> against message_oracle's loops (each row its own message), an empty
        segment the fill value."""
        fill = np.array([3], x.dtype)
        for reduce in ("Sum", "Mean", "Max", "Min", "Prod"):
            out = np.full((nodes,) + x.shape[1:], 7, x.dtype)
            rc = self.message_call(f"SegmentReduce{reduce}", [x, ids, np.zeros(nodes, np.int8), fill, out])
            want = self.message_oracle(f"Gspmm{reduce}", x, np.arange(len(ids)), ids, np.zeros(nodes), None)
            empty = np.array([(ids == node).sum() == 0 for node in range(nodes)])
            want[empty] = fill[0]
            if rc != 0 or not self.same(out, want):
                self.fail(f"SegmentReduce{reduce} {x.dtype} {ids.dtype} E={len(ids)}: rc {rc} {self.last_error()[1]!r}")

    def check_segment_csr(self, x, nodes, rng):
        """SegmentCsr<R> on a random indptr of `nodes` segments against message_oracle's loops."""
        cuts = np.sort(rng.integers(0, x.shape[0] + 1, nodes - 1))
        for index_dtype in (np.int32, np.int64):
            indptr = np.concatenate([[0], cuts, [x.shape[0]]]).astype(index_dtype)
            ids = np.repeat(np.arange(nodes), np.diff(indptr))
            fill = np.array([3], x.dtype)
            for reduce in ("Sum", "Mean", "Max", "Min", "Prod"):
                out = np.full((nodes,) + x.shape[1:], 7, x.dtype)
                rc = self.message_call(f"SegmentCsr{reduce}", [x, indptr, fill, out])
                want = self.message_oracle(f"Gspmm{reduce}", x, np.arange(len(ids)), ids, np.zeros(nodes), None)
                want[np.diff(indptr) == 0] = fill[0]
                if rc != 0 or not self.same(out, want):
                    self.fail(f"SegmentCsr{reduce} {x.dtype} {indptr.dtype} E={len(ids)}: rc {rc} "
                              f"{self.last_error()[1]!r}")

    def check_segment_softmax(self, x, ids, nodes):
        """SegmentSoftmax and SegmentSoftmaxGrad (floats) against float64 loops, within a few
        ulps of the dtype (the kernel's exp is its own polynomial)."""
        if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
            out = np.zeros(x.shape, x.dtype)
            if self.message_call("SegmentSoftmax", [x, ids, np.zeros(nodes, np.int8), out]) == 0:
                self.fail(f"SegmentSoftmax accepted {x.dtype}")
            return
        x = np.where(np.isnan(x.astype(np.float32)), 1, x).astype(x.dtype) if x.size else x
        wide = x.astype(np.float64)
        want = np.zeros_like(wide)
        for node in range(nodes):
            rows = ids == node
            if rows.any():
                e = np.exp(wide[rows] - wide[rows].max(axis=0))
                want[rows] = e / e.sum(axis=0)
        out = np.full(x.shape, 7, x.dtype)
        rc = self.message_call("SegmentSoftmax", [x, ids, np.zeros(nodes, np.int8), out])
        eps = {"float16": 2e-3, "bfloat16": 1.6e-2, "float32": 1e-6, "float64": 1e-14}[x.dtype.name]
        if rc != 0 or not np.allclose(out.astype(np.float64), want, rtol=eps, atol=eps):
            self.fail(f"SegmentSoftmax {x.dtype} {ids.dtype} E={len(ids)}: rc {rc} {self.last_error()[1]!r}")
            return
        dy = np.arange(x.size).reshape(x.shape).astype(x.dtype)
        y, g = out.astype(np.float64), dy.astype(np.float64)
        want = np.zeros_like(y)
        for node in range(nodes):
            rows = ids == node
            want[rows] = y[rows] * (g[rows] - (y[rows] * g[rows]).sum(axis=0))
        dx = np.full(x.shape, 7, x.dtype)
        rc = self.message_call("SegmentSoftmaxGrad", [out, dy, ids, np.zeros(nodes, np.int8), dx])
        if rc != 0 or not np.allclose(dx.astype(np.float64), want, rtol=4 * eps, atol=4 * eps * max(1, x.size)):
            self.fail(f"SegmentSoftmaxGrad {x.dtype} {ids.dtype} E={len(ids)}: rc {rc} {self.last_error()[1]!r}")

    def section_message(self):
        spmm = ("GspmmSum", "GspmmMean", "GspmmMax", "GspmmMin")
        sddmm = ("GsddmmAdd", "GsddmmSub", "GsddmmMul", "GsddmmDot")
        for dtype in self.value_dtypes:
            for edges, nodes, feat in ((0, 3, (2,)), (1, 1, ()), (13, 4, (3,)), (40, 6, (2, 3))):
                rng = self.rng("message", dtype, edges)
                dt = np.dtype(dtype)
                x = (rng.integers(-4, 5, (5,) + feat) if dt.kind in "if" else rng.integers(0, 5, (5,) + feat)).astype(dt)
                if dt.kind == "f" and x.size:
                    x.reshape(-1)[0] = np.nan
                w = (rng.integers(-2, 3, edges) if dt.kind != "u" else rng.integers(0, 3, edges)).astype(dt)
                for index_dtype in ("int32", "int64"):
                    src = rng.integers(0, 5, edges).astype(index_dtype)
                    dst = rng.integers(0, nodes, edges).astype(index_dtype)
                    rows = np.zeros(nodes, np.int8)
                    for entry in spmm:
                        for weight in (None, w):
                            out = np.full((nodes,) + feat, 7, dt)
                            args = [x, src, dst, rows] + ([] if weight is None else [weight]) + [out]
                            rc = self.message_call(entry, args)
                            want = self.message_oracle(entry, x, src, dst, rows, weight)
                            if rc != 0 or not self.same(out, want):
                                self.fail(f"{entry} {dtype} {index_dtype} E={edges} weighted={weight is not None}: "
                                          f"rc {rc} {self.last_error()[1]!r}")
                            if entry in ("GspmmMax", "GspmmMin") and rc == 0:
                                self.check_ties(x, src, dst, weight, out, rng)
                    v = x[rng.integers(0, 5, nodes)] if x.shape[0] else np.zeros((nodes,) + feat, dt)
                    for entry in sddmm:
                        out = np.zeros((edges,) if entry == "GsddmmDot" else (edges,) + feat, dt)
                        rc = self.message_call(entry, [x, v, src, dst, out])
                        want = self.message_oracle(entry, x, src, dst, v, None)
                        if rc != 0 or not self.same(out, want):
                            self.fail(f"{entry} {dtype} {index_dtype} E={edges}: rc {rc} {self.last_error()[1]!r}")
                    segment_ids = rng.integers(-1, nodes, 5).astype(index_dtype)
                    self.check_segment_arg(x, segment_ids, nodes)
                    self.check_segment_arg(x[:0], segment_ids[:0], nodes)
                    self.check_segment_softmax(x, segment_ids, nodes)
                    self.check_segment_reduce(x, segment_ids, nodes)
                    self.check_segment_reduce(x[:0], segment_ids[:0], nodes)
                    self.check_segment_csr(x, nodes, rng)
                    self.check_segment_softmax(x[:0], segment_ids[:0], nodes)
                    if dt.kind == "f" and edges == 13:
                        self.check_scatter_ties(dtype, index_dtype, rng)
        # errors: an id out of range (nothing written), bad argument counts and dtypes
        x, out = np.ones((3, 2), np.float32), np.full((4, 2), 5, np.float32)
        for src, dst, name in (([0, 3], [0, 1], "src"), ([0, 1], [0, -1], "dst"), ([0, 1], [4, 0], "dst")):
            rc = self.message_call("GspmmSum", [x, np.array(src, np.int32), np.array(dst, np.int64),
                                                np.zeros(4, np.int8), out])
            if rc != 2 or (out != 5).any() or f"each value of '{name}' must be in" not in self.last_error()[1]:
                self.fail(f"GspmmSum out of range ({name}): rc {rc} {self.last_error()[1]!r}")
        arg = np.full((4, 2), 5, np.int64)
        rc = self.message_call("SegmentArgMax", [x, np.array([0, 4, -1], np.int64), np.zeros(4, np.int8), arg])
        if rc != 2 or (arg != 5).any() or "must be < num_segments (4)" not in self.last_error()[1]:
            self.fail(f"SegmentArgMax out of range: rc {rc} {self.last_error()[1]!r}")
        if self.message_call("SegmentArgValues", [x, np.zeros(3, np.int32), np.full((4, 2), 4, np.int64), out]) == 0:
            self.fail("SegmentArgValues accepted an arg past E")
        rc = self.message_call("SegmentReduceMax", [x, np.array([0, 4, -1], np.int64), np.zeros(4, np.int8),
                                                    np.zeros(1, np.float32), out])
        if rc != 2 or (out != 5).any() or "must be < num_segments (4)" not in self.last_error()[1]:
            self.fail(f"SegmentReduceMax out of range: rc {rc} {self.last_error()[1]!r}")
        for indptr in ([1, 2, 3], [0, 2, 1, 3], [0, 1, 2], [0, 4, 3]):
            csr = np.full((len(indptr) - 1, 2), 5, np.float32)
            rc = self.message_call("SegmentCsrSum", [x, np.array(indptr, np.int64), np.zeros(1, np.float32), csr])
            if rc == 0 or (csr != 5).any() or "'indptr' must start at 0" not in self.last_error()[1]:
                self.fail(f"SegmentCsrSum accepted indptr {indptr}: rc {rc} {self.last_error()[1]!r}")
        soft = np.full((3, 2), 5, np.float32)
        rc = self.message_call("SegmentSoftmax", [x, np.array([0, -1, 4], np.int32), np.zeros(4, np.int8), soft])
        if rc != 2 or (soft != 5).any() or "must be < num_segments (4)" not in self.last_error()[1]:
            self.fail(f"SegmentSoftmax out of range: rc {rc} {self.last_error()[1]!r}")
        for entry, idx in (("ScatterGradGather", [[0], [3]]), ("ScatterTieGradX", [[0], [-1]]),
                           ("ScatterTieGradUpdates", [[3], [0]])):
            idx = np.array(idx, np.int64)
            result = np.full((2, 2) if entry != "ScatterTieGradX" else (3, 2), 5, np.float32)
            arrays = [x, idx, result] if entry == "ScatterGradGather" else [x, x, idx, x[:2], x[:2], result]
            rc = self.message_call(entry, arrays)
            if rc != 2 or (result != 5).any() or "must be in [0, 3)" not in self.last_error()[1]:
                self.fail(f"{entry} out of range: rc {rc} {self.last_error()[1]!r}")
        if self.message_call("ScatterTieGradX", [x.astype(np.int32), x.astype(np.int32), np.zeros((2, 1), np.int32),
                                                 np.zeros((2, 2), np.int32), np.zeros((2, 2), np.int32),
                                                 np.zeros((3, 2), np.int32)]) == 0:
            self.fail("ScatterTieGradX accepted an integer dtype")
        ids = np.zeros(2, np.int32)
        for entry, arrays in (("GspmmSum", [x, ids, ids, out]), ("GsddmmDot", [x, x, ids, ids]),
                              ("GspmmMax", [x, ids.astype(np.float32), ids, np.zeros(4, np.int8), out]),
                              ("GsddmmAdd", [x, x.astype(np.float64), ids, ids, np.zeros((2, 2), np.float32)])):
            if self.message_call(entry, arrays) == 0:
                self.fail(f"{entry} accepted bad arguments")
        # several threads: the same bits as one
        rng = self.rng("message-threads")
        nodes, edges = 2000, 60000
        x = rng.standard_normal((nodes, 5)).astype(np.float32)
        w = rng.standard_normal(edges).astype(np.float32)
        src = rng.integers(0, nodes, edges).astype(np.int64)
        dst = np.minimum(rng.zipf(1.5, edges) - 1, nodes - 1).astype(np.int32)
        results = []
        for threads in (1, 3):
            self.lib.ms_scatter_set_num_threads(threads)
            outs = []
            for entry in spmm:
                out = np.zeros((nodes, 5), np.float32)
                outs.append((self.message_call(entry, [x, src, dst, np.zeros(nodes, np.int8), w, out]), out))
            for entry in sddmm:
                out = np.zeros((edges,) if entry == "GsddmmDot" else (edges, 5), np.float32)
                outs.append((self.message_call(entry, [x, x, src, dst.astype(np.int64), out]), out))
            forward, dout = outs[2][1], x[:nodes][::-1].copy()
            for entry, shape in (("GspmmTieGrad", (nodes, 5)), ("GspmmTieGradWeight", (edges,))):
                out = np.zeros(shape, np.float32)
                outs.append((self.message_call(entry, [x, src, dst, forward, dout, w, out]), out))
            for entry in ("SegmentArgMax", "SegmentArgMin"):
                out = np.zeros((nodes, 5), np.int64)
                outs.append((self.message_call(entry, [x[src], dst, np.zeros(nodes, np.int8), out]), out))
            for reduce in ("Sum", "Mean", "Max", "Min", "Prod"):
                out = np.zeros((nodes, 5), np.float32)
                outs.append((self.message_call(f"SegmentReduce{reduce}", [x[src], dst, np.zeros(nodes, np.int8),
                                                                            np.ones(1, np.float32), out]), out))
            order = np.argsort(dst, kind="stable")
            indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=nodes))]).astype(np.int64)
            for reduce in ("Sum", "Max"):
                out = np.zeros((nodes, 5), np.float32)
                outs.append((self.message_call(f"SegmentCsr{reduce}", [x[src][order], indptr, np.ones(1, np.float32),
                                                                         out]), out))
            idx = dst.reshape(-1, 1)
            gathered = np.zeros((edges, 5), np.float32)
            outs.append((self.message_call("ScatterGradGather", [x, idx, gathered]), gathered))
            upd = x[src]
            for entry, shape in (("ScatterTieGradX", (nodes, 5)), ("ScatterTieGradUpdates", (edges, 5))):
                out = np.zeros(shape, np.float32)
                outs.append((self.message_call(entry, [forward, dout, idx, gathered, upd, out]), out))
            softmax = np.zeros((edges, 5), np.float32)
            outs.append((self.message_call("SegmentSoftmax", [x[src], dst, np.zeros(nodes, np.int8), softmax]),
                         softmax))
            out = np.zeros((edges, 5), np.float32)
            outs.append((self.message_call("SegmentSoftmaxGrad", [softmax, x[src], dst, np.zeros(nodes, np.int8), out]),
                         out))
            results.append(outs)
        self.lib.ms_scatter_set_num_threads(0)
        for (rc1, a), (rc3, b) in zip(*results):
            if rc1 or rc3 or not self.same(a, b):
                self.fail(f"message kernels differ between 1 and 3 threads (rc {rc1}, {rc3})")

    def run(self, sections=None):
        t0 = time.time()
        for name in sections or SECTIONS:
            before, t = self.calls, time.time()
            getattr(self, f"section_{name}")()
            print(f"  {name}: {self.calls - before} kernel calls, {time.time() - t:.1f} s", flush=True)
        if "mindspore" in sys.modules:
            self.fail("mindspore was imported by the driver")
        print(f"sanitize driver: {self.calls} kernel calls, {len(self.failures)} failures, "
              f"{time.time() - t0:.1f} s", flush=True)
        return 1 if self.failures else 0


def canary(kind, library):
    """Deliberate errors in a tiny instrumented library: proves the sanitizers are live."""
    lib = ctypes.CDLL(os.path.abspath(library))
    if kind == "asan":
        lib.canary_heap_overflow.restype = ctypes.c_int
        print("canary: heap overflow returned", lib.canary_heap_overflow(4), flush=True)
    else:
        lib.canary_signed_overflow.restype = ctypes.c_int
        print("canary: signed overflow returned", lib.canary_signed_overflow(2147483647), flush=True)
    return 0  # only reached if the sanitizer missed it


SECTIONS = ("oracle", "errors", "infer_shape", "threads", "concurrency", "shards", "message")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", help="the sanitized kernel library")
    parser.add_argument("--repo", default=REPO, help="source tree (ops/testing.py, infer/)")
    parser.add_argument("--canary", choices=("asan", "ubsan"))
    parser.add_argument("--canary-library")
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=SECTIONS,
                        help="the sections to run (default: all)")
    args = parser.parse_args()
    if args.canary:
        return canary(args.canary, args.canary_library)
    if not args.library or not os.path.exists(args.library):
        parser.error(f"no library at {args.library!r}")
    print(f"sanitize driver: {args.library}", flush=True)
    return Driver(args.library, args.repo).run(args.sections)


if __name__ == "__main__":
    sys.exit(main())
