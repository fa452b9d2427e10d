"""The CPU kernels built for the other instruction sets they are written for, each run
against reducer.h's scalar rules (tests/cross_check_driver.cc: every engine path of the
16-bit floats and float32, bit for bit).

* x86-64-v2 (SSE4.2, no F16C, no AVX): the scalar loops and software float16 conversions;
* x86-64-v3 (AVX2, F16C): F16C conversions, no AVX-512;
* aarch64 (NEON float16 widening) under qemu-aarch64, where the cross compiler
  (aarch64-linux-gnu-g++) and the emulator are installed; skipped otherwise.

The native build (x86-64-v4 on the development machine) is what the other tests run.
"""
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["-O2", "-std=c++17", "-fno-math-errno", "-fvisibility=hidden", "-Wall", "-Werror", "-pthread",
         "-I" + os.path.join(REPO, "kernels", "include")]
SOURCE = os.path.join(REPO, "kernels", "cpu", "scatter_cpu.cc")
DRIVER = os.path.join(REPO, "tests", "cross_check_driver.cc")


def build_and_run(tmp_path, compiler, arch_flags, runner=()):
    lib, driver = str(tmp_path / "libms_scatter_cpu.so"), str(tmp_path / "cross_check_driver")
    for cmd in ([compiler, *FLAGS, *arch_flags, "-shared", "-fPIC", SOURCE, "-o", lib],
                [compiler, *FLAGS, *arch_flags, DRIVER, "-o", driver, "-ldl"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    proc = subprocess.run([*runner, driver, lib], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout.startswith("ok "), proc.stdout + proc.stderr


@pytest.mark.parametrize("level", ["x86-64-v2", "x86-64-v3"])
def test_x86_levels(tmp_path, level):
    if os.uname().machine != "x86_64" or shutil.which("g++") is None:
        pytest.skip("an x86-64 host with g++")
    build_and_run(tmp_path, "g++", [f"-march={level}"])


def test_aarch64_under_qemu(tmp_path):
    compiler, qemu = shutil.which("aarch64-linux-gnu-g++"), shutil.which("qemu-aarch64")
    sysroot = "/usr/aarch64-linux-gnu"
    if not compiler or not qemu or not os.path.isdir(sysroot):
        pytest.skip("aarch64-linux-gnu-g++ and qemu-aarch64 (with the aarch64 sysroot) are not installed")
    build_and_run(tmp_path, compiler, [], runner=(qemu, "-L", sysroot))
