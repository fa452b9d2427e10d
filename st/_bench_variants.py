"""``python -m st.bench --variants``: the kernel of each CPU library variant against native.

Every variant in the installed manifest that this CPU runs (kernels/cpu_variants.py) and a
``-march=native`` build (the installed one with MS_SCATTER_NATIVE=1, else built here by
kernels/cpu/build_cpu.py into build/bench_variants/, ~40 s once) are loaded side by side in
this process and their scatter_add kernels called directly (testing.KernelCall: ctypes, no
MindSpore) on the float32 and float16 medium and large workloads of st.bench. The variants
run interleaved repetition by repetition, on one shared 64-byte aligned buffer and at one
fixed thread count (--threads, default 1: the code's speed, not the thread rule's choice);
each figure is a median, and the ratio is the median over repetitions of
time(variant) / time(native) taken in the same repetition (1.00: as fast as native); "best"
is the ratio of the two fastest samples, the figure least moved by other processes' load.
"""
import os
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = ("medium", "large")
DTYPES = ("float32", "float16")
SAMPLE_S = 0.02  # calls per sample: enough to last about this long


def _load_build_cpu():
    import importlib.util  # pylint: disable=import-outside-toplevel
    spec = importlib.util.spec_from_file_location("ms_scatter_build_cpu", os.path.join(REPO, "kernels", "cpu",
                                                                                       "build_cpu.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def libraries(rebuild=False):
    """[(name, path)] best first, native first: the installed variants this CPU runs and native."""
    from ms_scatter import _lib  # pylint: disable=import-outside-toplevel
    from ms_scatter.kernels import cpu_variants  # pylint: disable=import-outside-toplevel
    built = cpu_variants.read_manifest(_lib.KERNEL_DIR)
    runs = set(cpu_variants.runnable(_lib.KERNEL_DIR))
    out = [(v["name"], os.path.join(_lib.KERNEL_DIR, v["file"])) for v in built if v["name"] in runs]
    if not any(name == cpu_variants.NATIVE for name, _ in out):
        where = os.path.join(REPO, "build", "bench_variants")
        path = os.path.join(where, cpu_variants.library_file(cpu_variants.NATIVE))
        if rebuild and os.path.exists(path):
            os.remove(path)
        print(f"the native variant in {where} (built unless up to date) ...", file=sys.stderr, flush=True)
        _load_build_cpu().build(where, names=[cpu_variants.NATIVE], verbose=False, baseline=False)
        out.insert(0, (cpu_variants.NATIVE + " (built here)", path))
    return out


def _sample(call, inner):
    t0 = time.perf_counter()
    for _ in range(inner):
        call()
    return (time.perf_counter() - t0) / inner


def time_case(libs, data, threads, reps):
    """{name: [seconds per call, one per repetition]} of scatter_add on one shared buffer."""
    import ctypes  # pylint: disable=import-outside-toplevel

    from ms_scatter.testing import KernelCall, kernel_library  # pylint: disable=import-outside-toplevel

    from ._bench_peers import aligned_copy  # pylint: disable=import-outside-toplevel
    buf = aligned_copy(data.x)
    calls = {}
    for name, path in libs:
        lib = kernel_library(path)
        lib.ms_scatter_set_num_threads.argtypes = [ctypes.c_int]
        lib.ms_scatter_set_num_threads(threads)
        call = KernelCall("ScatterAdd", buf, data.idx, data.upd, output="token", library=path)

        def run(call=call, name=name):
            rc = call.run()
            if rc:
                raise RuntimeError(f"{name}: ScatterAdd returned {rc}")
        calls[name] = run
    for run in calls.values():  # warm: pool threads started, pages touched, caches of this variant
        run()
        run()
    once = min(_sample(run, 1) for run in calls.values())
    inner = max(1, int(SAMPLE_S / max(once, 1e-7)))
    times = {name: [] for name in calls}
    names = list(calls)
    for rep in range(reps):
        order = names[rep % len(names):] + names[:rep % len(names)]  # rotate who goes first
        for name in order:
            time.sleep(0.002)
            times[name].append(_sample(calls[name], inner))
    return times, inner


def run(args):
    """Prints one table per dtype: per workload, each variant's median time and its ratio to native."""
    import ms_scatter  # pylint: disable=import-outside-toplevel

    from .bench import WORKLOAD_BY_NAME, machine_info, make_data  # pylint: disable=import-outside-toplevel
    libs = libraries(args.rebuild_native)
    mach = machine_info()
    print("ms_scatter CPU variants against native: scatter_add kernel called directly, float32/float16")
    print(f"machine: {mach.get('cpu')}, {mach.get('usable_cores')} usable cores, SIMD: {mach.get('simd', '?')}; "
          f"load average at start {mach.get('loadavg_start')}")
    print(f"threads: {args.threads} (fixed in every library); this process would load {ms_scatter.cpu_variant()}")
    for name, path in libs:
        print(f"  {name:<22} {path}")
    native = libs[0][0]
    results = {}
    for dtype in DTYPES:
        print(f"\n{dtype}: median ms per call; ratio = time / native's time in the same repetition "
              "(median over repetitions; 1.00 = as fast); b = ratio of the fastest samples")
        head = f"  {'workload':<34}" + "".join(f"{n.split(' ')[0]:>26}" for n, _ in libs)
        print(head)
        for wname in WORKLOADS:
            w = WORKLOAD_BY_NAME[wname]
            data = make_data(w, dtype, args.seed)
            reps = args.reps or (31 if not w.big else 11)
            t0 = time.perf_counter()
            times, inner = time_case(libs, data, args.threads, reps)
            base = np.array(times[native])
            cells = []
            for name, _ in libs:
                t = np.array(times[name])
                ratio, best = float(np.median(t / base)), float(t.min() / base.min())
                results[(dtype, wname, name)] = (float(np.median(t)), ratio, best)
                cells.append(f"{np.median(t) * 1e3:9.3f} ms {ratio:5.2f}x {best:5.2f}b")
            label = f"{wname} {w.rows}x{w.cols} <- {w.n} ({reps}x{inner})"
            print(f"  {label:<34}" + "".join(f"{c:>26}" for c in cells), flush=True)
            print(f"    ({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
            del data
    print("\nratio per variant (geometric mean over the four cases; median ratio, then fastest-sample ratio):")
    for name, _ in libs:
        r = [results[(d, w, name)][1] for d in DTYPES for w in WORKLOADS]
        b = [results[(d, w, name)][2] for d in DTYPES for w in WORKLOADS]
        print(f"  {name:<22} {float(np.exp(np.mean(np.log(r)))):.3f} (range {min(r):.2f}-{max(r):.2f})   "
              f"best {float(np.exp(np.mean(np.log(b)))):.3f} (range {min(b):.2f}-{max(b):.2f})")
    return results
