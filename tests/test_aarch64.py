"""The CPU kernel library built for aarch64 (Ascend servers' Kunpeng hosts), run under qemu.

kernels/cpu/build_cpu.py cross-compiles the library with Debian's g++-aarch64-linux-gnu
(the armv8-a variant: float16 through the hardware conversions, fcvt and NEON's fcvtl /
fcvtn) and tests/kernel_driver.cc, a native caller of its entry points; the driver runs
under qemu-aarch64 (Debian's qemu-user) on the cases of tests/_sanitize_driver.py, and the
results are checked here against the numpy loop oracle by that driver's own checks: every
entry point (21 operators; token/return or tensor) x every value dtype, bfloat16 included,
x both index dtypes x its shape classes (empty, 0-d, zero-size, depth 0 .. rank), with and
without special values (NaN, inf, -0.0, extremes, subnormals), and the multi-thread path
at 1 and 2 threads. Both builds are kept in build/aarch64/ while the sources are
unchanged (a cold build takes ~30-40 s). Speed under emulation means nothing: not timed.

Skips, naming what is missing, without the cross compiler or qemu (.ci/run installs both:
apt-get install g++-aarch64-linux-gnu qemu-user).
"""
import importlib.util
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

from ms_scatter import infer

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUILD = os.path.join(REPO, "build", "aarch64")
CXX = "aarch64-linux-gnu-g++"
SYSROOT = "/usr/aarch64-linux-gnu"
DRIVER_SOURCE = os.path.join(HERE, "kernel_driver.cc")


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_cpu = _load("ms_scatter_build_cpu", os.path.join(REPO, "kernels", "cpu", "build_cpu.py"))
sanitize_driver = _load("ms_scatter_sanitize_driver", os.path.join(HERE, "_sanitize_driver.py"))


def _tools():
    cxx = shutil.which(CXX)
    qemu = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")
    missing = [what for what, found in ((f"{CXX} (apt-get install g++-aarch64-linux-gnu)", cxx),
                                        ("qemu-aarch64 (apt-get install qemu-user)", qemu),
                                        (f"{SYSROOT} (the cross toolchain's libraries)", os.path.isdir(SYSROOT)))
               if not found]
    if missing:
        pytest.skip("no aarch64 toolchain here: " + "; ".join(missing))
    return cxx, qemu


def _stale(target, sources):
    return not os.path.exists(target) or any(os.path.getmtime(s) > os.path.getmtime(target) for s in sources)


@pytest.fixture(scope="module")
def aarch64():
    """(qemu, library, driver), built in build/aarch64/ unless up to date."""
    cxx, qemu = _tools()
    library = os.path.join(BUILD, "libms_scatter_cpu.armv8-a.so")
    build_cpu.build(BUILD, cxx=cxx, verbose=False)  # kept while up to date
    driver = os.path.join(BUILD, "kernel_driver")
    if _stale(driver, (DRIVER_SOURCE,)):
        subprocess.run([cxx, "-O2", "-std=c++17", "-Wall", DRIVER_SOURCE, "-o", driver, "-ldl"], check=True)
    return qemu, library, driver


# ------------------------------------------------------------------ the case and result files

def _str(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def write_cases(path, calls):
    """calls: an iterable of (entry, threads, [arrays]), written one at a time in
    kernel_driver.cc's CASES format (the multi-thread cases hold tens of MB each); returns
    how many were written."""
    count = 0
    with open(path, "wb") as f:
        f.write(b"MSSCASE1" + struct.pack("<I", 0))
        for entry, threads, arrays in calls:
            f.write(_str(entry) + struct.pack("<iI", threads, len(arrays)))
            for a in arrays:
                f.write(_str(a.dtype.name) + struct.pack("<i", a.ndim) + struct.pack(f"<{a.ndim}q", *a.shape)
                        + struct.pack("<Q", a.nbytes) + a.tobytes())
            count += 1
        f.seek(8)
        f.write(struct.pack("<I", count))
    return count


class Results:
    """kernel_driver.cc's RESULTS, read one call at a time: next_call(x, out) ->
    (rc, message, inputs unchanged, x after the call, output)."""

    def __init__(self, path):
        self.f = open(path, "rb")
        assert self.f.read(8) == b"MSSRES1\0"
        (self.count,) = struct.unpack("<I", self.f.read(4))

    def _array(self, like):
        (nbytes,) = struct.unpack("<Q", self.f.read(8))
        return np.frombuffer(self.f.read(nbytes), like.dtype).reshape(like.shape)

    def next_call(self, x, out):
        rc, n = struct.unpack("<iI", self.f.read(8))
        message = self.f.read(n).decode("utf-8", "replace")
        unchanged = self.f.read(1) == b"\x01"
        return rc, message, unchanged, self._array(x), self._array(out)

    def os_threads(self):
        (threads,) = struct.unpack("<i", self.f.read(4))
        self.f.close()
        return threads


def _out(T, op, output, x):
    return np.zeros((1,), np.int32) if T.entry_name(op, output).endswith("_token") else np.zeros_like(x)


# ------------------------------------------------------------------ the test

def test_aarch64_library_matches_the_oracle_under_qemu(aarch64, tmp_path):
    qemu, library, driver_path = aarch64
    driver = sanitize_driver.Driver(None, REPO, value_dtypes=infer.VALUE_DTYPES)
    T = driver.T
    oracle = list(driver.oracle_cases())  # small; the multi-thread ones are made again to check them

    def calls():
        for op, output, x, i, u, _what in oracle:
            yield T.entry_name(op, output), -1, [x, i, u, _out(T, op, output, x)]
        for op, _dtype, _order, output, x, i, u in driver.thread_cases():
            for threads in (1, 2):
                yield T.entry_name(op, output), threads, [x, i, u, _out(T, op, output, x)]

    cases, results = tmp_path / "cases.bin", tmp_path / "results.bin"
    count = write_cases(cases, calls())
    proc = subprocess.run([qemu, "-L", SYSROOT, driver_path, library, str(cases), str(results)],
                          capture_output=True, text=True, timeout=1500, env=dict(os.environ, MS_SCATTER_QUIET="1"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    cases.unlink()
    got = Results(results)
    assert got.count == count
    codes = set()
    for op, output, x, i, u, what in oracle:
        rc, message, unchanged, x_after, out = got.next_call(x, _out(T, op, output, x))
        driver.verify(op, output, x, i, u, what, rc, x_after, out, message)
        if not unchanged:
            driver.fail(f"{what} {op}/{output}: indices or updates written")
        codes.add(rc)
    threaded = []
    for op, dtype, order, output, x, i, u in driver.thread_cases():
        seen = []
        for threads in (1, 2):
            rc, message, unchanged, x_after, out = got.next_call(x, _out(T, op, output, x))
            driver.verify(op, output, x, i, u, f"threads={threads} {order}", rc, x_after, out, message)
            if not unchanged:
                driver.fail(f"threads={threads} {op} {dtype} {order}: indices or updates written")
            seen.append(x_after.tobytes() + out.tobytes())
        if seen[0] != seen[1]:
            driver.fail(f"{op} {dtype} {order}: 1 and 2 threads give different bytes")
        threaded.append(dtype)
    os_threads = got.os_threads()
    assert not driver.failures, f"{len(driver.failures)} failures, first: " + "\n".join(driver.failures[:20])

    # what ran: every reduction x value dtype x index dtype, the errors, and the worker threads
    ran = {(op, str(x.dtype), str(i.dtype)) for op, _o, x, i, _u, _w in oracle}
    ops = [f + r for f in infer.FAMILIES for r in infer.REDUCTIONS]
    assert ran == {(op, d, i) for op in ops for d in infer.VALUE_DTYPES for i in infer.INDEX_DTYPES}
    assert codes == {0, 2, 3}, codes  # results, out-of-range indices, integer division by zero
    assert set(threaded) == set(infer.VALUE_DTYPES)
    assert os_threads > 1, f"no worker thread ran under qemu ({os_threads} OS thread)"
    print(f"aarch64 under qemu: {len(oracle)} oracle cases + {2 * len(threaded)} multi-thread calls "
          f"({len(threaded)} cases at 1 and 2 threads), {os_threads} OS threads in the driver")


def test_aarch64_library_uses_hardware_float16_conversions(aarch64):
    """fcvtl/fcvtn (NEON, 4 lanes) and scalar fcvt to and from half precision: the software
    conversion of half.h is not compiled in."""
    objdump = shutil.which("aarch64-linux-gnu-objdump")
    if objdump is None:
        pytest.skip("aarch64-linux-gnu-objdump not found (binutils-aarch64-linux-gnu)")
    text = subprocess.run([objdump, "-d", aarch64[1]], check=True, capture_output=True, text=True).stdout
    assert "fcvtl\tv" in text and "fcvtn\tv" in text, "no NEON float16 conversion"
    assert "fcvt\th" in text and "fcvt\ts" in text and ", h" in text  # scalar single <-> half


def test_aarch64_library_follows_the_scalar_rules_under_qemu(aarch64, tmp_path):
    """tests/cross_check_driver.cc (every engine path of the 16-bit floats and float32 against
    reducer.h's scalar rules, bit for bit) on the same armv8-a build."""
    qemu, library, _driver = aarch64
    cross_arch = _load("ms_scatter_test_cross_arch", os.path.join(HERE, "test_cross_arch.py"))
    driver = cross_arch.build_driver(shutil.which(CXX), tmp_path / "cross_check_driver")
    cross_arch.run_driver(driver, library, runner=(qemu, "-L", SYSROOT))
