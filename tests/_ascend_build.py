"""Build and call the host build of the Ascend backend's CANN-free core (tests/ascend_core_driver.cc).

Used by tests/test_ascend_core.py (the core against the numpy oracle through ctypes) and by
st/test_ascend_emulated.py (the library's MsScatterNd<R> aot entries as the Ascend op, so that
the Ascend path's Python layer runs through MindSpore on CPU). No MindSpore import here.

The library goes to build/ascend_core/ under a name carrying the hash of the sources and the
command, so a later run reuses it while nothing changed (a cold build is ~7 s on 2 cores).
"""
import ctypes
import hashlib
import os
import shutil
import subprocess

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER = os.path.join(REPO, "tests", "ascend_core_driver.cc")
KERNEL_TU = os.path.join(REPO, "tests", "ascend_kernel_tu.cc")
STUB_DIR = os.path.join(REPO, "tests", "ascend_stub")
CORE = os.path.join(REPO, "kernels", "ascend", "scatter_core.h")
KERNEL_DIR = os.path.join(REPO, "kernels", "ascend", "op_kernel")
INCLUDE = os.path.join(REPO, "kernels", "include")
SOURCES = ([DRIVER, KERNEL_TU, CORE, os.path.join(KERNEL_DIR, "ms_scatter_kernel.h"),
            os.path.join(STUB_DIR, "kernel_operator.h")]
           + sorted(os.path.join(INCLUDE, "ms_scatter", f)
                    for f in os.listdir(os.path.join(INCLUDE, "ms_scatter")) if f.endswith(".h")))
FLAGS = ["-O1", "-std=c++17", "-fPIC", "-Wall", "-Wextra", "-Werror"]
# The kernel layer is compiled as AI core code (reducer.h / scatter_core.h take their device
# branches) against the stand-in kernel_operator.h.
KERNEL_FLAGS = ["-D__CCE_AICORE__=220", "-I", STUB_DIR, "-I", KERNEL_DIR]
BUILD_DIR = os.path.join(REPO, "build", "ascend_core")

# Tiling fields in the order of struct Tiling (kernels/ascend/scatter_core.h).
TILING_FIELDS = ("n", "depth", "slice", "rows", "check_zero", "cores", "col_groups", "cols_per_group",
                 "rows_per_group", "resident", "block_rows", "pitch", "acc_window", "upd_window", "idx_window",
                 "workspace_acc", "workspace_bytes")
MAX_DEPTH = 16
OK, BAD_ARGUMENTS, VIOLATION = 0, 1, 5
KERNEL_UB_KEPT = 8 * 1024  # op_host/ms_scatter_nd.cpp's kUbKept: UB the tiling leaves to Ascend C


def compiler():
    cxx = os.environ.get("CXX", "g++")
    return shutil.which(cxx)


def build(cxx=None):
    """Path of the built library (compiled unless an identical build exists)."""
    cxx = cxx or compiler()
    if not cxx:
        raise RuntimeError("no C++ compiler (g++, or $CXX) to build the Ascend core's host driver")
    includes = ["-I", INCLUDE, "-I", os.path.dirname(CORE)]
    kernel_cmd = [cxx] + FLAGS + KERNEL_FLAGS + includes + ["-c", KERNEL_TU]
    link_cmd = [cxx] + FLAGS + ["-shared"] + includes + [DRIVER]
    digest = hashlib.sha256(" ".join(kernel_cmd + link_cmd).encode())
    for path in SOURCES:
        with open(path, "rb") as f:
            digest.update(f.read())
    out = os.path.join(BUILD_DIR, f"libms_scatter_ascend_core_{digest.hexdigest()[:16]}.so")
    if os.path.exists(out):
        return out
    os.makedirs(BUILD_DIR, exist_ok=True)
    tmp = f"{out}.{os.getpid()}.tmp"
    obj = f"{tmp}.kernel.o"
    try:
        for cmd in (kernel_cmd + ["-o", obj], link_cmd + [obj, "-o", tmp]):
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"building the Ascend core driver failed: {' '.join(cmd)}\n"
                                   f"{proc.stdout}{proc.stderr}")
        os.replace(tmp, out)  # atomic: a concurrent run sees the old name or the whole library
    finally:
        for path in (obj, tmp):
            if os.path.exists(path):
                os.remove(path)
    return out


class Core:
    """ctypes wrapper of one built library."""

    def __init__(self, path):
        self.path = path
        self.lib = lib = ctypes.CDLL(path)
        i64p = ctypes.POINTER(ctypes.c_int64)
        for fn in (lib.mss_ascend_run, lib.mss_ascend_kernel_run):
            fn.restype = ctypes.c_int
            fn.argtypes = ([ctypes.c_char_p] * 3 + [ctypes.c_void_p] * 4 + [i64p] + [ctypes.c_int, i64p] * 3
                           + [ctypes.c_int64] * 4 + [i64p, i64p, ctypes.c_char_p, ctypes.c_int])
        lib.mss_last_error.restype = ctypes.c_int
        lib.mss_last_error.argtypes = [ctypes.c_char_p, ctypes.c_int]
        lib.mss_tiling_words.restype = ctypes.c_int64
        self.tiling_words = int(lib.mss_tiling_words())
        assert self.tiling_words == len(TILING_FIELDS) + 2 * MAX_DEPTH, "TILING_FIELDS out of date"

    def last_error(self):
        buf = ctypes.create_string_buffer(1024)
        self.lib.mss_last_error(buf, len(buf))
        return buf.value.decode()

    def run(self, reduction, x, indices, updates, cores=8, ub_bytes=4096, force_mode=0, order_seed=0, y_fill=None,
            kernel=False):
        """One call of the Ascend op (ScatterNd at depth indices.shape[-1]) on copies of the
        inputs: the core on host buffers, or with kernel=True the Ascend C kernel layer on the
        stand-in API. ub_bytes is what the tiling may use (the kernel's stand-in UB is that plus
        op_host's reserve). Returns (rc, y, status (4,), tiling dict, stats (cores run, GM<->UB
        moves; 0 for the kernel), problem)."""
        x = np.ascontiguousarray(x)
        indices = np.ascontiguousarray(indices)
        updates = np.ascontiguousarray(updates, dtype=x.dtype)
        y = np.empty_like(x)
        if y_fill is not None:
            y.fill(y_fill)
        status = np.full(4, -7, np.int64)
        tiling = np.zeros(self.tiling_words, np.int64)
        stats = np.zeros(2, np.int64)
        problem = ctypes.create_string_buffer(512)
        shapes = [np.asarray(a.shape if a.ndim else (1,), np.int64) for a in (x, indices, updates)]
        i64p = ctypes.POINTER(ctypes.c_int64)

        def ptr(a):
            return a.ctypes.data_as(i64p)

        fn = self.lib.mss_ascend_kernel_run if kernel else self.lib.mss_ascend_run
        rc = fn(
            reduction.encode(), x.dtype.name.encode(), indices.dtype.name.encode(),
            x.ctypes.data, indices.ctypes.data, updates.ctypes.data, y.ctypes.data, ptr(status),
            x.ndim, ptr(shapes[0]), indices.ndim, ptr(shapes[1]), updates.ndim, ptr(shapes[2]),
            cores, ub_bytes + (KERNEL_UB_KEPT if kernel else 0), force_mode, order_seed, ptr(tiling), ptr(stats),
            problem, len(problem))
        info = dict(zip(TILING_FIELDS, (int(v) for v in tiling[:len(TILING_FIELDS)])))
        return rc, y, status, info, (int(stats[0]), int(stats[1])), problem.value.decode()
