"""What compiling and starting cost (python -m st.bench_compile): ms_scatter against MindSpore's
built-ins, each number from a fresh process (MindSpore keeps compiled graphs per process).

* import: `import ms_scatter` after `import mindspore`, and the launcher
  (`python -m ms_scatter.patch SCRIPT`) against `python SCRIPT` for a script that imports
  mindspore;
* compile: the first call of a GRAPH Cell (in-place ScatterAdd and ScatterMax on two
  Parameters plus a TensorScatterMax) and of the gradient of a TensorScatterMax Cell
  (ms.grad), with ms_scatter's primitives and with MindSpore's; the second call beside it
  (the step itself).

Each figure is the median of --reps processes; the ratio is ours / built-in in the same run.
Issue #35's targets: the compile within 0.2 s of the built-ins', import and launcher within 0.2 s.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
N, F, E = 1000, 16, 4000


def child(case, impl):
    """One measurement in this process: prints 'first second' in seconds."""
    t0 = time.perf_counter()
    import mindspore as ms  # pylint: disable=import-outside-toplevel
    t1 = time.perf_counter()
    if case == "import":
        import ms_scatter  # pylint: disable=import-outside-toplevel,unused-import
        print(time.perf_counter() - t1, t1 - t0)
        return
    import numpy as np  # pylint: disable=import-outside-toplevel
    from mindspore import Parameter, Tensor, nn, ops  # pylint: disable=import-outside-toplevel
    import ms_scatter  # pylint: disable=import-outside-toplevel
    ms.set_context(mode=ms.GRAPH_MODE)
    lib = ms_scatter if impl == "ours" else ops
    rng = np.random.default_rng(0)
    i = Tensor(rng.integers(0, N, E).astype(np.int32))
    iv = i.reshape(E, 1)
    u = Tensor(rng.standard_normal((E, F)).astype(np.float32))
    x = Tensor(np.zeros((N, F), np.float32))

    class Step(nn.Cell):
        def __init__(self):
            super().__init__()
            self.p = Parameter(Tensor(np.zeros((N, F), np.float32)), name="p")
            self.q = Parameter(Tensor(np.zeros((N, F), np.float32)), name="q")
            self.add, self.max, self.ts = lib.ScatterAdd(), lib.ScatterMax(), lib.TensorScatterMax()

        def construct(self, i, iv, u, x):
            self.add(self.p, i, u)
            self.max(self.q, i, u)
            return self.ts(x, iv, u).sum()

    class Loss(nn.Cell):
        def __init__(self):
            super().__init__()
            self.ts = lib.TensorScatterMax()

        def construct(self, x, iv, u):
            return self.ts(x, iv, u).sum()

    if case == "forward":
        step, args = Step(), (i, iv, u, x)
    else:
        step, args = ms.grad(Loss(), grad_position=(0, 2)), (x, iv, u)
    times = []
    for _ in range(2):
        t = time.perf_counter()
        out = step(*args)
        (out[0] if isinstance(out, tuple) else out).asnumpy()
        times.append(time.perf_counter() - t)
    print(*times)


def _run(args, env=None):
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=REPO, timeout=600,
                          env=dict(os.environ, GLOG_v="3", **(env or {})))
    if proc.returncode != 0:
        raise RuntimeError(f"{args} failed:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return proc


def measure(case, impl, reps):
    values = []
    for _ in range(reps):
        out = _run(["-m", "st.bench_compile", "--child", case, impl]).stdout.split()
        values.append((float(out[0]), float(out[1])))
    return statistics.median(v[0] for v in values), statistics.median(v[1] for v in values)


def launcher(reps):
    """(plain, under the launcher, the median of the pairs' differences) in wall seconds, for a
    script that imports mindspore: 3 x reps pairs (a process start varies by tenths of a second)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "program.py")
        with open(script, "w", encoding="utf-8") as f:
            f.write("import mindspore\n")
        plain, patched = [], []
        for _ in range(3 * reps):
            for runs, args in ((plain, [script]), (patched, ["-m", "ms_scatter.patch", script])):
                t = time.perf_counter()
                _run(args)
                runs.append(time.perf_counter() - t)
    return (statistics.median(plain), statistics.median(patched),
            statistics.median(b - a for a, b in zip(plain, patched)))


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m st.bench_compile", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=3, help="processes per figure (median)")
    p.add_argument("--child", nargs=2, metavar=("CASE", "IMPL"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    print(f"load average at the start: {os.getloadavg()[0]:.2f}; {args.reps} processes per figure (median)")
    added, ms_import = measure("import", "ours", args.reps)
    print(f"import mindspore {ms_import:.2f} s; import ms_scatter after it: +{added:.3f} s")
    plain, patched, added = launcher(args.reps)
    print(f"script importing mindspore: python {plain:.2f} s, python -m ms_scatter.patch {patched:.2f} s "
          f"(+{added:.2f} s, median of the pairs)")
    print(f"{'GRAPH compile (first call)':34} {'ms_scatter':>11} {'built-in':>11} {'ours - built-in':>16} "
          f"{'step: ours':>11} {'built-in':>9}")
    for case, label in (("forward", "Cell: ScatterAdd+ScatterMax+TSMax"), ("grad", "ms.grad of a TensorScatterMax")):
        ours_first, ours_step = measure(case, "ours", args.reps)
        ms_first, ms_step = measure(case, "builtin", args.reps)
        print(f"{label:34} {ours_first * 1e3:9.0f} ms {ms_first * 1e3:8.0f} ms {(ours_first - ms_first) * 1e3:13.0f} ms"
              f" {ours_step * 1e3:8.1f} ms {ms_step * 1e3:6.1f} ms")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
