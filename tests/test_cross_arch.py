"""The CPU kernels as built for each instruction set they are written for, each run against
reducer.h's scalar rules (tests/cross_check_driver.cc: every engine path of the 16-bit floats
and float32, bit for bit).

* every x86-64 variant that `pip install .` built and this CPU runs (x86-64-v2: the scalar
  loops and software float16 conversions; -v3: F16C, AVX2; -v4: AVX-512), the installed
  libraries themselves, so that what users load is what is checked (only the driver is
  compiled here);
* aarch64 (NEON float16 widening) under qemu-aarch64: tests/test_aarch64.py, on its build.
"""
import os
import shutil
import subprocess

import pytest

from ms_scatter import _lib
from ms_scatter.kernels import cpu_variants

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRIVER = os.path.join(REPO, "tests", "cross_check_driver.cc")
FLAGS = ["-O2", "-std=c++17", "-Wall", "-Werror", "-I" + os.path.join(REPO, "kernels", "include")]
BUILT = {v["name"]: os.path.join(_lib.KERNEL_DIR, v["file"]) for v in cpu_variants.read_manifest(_lib.KERNEL_DIR)}
RUNNABLE = cpu_variants.runnable(_lib.KERNEL_DIR)


def build_driver(compiler, out):
    """The cross-check driver (no kernel source: it dlopens the library it checks)."""
    cmd = [compiler, *FLAGS, DRIVER, "-o", str(out), "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    return str(out)


def run_driver(driver, library, runner=()):
    proc = subprocess.run([*runner, driver, library], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, MS_SCATTER_QUIET="1"))
    assert proc.returncode == 0 and proc.stdout.startswith("ok "), proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if shutil.which("g++") is None:
        pytest.skip("no g++ to build the driver")
    return build_driver("g++", tmp_path_factory.mktemp("cross_check") / "cross_check_driver")


@pytest.mark.parametrize("level", ["x86-64-v2", "x86-64-v3", "x86-64-v4"])
def test_x86_levels(driver, level):
    if os.uname().machine != "x86_64":
        pytest.skip("an x86-64 host")
    if level not in BUILT:
        pytest.skip(f"{level} was not built (MS_SCATTER_CPU_VARIANTS)")
    if level not in RUNNABLE:
        pytest.skip(f"this CPU does not run {level}")
    run_driver(driver, BUILT[level])
