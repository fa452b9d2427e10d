"""Build the CPU kernel library, one file per variant (kernels/cpu_variants.py), in parallel.

Used by setup.py (``pip install .``), by the tests (the aarch64 cross build) and from the
command line:

    python kernels/cpu/build_cpu.py OUTDIR [--variant NAME ...] [--native] [--cxx g++]
                                    [--arch x86_64|aarch64] [--jobs N]

Each variant is one g++ call (compile and link): -O3 with the variant's -march, libstdc++
linked statically with libgcc_s left dynamic, glibc symbols held at GLIBC_2.28 or older
(glibc_compat.cc) and only our entry points exported (a version script), so that a wheel
carrying the libraries needs nothing of the build machine: its CPU (the variants), its
libstdc++ or a newer glibc. OUTDIR gets libms_scatter_cpu.<variant>.so and
cpu_variants.json (what was built, best first).
"""
import argparse
import concurrent.futures
import importlib.util
import os
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.dirname(HERE)
SOURCES = (os.path.join(HERE, "scatter_cpu.cc"), os.path.join(HERE, "glibc_compat.cc"))
INCLUDE_DIR = os.path.join(KERNELS, "include")
HEADERS = tuple(sorted(os.path.join(d, f) for d in (HERE, os.path.join(INCLUDE_DIR, "ms_scatter"))
                       for f in os.listdir(d) if f.endswith(".h")))

# -ffp-contract=off: no a * b + c fused into one FMA where the variant has it (g++ fuses by
# default in C++), so that every variant and architecture gives the same bits.
FLAGS = ("-O3", "-std=c++17", "-fno-math-errno", "-ffp-contract=off", "-fvisibility=hidden",
         "-fvisibility-inlines-hidden", "-Wall", "-fPIC", "-shared")
# The glibc symbols glibc_compat.cc stands in for (see there why each).
GLIBC_WRAPPED = ("pthread_create", "pthread_join", "pthread_detach", "pthread_once", "pthread_key_create",
                 "__pthread_key_create", "pthread_key_delete", "pthread_getspecific", "pthread_setspecific",
                 "pthread_mutex_trylock", "__libc_single_threaded", "arc4random")
# What the library exports (a version script): the aot entries (Scatter*, TensorScatter*, UnsortedSegment*, Gspmm*, Gsddmm*, SegmentArg*,
# SegmentSoftmax*, SegmentReduce*, SegmentCsr*, with
# their InferShape / InferType) and ms_scatter_*; libstdc++'s own symbols stay inside.
VERSION_SCRIPT = os.path.join(HERE, "exports.map")


def _variants_module():
    spec = importlib.util.spec_from_file_location("ms_scatter_cpu_variants", os.path.join(KERNELS, "cpu_variants.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def target_of(cxx):
    """The compiler's target triple (g++ -dumpmachine), e.g. 'aarch64-linux-gnu'."""
    return subprocess.run(cxx + ["-dumpmachine"], check=True, capture_output=True, text=True).stdout.strip()


def platform_flags(triple):
    """Static libstdc++, dynamic libgcc_s; on glibc, the compat wraps; only our symbols out."""
    flags = ["-pthread", "-static-libstdc++", "-Wl,-z,defs", "-Wl,--exclude-libs,ALL", "-Wl,-O1"]
    if "linux-gnu" in triple:
        flags += ["-DMS_SCATTER_GLIBC_COMPAT"] + [f"-Wl,--wrap={s}" for s in GLIBC_WRAPPED]
    # The compiler's helper routines from the static libgcc.a ahead of libgcc_s: GCC 12 folds a
    # float comparison of two widened _Float16 values into a _Float16 one and calls __nehf2,
    # which libgcc_s has only at GCC_12.0.0 (a wheel needing it is manylinux_2_35). libgcc.a
    # holds no unwinder (that is libgcc_eh), so libgcc_s stays the only one.
    flags += ["-lgcc"]
    return flags


def command(cxx, triple, variant_flags, out, version_script, extra=()):
    return (list(cxx) + list(FLAGS) + list(variant_flags) + ["-I", INCLUDE_DIR] + list(SOURCES) + ["-o", out]
            + platform_flags(triple) + [f"-Wl,--version-script={version_script}"] + list(extra))


def _fresh(out, cmd, previous):
    """The library at `out` was built by this very command after every source last changed."""
    if previous.get(os.path.basename(out)) != cmd or not os.path.exists(out):
        return False
    built = os.path.getmtime(out)
    return all(os.path.getmtime(f) <= built for f in SOURCES + HEADERS + (VERSION_SCRIPT, __file__))


def build(out_dir, names=None, native=False, cxx=None, arch=None, extra=(), jobs=None, verbose=True, baseline=True):
    """Compiles the variants into out_dir (a variant whose library there was built by the same
    command after its sources last changed is kept) and writes its cpu_variants.json.
    Returns [(name, seconds)] and the wall time."""
    variants = _variants_module()
    cxx = shlex.split(cxx or os.environ.get("CXX") or "g++")
    triple = target_of(cxx)
    arch = arch or triple.split("-")[0]
    todo = variants.build_list(arch, names, native, baseline)
    os.makedirs(out_dir, exist_ok=True)
    previous = {v["file"]: v.get("command") for v in variants.read_manifest(out_dir)}
    jobs = jobs or max(1, min(len(todo), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                              else (os.cpu_count() or 1)))
    t0 = time.perf_counter()
    commands = {}

    def one(item):
        name, flags, _requires = item
        out = os.path.join(out_dir, variants.library_file(name))
        cmd = commands[name] = command(cxx, triple, flags, out, VERSION_SCRIPT, extra)
        if _fresh(out, cmd, previous):
            if verbose:
                print(f"ms_scatter: {out} is up to date", flush=True)
            return name, 0.0
        if verbose:
            print("ms_scatter: " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        start = time.perf_counter()
        tmp = out + ".tmp"  # a half-written library is never seen under its name
        proc = subprocess.run([tmp if c == out else c for c in cmd], capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"ms_scatter: building the {name} CPU library failed:\n{proc.stdout}{proc.stderr}")
        os.replace(tmp, out)
        if proc.stderr.strip() and verbose:
            print(proc.stderr, file=sys.stderr, flush=True)
        return name, time.perf_counter() - start

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        times = list(pool.map(one, todo))
    variants.write_manifest(out_dir, arch, todo, commands)
    wall = time.perf_counter() - t0
    if verbose:
        print(f"ms_scatter: CPU library variants {', '.join(n for n, _ in times)} ready in {wall:.0f} s "
              f"({jobs} at a time; each {', '.join(f'{t:.0f} s' for _, t in times)})", flush=True)
    return times, wall


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--variant", action="append", help="a variant to build (default: all of the architecture's)")
    p.add_argument("--native", action="store_true", help="add the -march=native variant")
    p.add_argument("--cxx", help="the C++ compiler (default $CXX or g++), e.g. aarch64-linux-gnu-g++")
    p.add_argument("--arch", help="the variants' architecture (default: the compiler's target)")
    p.add_argument("--jobs", type=int, help="compilers run at once (default: the CPUs, at most the variants)")
    p.add_argument("--extra", default="", help="extra compiler flags")
    args = p.parse_args(argv)
    build(args.out_dir, args.variant, args.native, args.cxx, args.arch, tuple(shlex.split(args.extra)), args.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
