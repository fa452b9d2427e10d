"""Build the CUDA kernel library libms_scatter_gpu.so with nvcc.

Usable from setup.py (import by file path, or as ms_scatter.kernels.gpu... if packaged),
from the tests, and from the command line:

    python kernels/gpu/build_gpu.py OUT.so [--arch 90 --arch 80 ...] [--nvcc PATH] [--no-ptx]

Nothing here needs a GPU: nvcc alone compiles the library. The library links the CUDA
runtime statically (nvcc's default), so it needs only the NVIDIA driver at run time (one
recent enough for the nvcc that built it), not a libcudart of a particular version; the
runtime's own symbols are kept out of the dynamic symbol table (--exclude-libs), so the
library exports exactly the aot entry points and ms_scatter_last_error.
"""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "scatter_gpu.cu")
INCLUDE_DIR = os.path.normpath(os.path.join(HERE, "..", "include"))
HEADERS = tuple(sorted(os.path.join(INCLUDE_DIR, "ms_scatter", f)
                       for f in os.listdir(os.path.join(INCLUDE_DIR, "ms_scatter")) if f.endswith(".h")))

# Turing .. Hopper as machine code, plus PTX of the newest so that later GPUs can JIT it.
# (nvcc 13 no longer targets anything older than sm_75; nvcc 11.8 is the first to know
# sm_89/sm_90; 11.1 .. 11.7 stop at sm_86.)
DEFAULT_ARCHS = ("75", "80", "86", "89", "90")


def default_archs(nvcc="nvcc"):
    """The architectures built when none are asked for: DEFAULT_ARCHS, plus sm_70 (Volta)
    with an nvcc older than 13 (as CUDA 11.8, which MindSpore 2.10's GPU build uses)."""
    return (("70",) if nvcc_version(nvcc)[0] < 13 else ()) + DEFAULT_ARCHS


def find_nvcc():
    """$MS_SCATTER_NVCC if set (empty: act as if there were no nvcc), else nvcc on PATH,
    else under $CUDA_HOME / $CUDA_PATH, else /usr/local/cuda; None if absent."""
    if "MS_SCATTER_NVCC" in os.environ:
        return os.environ["MS_SCATTER_NVCC"] or None
    found = shutil.which("nvcc")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            cand = os.path.join(root, "bin", "nvcc")
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
    return None


def nvcc_version(nvcc="nvcc"):
    """(major, minor) of an nvcc, e.g. (13, 0)."""
    out = subprocess.run([nvcc, "--version"], check=True, capture_output=True, text=True).stdout
    release = out.split("release ")[1].split(",")[0]
    major, minor = release.split(".")[:2]
    return int(major), int(minor)


def _arch_number(arch):
    """'sm_90', 'compute_90', '9.0', '90' or 90 -> '90'."""
    a = str(arch).lower()
    for prefix in ("sm_", "compute_"):
        if a.startswith(prefix):
            a = a[len(prefix):]
    a = a.replace(".", "")
    if not a[:2].isdigit():
        raise ValueError(f"not a CUDA architecture: {arch!r}")
    return a


def gencode_flags(archs=DEFAULT_ARCHS, ptx=True):
    nums = [_arch_number(a) for a in archs]
    if not nums:
        raise ValueError("no CUDA architecture given")
    flags = []
    for a in nums:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    if ptx:
        top = max(nums, key=lambda a: int("".join(c for c in a if c.isdigit())))
        flags += ["-gencode", f"arch=compute_{top},code=compute_{top}"]
    return flags


def command(out_path, nvcc="nvcc", archs=DEFAULT_ARCHS, extra_flags=(), ptx=True, threads=0, cudart="static"):
    """The nvcc command line that build() runs."""
    cmd = [nvcc, "-O3", "-std=c++17", "-shared",
           "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-Xcompiler", "-Wall",
           "-Xlinker", "--exclude-libs,ALL", "-cudart", cudart,
           "-I", INCLUDE_DIR]
    if threads is not None and len(archs) + int(ptx) > 1:
        cmd += ["--threads", str(threads)]  # compile the architectures in parallel (0: one job per CPU)
    cmd += gencode_flags(archs, ptx)
    cmd += list(extra_flags)
    cmd += [SOURCE, "-o", os.fspath(out_path)]
    return cmd


def build(out_path, nvcc="nvcc", archs=DEFAULT_ARCHS, extra_flags=(), ptx=True, threads=0, verbose=False,
          cudart="static"):
    """Compile kernels/gpu/scatter_gpu.cu (+ kernels/include) into the shared library
    `out_path` and return its path. Raises RuntimeError with nvcc's output on failure.

    archs: compute capabilities ('90', 'sm_90', 90, ...); machine code for each, plus PTX
    of the newest when `ptx`. extra_flags: appended to nvcc's command line (e.g.
    ['-Werror', 'all-warnings', '-Xcompiler', '-Werror'], or '-allow-unsupported-compiler'
    for an old nvcc with a newer gcc). cudart: 'static' (default: the library then needs
    only a driver recent enough for this nvcc) or 'shared' (needs that major version's
    libcudart.so at run time, e.g. MindSpore's CUDA 11 one)."""
    out_path = os.path.abspath(os.fspath(out_path))
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    cmd = command(out_path, nvcc, archs, extra_flags, ptx, threads, cudart)
    if verbose:
        print("+ " + " ".join(cmd), flush=True)
    tmp = out_path + ".tmp"
    cmd[-1] = tmp  # write next to the target, then rename: a half-written library is never seen
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise RuntimeError(f"nvcc failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    os.replace(tmp, out_path)
    if verbose:
        if proc.stdout or proc.stderr:
            print(proc.stdout + proc.stderr, end="", flush=True)
        print(f"built {out_path} in {time.perf_counter() - t0:.1f} s", flush=True)
    build.last_output = proc.stdout + proc.stderr  # compiler warnings, if any
    return out_path


build.last_output = ""


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="path of the shared library to write")
    ap.add_argument("--arch", action="append", help="compute capability, repeatable (default: %s, "
                    "and 70 with nvcc < 13)" % " ".join(DEFAULT_ARCHS))
    ap.add_argument("--nvcc", default=None, help="nvcc to use (default: found on PATH / CUDA_HOME)")
    ap.add_argument("--no-ptx", action="store_true", help="no PTX of the newest architecture")
    ap.add_argument("--flag", action="append", default=[], help="extra nvcc flag, repeatable")
    ap.add_argument("--cudart", default="static", choices=("static", "shared"))
    args = ap.parse_args(argv)
    nvcc = args.nvcc or find_nvcc()
    if not nvcc:
        print("nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)", file=sys.stderr)
        return 2
    build(args.out, nvcc, tuple(args.arch or default_archs(nvcc)), tuple(args.flag), not args.no_ptx, verbose=True,
          cudart=args.cudart)
    return 0


if __name__ == "__main__":
    sys.exit(main())
