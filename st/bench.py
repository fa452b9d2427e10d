"""Benchmark of ms_scatter against MindSpore's built-in scatter kernels and peers.

    python -m st.bench                 # everything (~10-15 min on 2 cores)
    python -m st.bench --quick         # small and medium workloads, fewer reps (~1-2 min)
    python -m st.bench --only embedding --ops scatter_add --dtypes float32
    python -m st.bench --chart bench.png --json bench.json
    python -m st.bench --variants      # each CPU library variant's kernel against -march=native (~1-2 min)

Speed is shown as ratios against anchors measured in the same run (the built-in kernels,
numpy, PyTorch, JAX and a memory-copy probe), never asserted. All implementations of
one case run interleaved, repetition by repetition, and each figure is a median.

Implementations (columns):

  kernel   ms_scatter's kernel called directly on numpy buffers (testing.KernelCall:
           ctypes, no copies, no framework) - the kernel's own time
  kern-1t  the same on one thread (shown when the library has a thread pool with more)
  kern-16  the kernel on input_x's buffer 16 bytes further on (the same allocation: the
           same pages) with indices and updates also 16 bytes off a line, as MindSpore's
           CPU tensors are placed: what that alignment costs the same kernel
  ours-py  ms_scatter primitive in PYNATIVE_MODE (the call waits for its kernel)
  ours-gP  ms_scatter primitive in a GRAPH_MODE Cell (in place: runs the functional
           form, O(updates))
  ours-gF  ms_scatter functional form in a GRAPH_MODE Cell (in place, O(updates))
  cell-0   the GRAPH_MODE Cell of ours-gF with no op in place of the scatter (the Cell
           call's own cost: inputs, Parameter, output)
  cell-e   the same Cell running ours-gF on empty indices and updates (the cost of our
           graph nodes and MindSpore's launch of an aot Custom kernel, without the work)
  ms-py    MindSpore's built-in (ops.ScatterAdd / ops.ScatterMin / ops.tensor_scatter_max)
           in PYNATIVE_MODE, followed by a sync
  ms-g     the same built-in in a GRAPH_MODE Cell
  numpy    np.add.at / np.minimum.at / np.maximum.at (skipped if > ~2 s per call)
  torch    index_add_ / scatter_reduce_('amin') / scatter_reduce('amax') (CPU, eager)
  jax      jitted x.at[i].add/min/max, block_until_ready (x donated for the in-place ops)
  copy     numpy copy of the byte count the scatter must touch (bandwidth probe)
  rmw      the access probe: the kernel's own traffic without the reduction (the CPU
           library's ms_scatter_probe_rmw: indices read and checked, each update row XORed
           into its destination row in index order, in the engine's loop, on the thread count
           the kernel ran on; tensor_scatter_max: input_x copied first), the limit of the
           access pattern

Bytes a scatter must touch: updates + indices + 2 x (distinct destination rows) for the
in-place ops (each such row read and written), updates + indices + 2 x input_x for
tensor_scatter_max (input_x read, the output written). "GB/s" = those bytes / time.
"""
import argparse
import faulthandler
import gc
import json
import math
import os
import platform
import resource
import sys
import time
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np

from . import _bench_peers as peers
from ._bench_peers import Skip, aligned_copy

# ---------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    name: str
    rows: int
    cols: int
    n: int
    pattern: str      # uniform | sorted | few
    big: bool         # skipped by --quick
    budget_s: float   # time for the timed repetitions of one case (full run)
    max_reps: int
    about: str


WORKLOADS = [
    Workload("tiny", 64, 8, 16, "uniform", False, 1.5, 40, "per-call latency"),
    Workload("medium", 16384, 64, 16384, "uniform", False, 3.0, 25, "4 MiB of updates"),
    Workload("few-rows", 16384, 64, 16384, "few", False, 3.0, 25, "16384 updates on 16 rows"),
    Workload("embedding", 1_000_000, 64, 1024, "uniform", False, 4.0, 15, "1024 rows of a 1e6-row table"),
    Workload("large", 1_000_000, 64, 1_000_000, "uniform", True, 6.0, 5, "1e6 random rows of a 1e6-row table"),
    Workload("graph", 100_000, 128, 1_000_000, "uniform", True, 6.0, 5, "1e6 edges onto 1e5 nodes, unsorted"),
    Workload("graph-sorted", 100_000, 128, 1_000_000, "sorted", True, 6.0, 5, "the same edges sorted by node"),
]
WORKLOAD_BY_NAME = {w.name: w for w in WORKLOADS}
OPS = ("scatter_add", "scatter_min", "tensor_scatter_max")
DTYPES = ("float32", "float16", "bfloat16")
OURS_PRIM = {"scatter_add": "ScatterAdd", "scatter_min": "ScatterMin", "tensor_scatter_max": "TensorScatterMax"}

IMPLS = [  # (column, mode it runs in: None = no MindSpore, "py" or "graph")
    ("kernel", None), ("kern-1t", None), ("kern-16", None), ("ours-py", "py"), ("ours-gP", "graph"),
    ("ours-gF", "graph"), ("cell-0", "graph"), ("cell-e", "graph"),
    ("ms-py", "py"), ("ms-g", "graph"), ("numpy", None), ("torch", None), ("jax", None), ("copy", None),
    ("rmw", None),
]
IMPL_NAMES = [name for name, _ in IMPLS]
IMPL_MODE = dict(IMPLS)


@dataclass
class Data:
    """Seeded (x, indices, updates) of one workload and dtype, shared by its three ops."""
    workload: Workload
    dtype: str
    x: np.ndarray
    idx: np.ndarray      # (n,) int32 row indices
    upd: np.ndarray      # (n, cols)
    unique_rows: int


def make_data(w, dtype, seed):
    rng = np.random.default_rng([seed, zlib.crc32(w.name.encode()), zlib.crc32(dtype.encode())])
    from ms_scatter.testing import np_dtype
    dtype_np = np_dtype(dtype)
    x = (rng.standard_normal((w.rows, w.cols), dtype=np.float32) * 4).astype(dtype_np)
    if w.pattern == "few":
        rows = rng.choice(w.rows, size=16, replace=False)
        idx = rows[rng.integers(0, rows.size, size=w.n)]
    else:
        idx = rng.integers(0, w.rows, size=w.n)
        if w.pattern == "sorted":
            idx.sort()
    idx = idx.astype(np.int32)
    upd = (rng.standard_normal((w.n, w.cols), dtype=np.float32) * 4).astype(dtype_np)
    unique_rows = int(np.unique(idx).size)
    return Data(w, dtype, aligned_copy(x), aligned_copy(idx), aligned_copy(upd), unique_rows)


@dataclass
class Case:
    """One (op, dtype, workload): the data the implementations run on."""
    op: str
    data: Data
    _ms: dict = field(default_factory=dict)
    _kernel: dict = field(default_factory=dict)  # the allocation kernel, kern-1t and kern-16 share

    workload = property(lambda self: self.data.workload)
    dtype = property(lambda self: self.data.dtype)
    x = property(lambda self: self.data.x)
    idx = property(lambda self: self.data.idx)
    upd = property(lambda self: self.data.upd)
    n = property(lambda self: self.data.workload.n)
    rows = property(lambda self: self.data.workload.rows)
    cols = property(lambda self: self.data.workload.cols)

    @property
    def idx2(self):
        """(n, 1) indices for tensor_scatter_max (depth 1: whole rows)."""
        return self.idx.reshape(-1, 1)

    @property
    def in_place(self):
        return self.op != "tensor_scatter_max"

    @property
    def bytes(self):
        item = self.x.dtype.itemsize
        moved = self.upd.nbytes + self.idx.nbytes
        if self.in_place:
            return moved + 2 * self.data.unique_rows * self.cols * item
        return moved + 2 * self.x.nbytes

    def ms_inputs(self):
        """MindSpore Tensors of the indices and updates (and x for the out-of-place op),
        shared by the MindSpore implementations of this case."""
        if not self._ms:
            from mindspore import Tensor
            self._ms["i"] = Tensor(self.idx2 if not self.in_place else self.idx)
            self._ms["u"] = Tensor(self.upd)
            if not self.in_place:
                self._ms["x"] = Tensor(self.x)
        return self._ms


# ---------------------------------------------------------------- MindSpore implementations

_ms = None


def ms_modules():
    """(mindspore, ops, nn, Parameter, Tensor, sync, ms_scatter), imported once."""
    global _ms
    if _ms is None:
        import mindspore as ms
        from mindspore import Parameter, Tensor, nn, ops
        from ms_scatter._compat import _pynative_executor

        import ms_scatter
        _ms = (ms, ops, nn, Parameter, Tensor, _pynative_executor.sync, ms_scatter)
    return _ms


_cells = None


def _cell_classes():
    global _cells
    if _cells is None:
        _, ops, nn, Parameter, Tensor, _, _ = ms_modules()

        class InPlaceNet(nn.Cell):
            """Holds the Parameter; the scatter's result is discarded (the Parameter is
            updated in place); returns the indices, a small value."""

            def __init__(self, fn, x, name):
                super().__init__()
                self.fn = fn
                self.p = Parameter(Tensor(x), name=name)

            def construct(self, i, u):
                self.fn(self.p, i, u)
                return i

        class OutOfPlaceNet(nn.Cell):
            """Out-of-place scatter; the result is kept alive by a Depend (a graph drops an
            unused pure node) and only the indices are returned."""

            def __init__(self, fn):
                super().__init__()
                self.fn = fn

            def construct(self, x, i, u):
                y = self.fn(x, i, u)
                return ops.depend(i, y)

        _cells = (InPlaceNet, OutOfPlaceNet)
    return _cells


def _trivial(x, i, u):
    """cell-0's op: nothing to compute (the Cell still takes the same inputs and Parameter)."""
    return x


def _builtin(op):
    _, ops, *_ = ms_modules()
    if op == "scatter_add":
        return ops.ScatterAdd()
    if op == "scatter_min":
        return ops.ScatterMin()
    return ops.tensor_scatter_max


def _ours(op, kind):
    ms_scatter = ms_modules()[-1]
    return getattr(ms_scatter, OURS_PRIM[op])() if kind == "primitive" else getattr(ms_scatter, op)


def _thread_control():
    """(get, set) of the kernel library's thread count, or None (a build without a pool)."""
    import ctypes

    from ms_scatter.testing import kernel_library
    lib = kernel_library()
    try:
        get, put = lib.ms_scatter_num_threads, lib.ms_scatter_set_num_threads
    except AttributeError:
        return None
    get.restype, get.argtypes = ctypes.c_int, []
    put.restype, put.argtypes = None, [ctypes.c_int]
    return get, put


def _last_threads():
    """Threads the kernel library's last call ran on (None: a library without the export)."""
    import ctypes

    from ms_scatter.testing import kernel_library
    fn = getattr(kernel_library(), "ms_scatter_last_threads", None)
    if fn is None:
        return None
    fn.restype = ctypes.c_int
    return fn()


def _settle_thread_rule(run):
    """Calls `run` until the automatic thread rule has decided every kind of work it is
    trying (its first calls of a kind try each count, kernels/cpu/thread_rule.h), so that
    the timed samples see the chosen count; at most 4 calls per candidate count."""
    cores = max(1, os.cpu_count() or 1)
    limit = 4 * (cores.bit_length() + 1)
    for _ in range(limit):
        run()
        if not any(r["threads"] == 0 for r in ms_modules()[6].thread_choices()):
            return


MISALIGN = 16  # bytes past a 64-byte line: where MindSpore 2.10 places CPU tensors (16, 32 or 48)


def kernel_buffer(case, offset=0):
    """The buffer the kernel writes (x updated in place, or the output), `offset` bytes past a
    64-byte line. kernel, kern-1t and kern-16 share one allocation, so that their ratios
    compare thread counts and alignments, not two placements of the same bytes: two copies
    of 1e6 x 64 float32 ran one thread 0.89-1.04x apart."""
    if "raw" not in case._kernel:
        raw = np.empty(case.x.nbytes + 64 + MISALIGN, np.uint8)
        case._kernel["raw"] = raw
        case._kernel["start"] = (-raw.ctypes.data) % 64
    raw, start = case._kernel["raw"], case._kernel["start"] + offset
    buf = raw[start:start + case.x.nbytes].view(case.x.dtype).reshape(case.x.shape)
    buf[...] = case.x
    return buf


def _offset_copy(a, offset):
    raw = np.empty(a.nbytes + 64 + offset, np.uint8)
    start = (-raw.ctypes.data) % 64 + offset
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def kernel_arrays(case, offset=0):
    """(x, indices, updates, out) of a direct kernel call, the buffers `offset` bytes off a line."""
    buf = kernel_buffer(case, offset)
    idx = case.idx if case.in_place else case.idx2
    upd = case.upd
    if offset:
        idx, upd = _offset_copy(idx, offset), _offset_copy(upd, offset)
    if case.in_place:
        return buf, idx, upd, None
    return (_offset_copy(case.x, offset) if offset else case.x), idx, upd, buf


def make_kernel(case, threads=None, offset=0):
    """The kernel called directly. `threads`: run it on that many threads (the library's
    setting is changed around each sample and restored); `offset`: on buffers that many
    bytes past a 64-byte line."""
    from ms_scatter.testing import KernelCall
    control = None
    if threads is not None:
        control = _thread_control()
        if control is None:
            raise Skip("kern-1t: this kernel library has no thread control (single-threaded build)")
        if control[0]() == threads:
            raise Skip(f"kern-1t: the kernel already runs on {threads} thread(s)")
    x, idx, upd, out = kernel_arrays(case, offset)
    if case.in_place:
        call = KernelCall(OURS_PRIM[case.op], x, idx, upd, output="token")
    else:
        call = KernelCall(OURS_PRIM[case.op], x, idx, upd, out=out)

    def run():
        rc = call.run()
        if rc:
            raise RuntimeError(f"kernel {call.entry} returned {rc}")
    if threads is None:
        _settle_thread_rule(run)
        run()  # (the call that completed the rule's trials may have run a count it did not choose)
        run.threads = _last_threads()  # what the automatic rule runs this case on
    if control is not None:
        get, put = control
        saved = []

        def enter():
            saved.append(get())
            put(threads)

        def leave():
            put(saved.pop())
        run.enter, run.leave = enter, leave
    return run


def _pynative(case, fn, name):
    ms, _, _, Parameter, Tensor, sync, _ = ms_modules()
    t = case.ms_inputs()
    if case.in_place:
        p = Parameter(Tensor(case.x), name=name)
        i, u = t["i"], t["u"]

        def run():
            fn(p, i, u)
            sync()
    else:
        x, i, u = t["x"], t["i"], t["u"]

        def run():
            fn(x, i, u)
            sync()
    return run


def _graph(case, fn, name, empty=False):
    sync = ms_modules()[5]
    Tensor = ms_modules()[4]
    InPlaceNet, OutOfPlaceNet = _cell_classes()
    t = case.ms_inputs()
    i, u = t["i"], t["u"]
    if empty:  # no index vector: the same graph, no work
        i = Tensor(case.idx[:0] if case.in_place else case.idx2[:0])
        u = Tensor(case.upd[:0])
    if case.in_place:
        net = InPlaceNet(fn, case.x, name)

        def run():
            net(i, u)
            sync()
    else:
        net = OutOfPlaceNet(fn)
        x = t["x"]

        def run():
            net(x, i, u)
            sync()
    return run


def print_thread_choices(choices):
    """What the automatic thread rule chose in this run, per kind of work."""
    if not choices:
        print("\nthread rule: nothing learnt (no call large enough to split, one core, or MS_SCATTER_THREAD_RULE=fixed)")
        return
    print("\nthread rule (automatic setting, learnt from the first calls of each kind of work):")
    print(f"  {'kind':<26}{'elem B':>7}{'log2 work':>10}{'log2 span':>10}{'cores':>6}{'threads':>8}{'ns/1k':>8}")
    for r in choices:
        print(f"  {r['kind']:<26}{r['element_bytes']:>7}{r['work_log2']:>10}{r['span_log2']:>10}{r['cores']:>6}"
              f"{r['threads'] or '-':>8}{r['ns_per_kunit']:>8}")


def make_impl(name, case, args):
    if name == "kernel":
        return make_kernel(case)
    if name == "kern-1t":
        return make_kernel(case, threads=1)
    if name == "kern-16":
        return make_kernel(case, offset=MISALIGN)
    if name == "ours-py":
        return _pynative(case, _ours(case.op, "primitive"), "bench_ours_py")
    if name == "ours-gP":
        return _graph(case, _ours(case.op, "primitive"), "bench_ours_gp")
    if name == "ours-gF":
        return _graph(case, _ours(case.op, "function"), "bench_ours_gf")
    if name == "cell-0":
        return _graph(case, _trivial, "bench_cell0")
    if name == "cell-e":
        return _graph(case, _ours(case.op, "function"), "bench_celle", empty=True)
    if name == "ms-py":
        if case.dtype == "bfloat16":
            raise Skip("ms-py: MindSpore's CPU scatter kernels refuse bfloat16")
        return _pynative(case, _builtin(case.op), "bench_ms_py")
    if name == "ms-g":
        if case.dtype == "bfloat16":
            raise Skip("ms-g: MindSpore's CPU scatter kernels refuse bfloat16")
        return _graph(case, _builtin(case.op), "bench_ms_g")
    if name == "numpy":
        return peers.numpy_maker(case, args.numpy_limit)
    if name == "torch":
        if args.no_peers:
            raise Skip("--no-peers")
        return peers.torch_maker(case)
    if name == "jax":
        if args.no_peers:
            raise Skip("--no-peers")
        return peers.jax_maker(case)
    if name == "copy":
        return peers.copy_maker(case)
    if name == "rmw":
        return peers.rmw_maker(case, kernel_arrays(case))
    raise ValueError(name)


def set_mode(mode):
    ms = ms_modules()[0]
    ms.set_context(mode=ms.GRAPH_MODE if mode == "graph" else ms.PYNATIVE_MODE)


# ---------------------------------------------------------------- correctness guard

def check_kernel(case):
    """The kernel's result on this case against the numpy loop oracle (small cases only):
    the speed of a wrong answer means nothing. Returns None (not checked), True or False."""
    if case.n * case.cols > (1 << 20):
        return None
    from ms_scatter.testing import call_kernel, oracle
    op = OURS_PRIM[case.op]
    idx = case.idx if case.in_place else case.idx2
    rc, x_after, out = call_kernel(op, case.x, idx, case.upd)
    got = x_after if case.in_place else out
    want = oracle(op, case.x, idx, case.upd)
    if got.dtype.name == "bfloat16":  # exact in float32
        got, want = got.astype(np.float32), want.astype(np.float32)
    return rc == 0 and np.array_equal(got, want, equal_nan=True)


# ---------------------------------------------------------------- timing

def _sample(fn, inner):
    enter = getattr(fn, "enter", None)
    if enter:
        enter()
    try:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - t0) / inner
    finally:
        if enter:
            fn.leave()


ESTIMATE_S = 0.05


def _estimate(fn, budget):
    """Steady per-call time: calls for `budget` seconds (one if a call takes longer), the
    median of the second half. The first calls can be far slower than the rest (MindSpore's
    PYNATIVE: 0.2-1 ms for the first calls on a Parameter or after a pause, 22-45 us per
    call in a loop), and the estimate sets the calls per sample."""
    times = []
    start = time.perf_counter()
    while True:
        times.append(_sample(fn, 1))
        if time.perf_counter() - start >= budget or len(times) >= 2000:
            break
    tail = sorted(times[len(times) // 2:])
    return tail[len(tail) // 2]


def run_case(case, args):
    """Time every implementation of one case, interleaved. Returns {name: result}."""
    w = case.workload
    results = {}
    runners = {}
    t_setup = time.perf_counter()
    for name in args.impls:
        try:
            runners[name] = make_impl(name, case, args)
        except Skip as s:
            results[name] = {"skipped": str(s)}
        except Exception as err:  # an implementation that cannot be built is reported, not fatal
            results[name] = {"skipped": f"{name}: {type(err).__name__}: {_first_line(err)}"}
    groups = [("py", [n for n in runners if IMPL_MODE[n] in (None, "py")]),
              ("graph", [n for n in runners if IMPL_MODE[n] == "graph"])]
    # Warm-up: the first call (graph compile, jit, page faults), then the per-call estimate
    # (_estimate) that sets the number of calls per sample.
    est = {}
    t_warm = time.perf_counter()
    for mode, names in groups:
        if not names:
            continue
        set_mode(mode)
        for name in names:
            try:
                _sample(runners[name], 1)
                est[name] = max(_estimate(runners[name], ESTIMATE_S), 1e-7)
            except Exception as err:
                results[name] = {"skipped": f"{name}: {type(err).__name__}: {_first_line(err)}"}
                del runners[name]
    groups = [(mode, [n for n in names if n in runners]) for mode, names in groups]
    target = args.sample_s
    inner = {n: max(1, min(int(target / est[n]), 5000)) for n in runners}
    per_rep = sum(inner[n] * est[n] + args.settle for n in runners) or 1e-3
    budget = w.budget_s * args.budget_scale
    if args.reps:
        reps = args.reps
    else:
        max_reps = max(3, int(w.max_reps * (0.3 if args.quick else 1)))
        reps = max(3, min(max_reps, int(budget / per_rep)))
    samples = {n: [] for n in runners}
    t_timed = time.perf_counter()
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for rep in range(reps):
            order = groups if rep % 2 == 0 else groups[::-1]
            for mode, names in order:
                if not names:
                    continue
                set_mode(mode)
                k = rep % len(names)
                for name in names[k:] + names[:k]:
                    if name not in runners:
                        continue
                    if args.settle:
                        time.sleep(args.settle)  # let the previous runtime's spinning threads go idle
                    try:
                        samples[name].append(_sample(runners[name], inner[name]))
                    except Exception as err:  # reported in its column; the others go on
                        results[name] = {"skipped": f"{name} failed while timed: {type(err).__name__}: "
                                                    f"{_first_line(err)}"}
                        del runners[name]
    finally:
        if gc_was:
            gc.enable()
    for name in runners:
        med = float(np.median(samples[name]))
        q1, q3 = np.percentile(samples[name], [25, 75])
        results[name] = {
            "median_ms": med * 1e3,
            "spread": float((q3 - q1) / med) if med > 0 else 0.0,  # interquartile range / median
            "samples_ms": [s * 1e3 for s in samples[name]],
            "calls_per_sample": inner[name],
            "gbps": case.bytes / med / 1e9,
            "threads": getattr(runners[name], "threads", None),  # the kernel's and the access probe's
        }
    t_end = time.perf_counter()
    runners.clear()
    case._ms.clear()
    gc.collect()
    phases = {"setup_s": t_warm - t_setup, "warmup_s": t_timed - t_warm, "timed_s": t_end - t_timed}
    return results, reps, phases


def _first_line(err):
    text = str(err).strip().splitlines()
    return text[0][:160] if text else ""


# ---------------------------------------------------------------- ratios and tables

RATIOS = [  # (key, header group, column, numerator, denominator); >1 means ours is faster
    ("ms/kernel", "built-in/ours", "kern", "ms-best", "kernel"),
    ("ms/py", "built-in/ours", "py", "ms-py", "ours-py"),
    ("ms/graph", "built-in/ours", "graph", "ms-g", "ours-gF"),
    ("torch/kernel", "torch/ours", "kern", "torch", "kernel"),
    ("torch/py", "torch/ours", "py", "torch", "ours-py"),
    ("jax/kernel", "jax/ours", "kern", "jax", "kernel"),
    ("jax/graph", "jax/ours", "graph", "jax", "ours-gF"),
    ("peer/kernel", "peer/ours", "kern", "peer-best", "kernel"),  # the faster of torch and JAX
    ("peer/py", "peer/ours", "py", "peer-best", "ours-py"),
    ("pool", "pool", "gain", "kern-1t", "kernel"),  # >1: the kernel's thread pool helps
    ("align", "16B", "cost", "kern-16", "kernel"),  # >1: MindSpore's 16-byte alignment costs that much
    ("py/kernel", "call/kern", "py", "ours-py", "kernel"),  # what a PYNATIVE call costs over the kernel
    ("graph/cell", "call/kern", "graph", "ours-gF", "cell+kern"),  # a GRAPH Cell over (trivial Cell + kernel)
]
GBPS_COLS = ["copy", "rmw", "kernel", "ours-py", "ours-gF"]
NOISY = 0.5  # a time is marked "~" when its samples' interquartile range exceeds this fraction of the median


def _median(results, name):
    if name == "ms-best":
        vals = [_median(results, n) for n in ("ms-py", "ms-g")]
        vals = [v for v in vals if v is not None]
        return min(vals) if vals else None
    if name == "cell+kern":
        a, b = _median(results, "cell-0"), _median(results, "kernel")
        return a + b if a is not None and b is not None else None
    if name == "peer-best":
        vals = [v for v in (_median(results, n) for n in ("torch", "jax")) if v is not None]
        return min(vals) if vals else None
    r = results.get(name)
    return r.get("median_ms") if r else None


def ratios(results):
    out = {}
    for key, _, _, num, den in RATIOS:
        a, b = _median(results, num), _median(results, den)
        out[key] = a / b if a is not None and b else None
    return out


def _fmt_ms(v):
    if v is None:
        return "-"
    if v < 0.1:
        return f"{v:.4f}"
    if v < 10:
        return f"{v:.3f}"
    if v < 1000:
        return f"{v:.1f}"
    return f"{v:.0f}"


def _fmt_ratio(v):
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}" if v >= 0.1 else f"{v:.3f}" if v >= 0.001 else "<.001"


def _fmt_gbps(v):
    if v is None:
        return "-"
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


def print_tables(op, dtype, rows, out=sys.stdout):
    """rows: [(workload, results, ratios, check)] of one op and dtype."""
    present = [n for n in IMPL_NAMES if any(n in r for _, r, _, _ in rows)]
    notes = []
    names = []
    for n in present:
        reasons = [r[n]["skipped"] for _, r, _, _ in rows if n in r and "skipped" in r[n]]
        if len(reasons) == len(rows):  # skipped everywhere: no column, one note
            notes.append(f"{n} not shown: {reasons[0]}")
        else:
            names.append(n)
    print(f"\n=== {op}  {dtype}  (median ms per call; lower is better) ===", file=out)
    print(f"{'workload':<13}" + "".join(f"{n:>9} " for n in names), file=out)
    for w, res, _, check in rows:
        cells = []
        for n in names:
            r = res.get(n)
            if r is None:
                cells.append("-")
            elif "skipped" in r:
                cells.append("skip")
                notes.append(f"{w.name}: {r['skipped']}")
            else:
                cells.append(_fmt_ms(r["median_ms"]) + ("~" if r.get("spread", 0) > NOISY else " "))
        flag = "" if check in (None, True) else "  <- kernel result WRONG"
        print(f"{w.name:<13}" + "".join(f"{c:>10}" for c in cells) + flag, file=out)
    groups = []
    for _, grp, col, _, _ in RATIOS:
        if not groups or groups[-1][0] != grp:
            groups.append([grp, []])
        groups[-1][1].append(col)
    line1 = f"{'':<13}" + "".join(f"{g:^{7 * len(cols)}}" for g, cols in groups) \
        + f"{'effective GB/s':^{8 * (len(GBPS_COLS) + 2)}}"
    line2 = f"{'workload':<13}" + "".join(f"{c:>7}" for _, cols in groups for c in cols) \
        + "".join(f"{c:>8}" for c in GBPS_COLS) + f"{'k/copy':>8}{'k/rmw':>8}"
    print("--- ratios (>1: ours faster) and bandwidth ---", file=out)
    print(line1.rstrip(), file=out)
    print(line2, file=out)
    for w, res, rat, _ in rows:
        cells = "".join(f"{_fmt_ratio(rat[key]):>7}" for key, *_ in RATIOS)
        gb = {n: res.get(n, {}).get("gbps") for n in GBPS_COLS}
        fracs = [f"{100 * gb['kernel'] / gb[probe]:.0f}%" if gb[probe] and gb["kernel"] else "-"
                 for probe in ("copy", "rmw")]
        print(f"{w.name:<13}" + cells + "".join(f"{_fmt_gbps(gb[n]):>8}" for n in GBPS_COLS)
              + "".join(f"{f:>8}" for f in fracs), file=out)
    for s in dict.fromkeys(notes):
        print(f"  note: {s}", file=out)
    out.flush()


def geomean(vals):
    vals = [v for v in vals if v]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def print_summary(records, out=sys.stdout):
    print("\n=== summary over all cases: ratio (>1: ours faster), geometric mean [min .. max] ===", file=out)
    for key, grp, col, num, den in RATIOS:
        pairs = [(r["ratios"][key], f"{r['op']}/{r['dtype']}/{r['workload']}") for r in records
                 if r["ratios"].get(key)]
        if not pairs:
            continue
        lo, hi = min(pairs), max(pairs)
        print(f"  {num:>7} / {den:<8} {geomean([p[0] for p in pairs]):6.2f}   "
              f"[{lo[0]:.2f} {lo[1]} .. {hi[0]:.2f} {hi[1]}]  ({len(pairs)} cases)", file=out)


# ---------------------------------------------------------------- targets

# What the speed work aims at (docs/performance.md), checked on this run's ratios: a row per
# target with its worst case and every case that misses it. Speed is never asserted.
SORTED_PATTERNS = ("sorted",)


def target_checks(records):
    """[(target, [(value, case, met)])] from the records of one run."""
    def med(r, name):
        return _median(r["impls"], name)

    def case(r):
        return f"{r['op']}/{r['dtype']}/{r['workload']}"

    checks = {}

    def add(target, value, r, met):
        checks.setdefault(target, []).append((value, case(r), met))

    for r in records:
        kern, py, peer = med(r, "kernel"), med(r, "ours-py"), med(r, "peer-best")
        if peer and py:
            add("PYNATIVE call >= 1.0x the faster of torch and JAX", peer / py, r, peer / py >= 1.0)
        if peer and kern:
            add("kernel >= 1.2x the faster of torch and JAX", peer / kern, r, peer / kern >= 1.2)
        jax = med(r, "jax")
        if (r["dtype"] == "float32" and r["op"] in ("scatter_add", "tensor_scatter_max")
                and r["workload"] in ("medium", "large") and jax and py):
            add("PYNATIVE call >= 1.3x JAX (float32 scatter_add, tensor_scatter_max; medium, large)", jax / py, r,
                jax / py >= 1.3)
        if r["workload"] == "tiny" and r["dtype"] == "float32" and py and kern:
            fixed = (py - kern) * 1e3
            add("fixed cost of a PYNATIVE call (tiny: ours-py - kernel) <= 8 us", fixed, r, fixed <= 8.0)
        ms_py = med(r, "ms-py")
        if r["workload"] == "tiny" and ms_py and py:
            add("tiny PYNATIVE call >= 2.5x the built-in's (ms-py / ours-py)", ms_py / py, r, ms_py / py >= 2.5)
        k16 = med(r, "kern-16")
        if k16 and kern:
            add("kernel on 16-byte-aligned buffers within 3% of 64-byte-aligned (kern-16 / kernel <= 1.03)",
                k16 / kern, r, k16 / kern <= 1.03)
        rmw, copy = med(r, "rmw"), med(r, "copy")
        if r["workload"] in ("large", "graph") and rmw and kern:
            add("unsorted large/graph: kernel >= 85% of the access probe's bandwidth (rmw / kernel)", rmw / kern, r,
                rmw / kern >= 0.85)
        if r["pattern"] in SORTED_PATTERNS and copy and kern:
            add("sorted: kernel >= 90% of the copy probe's bandwidth (copy / kernel)", copy / kern, r,
                copy / kern >= 0.90)
        one = med(r, "kern-1t")
        threads = r["impls"].get("kernel", {}).get("threads")
        if one and kern and threads and threads > 1:  # (on one thread kern-1t is the same call)
            add("automatic thread count, where it chose more than one, never slower than one thread "
                "(kern-1t / kernel >= 1)", one / kern, r, one / kern >= 1.0)
    return list(checks.items())


def print_targets(records, out=sys.stdout):
    print("\n=== targets (docs/performance.md): met in how many cases, the worst, every miss ===", file=out)
    for target, rows in target_checks(records):
        met = sum(ok for _, _, ok in rows)
        smaller_is_better = target.startswith(("fixed", "kernel on 16-byte"))
        worst = max(rows) if smaller_is_better else min(rows)
        print(f"  [{'met' if met == len(rows) else 'MISS'}] {target}: {met}/{len(rows)}; worst {worst[0]:.3g} "
              f"({worst[1]})", file=out)
        misses = sorted((v, c) for v, c, ok in rows if not ok)
        if misses:
            print("      misses: " + ", ".join(f"{c} {v:.3g}" for v, c in misses), file=out)


# ---------------------------------------------------------------- machine

def machine_info():
    info = {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        for line in text.splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        flags = next((line.split(":", 1)[1].split() for line in text.splitlines()
                      if line.startswith("flags")), [])
        info["simd"] = " ".join(f for f in ("avx2", "f16c", "avx512f", "avx512_fp16") if f in flags) or "none"
    except OSError:
        pass
    try:
        info["usable_cores"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["usable_cores"] = os.cpu_count()
    try:
        with open("/proc/meminfo") as f:
            kb = int(next(line for line in f if line.startswith("MemTotal")).split()[1])
        info["memory_gib"] = round(kb / 2**20, 1)
    except (OSError, StopIteration, ValueError):
        pass
    try:
        info["loadavg_start"] = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        pass
    info["cpu_pressure_start"] = cpu_pressure()
    return info


def cpu_pressure():
    """Share of the last 60 s in which some runnable task waited for a CPU (Linux PSI), or None."""
    try:
        with open("/proc/pressure/cpu") as f:
            some = next(line for line in f if line.startswith("some"))
        return float(some.split("avg60=")[1].split()[0])
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def _pct(v):
    return "n/a" if v is None else f"{v:.0f}%"


def versions(no_peers=False):
    ms, _, _, _, _, _, ms_scatter = ms_modules()
    from ms_scatter._lib import CPU_LIBRARY
    from ms_scatter.testing import kernel_library
    v = {"python": platform.python_version(), "numpy": np.__version__, "mindspore": ms.__version__,
         "ms_scatter": getattr(ms_scatter, "__version__", "?"), "kernel_library": CPU_LIBRARY}
    lib = kernel_library()
    try:
        fn = lib.ms_scatter_num_threads
        fn.restype = __import__("ctypes").c_int
        v["kernel_threads"] = fn()
    except AttributeError:
        v["kernel_threads"] = "1 (no thread control in this build)"
    v["torch"] = "torch not used (--no-peers)" if no_peers else peers.torch_info()
    v["jax"] = "jax not used (--no-peers)" if no_peers else peers.jax_info()
    try:
        import matplotlib
        v["matplotlib"] = matplotlib.__version__
    except Exception as err:
        v["matplotlib"] = f"not available ({type(err).__name__})"
    return v


# ---------------------------------------------------------------- chart

def write_chart(path, records, workloads, ops_, dtypes):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as err:
        print(f"\n--chart: matplotlib not available ({type(err).__name__}: {err}); no chart written")
        return False
    names = [n for n in IMPL_NAMES if any(n in r["impls"] and "gbps" in r["impls"][n] for r in records)]
    fig, axes = plt.subplots(len(ops_), len(dtypes), figsize=(max(13.0, 7.5 * len(dtypes)), 1.0 + 3.8 * len(ops_)),
                             squeeze=False)
    colors = plt.get_cmap("tab10")
    width = 0.8 / max(len(names), 1)
    for r_i, op in enumerate(ops_):
        for c_i, dtype in enumerate(dtypes):
            ax = axes[r_i][c_i]
            recs = {r["workload"]: r for r in records if r["op"] == op and r["dtype"] == dtype}
            wl = [w.name for w in workloads if w.name in recs]
            for k, name in enumerate(names):
                xs, ys = [], []
                for j, wn in enumerate(wl):
                    g = recs[wn]["impls"].get(name, {}).get("gbps")
                    if g:
                        xs.append(j + (k - (len(names) - 1) / 2) * width)
                        ys.append(g)
                if name == "copy":
                    ax.bar(xs, ys, width, label="copy probe", color="0.85", hatch="//", edgecolor="0.3",
                           linewidth=0.5)
                elif name == "rmw":
                    ax.bar(xs, ys, width, label="access probe (rmw)", color="0.65", hatch="xx", edgecolor="0.3",
                           linewidth=0.5)
                else:
                    ax.bar(xs, ys, width, label=name, color=colors(k % 10))
            ax.set_yscale("log")
            ax.set_axisbelow(True)
            ax.set_xticks(range(len(wl)))
            ax.set_xticklabels(wl, rotation=20, fontsize=8)
            ax.set_title(f"{op}  {dtype}", fontsize=10)
            ax.set_ylabel("effective GB/s")
            ax.grid(axis="y", which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.suptitle("ms_scatter benchmark: effective bandwidth = bytes the scatter must touch / median time "
                 "(higher is better)", y=0.995, fontsize=10)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.975), ncol=len(names), fontsize=8,
               frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / (1.0 + 3.8 * len(ops_))))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ---------------------------------------------------------------- main

def _csv(value, allowed, what):
    items = [v.strip() for v in value.split(",") if v.strip()]
    bad = [v for v in items if v not in allowed]
    if bad:
        raise SystemExit(f"unknown {what} {bad}; choose from {', '.join(allowed)}")
    return items


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m st.bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="fewer repetitions; skip the largest workloads (large, graph, graph-sorted)")
    p.add_argument("--only", metavar="WORKLOAD[,..]", help=f"workloads: {', '.join(WORKLOAD_BY_NAME)}")
    p.add_argument("--ops", metavar="OP[,..]", help=f"ops: {', '.join(OPS)}")
    p.add_argument("--dtypes", metavar="DTYPE[,..]", help=f"dtypes: {', '.join(DTYPES)}")
    p.add_argument("--impls", metavar="NAME[,..]", help=f"implementations: {', '.join(IMPL_NAMES)}")
    p.add_argument("--chart", metavar="PATH", help="write a PNG chart of effective GB/s (matplotlib)")
    p.add_argument("--json", metavar="PATH", help="write every sample and result as JSON")
    p.add_argument("--reps", type=int, help="timed repetitions per case (default: from a time budget)")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--no-peers", action="store_true", help="skip torch and jax")
    p.add_argument("--numpy-limit", type=float, default=2.0, metavar="S",
                   help="skip numpy where one call is estimated above S seconds (default 2)")
    p.add_argument("--settle", type=float, default=0.005, metavar="S",
                   help="pause before each sample so that the previous implementation's worker threads "
                        "(OpenMP, XLA, MindSpore, ours) stop spinning (default 0.005 s)")
    p.add_argument("--no-check", action="store_true", help="skip the kernel-vs-oracle check of small cases")
    p.add_argument("--variants", action="store_true",
                   help="time the scatter_add kernel of each CPU library variant against a -march=native build "
                        "(st/_bench_variants.py) instead of the implementations")
    p.add_argument("--threads", type=int, default=1, help="--variants: kernel threads in every library (default 1)")
    p.add_argument("--rebuild-native", action="store_true", help="--variants: rebuild the native library")
    p.add_argument("--watchdog", type=float, default=900, metavar="S",
                   help="abort with a traceback if one case takes more than S seconds (default 900)")
    args = p.parse_args(argv)
    args.workloads = [WORKLOAD_BY_NAME[n] for n in _csv(args.only, list(WORKLOAD_BY_NAME), "workload")] \
        if args.only else [w for w in WORKLOADS if not (args.quick and w.big)]
    args.ops_ = _csv(args.ops, OPS, "op") if args.ops else list(OPS)
    args.dtypes_ = _csv(args.dtypes, DTYPES, "dtype") if args.dtypes else list(DTYPES)
    args.impls = _csv(args.impls, IMPL_NAMES, "implementation") if args.impls else list(IMPL_NAMES)
    args.budget_scale = 0.25 if args.quick else 1.0
    args.sample_s = 0.003 if args.quick else 0.006
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.variants:
        from . import _bench_variants
        _bench_variants.run(args)
        return 0
    start = time.perf_counter()
    # OpenMP threads (torch's) that busy-wait after each call steal the 2 cores from
    # whatever runs next (and from themselves when other processes load the machine):
    # measured 0.8 ms vs 140 ms for torch's index_add_ on `medium` under load. Passive
    # waiting unless the caller chose otherwise; read when torch loads its libgomp.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    warnings.filterwarnings("ignore")
    os.environ.setdefault("GLOG_v", "3")  # MindSpore: errors only
    ms = ms_modules()[0]
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    mach = machine_info()
    vers = versions(args.no_peers)
    print("ms_scatter benchmark" + ("  (--quick)" if args.quick else ""))
    print(f"machine: {mach.get('cpu')}, {mach.get('usable_cores')} usable cores of {mach.get('cores')}, "
          f"{mach.get('memory_gib', '?')} GiB, SIMD: {mach.get('simd', '?')}")
    print(f"load at start: load average {mach.get('loadavg_start')}, CPU pressure (tasks waiting for a CPU, "
          f"last 60 s) {_pct(mach.get('cpu_pressure_start'))}")
    print(f"versions: python {vers['python']}, numpy {vers['numpy']}, mindspore {vers['mindspore']}, "
          f"ms_scatter {vers['ms_scatter']} (kernel threads: {vers['kernel_threads']})")
    print(f"peers: {vers['torch']}; {vers['jax']}; matplotlib {vers['matplotlib']}")
    print("workloads: " + "; ".join(f"{w.name} {w.rows}x{w.cols} <- {w.n} idx ({w.about})" for w in args.workloads))
    print("indices int32 (torch: int64); tensor_scatter_max: (n, 1) indices into a 2-d x, whole rows")
    print("times are medians of interleaved repetitions; each sample averages enough calls to last "
          f"~{args.sample_s * 1e3:.0f} ms, after a {args.settle * 1e3:g} ms pause; "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    load, psi = mach.get("loadavg_start"), mach.get("cpu_pressure_start")
    if (load and load[0] > 0.75 * (mach.get("usable_cores") or 1)) or (psi or 0) > 10:
        print(f"WARNING: other processes are competing for the {mach.get('usable_cores')} cores: absolute "
              "times are noisy (the ratios, measured interleaved, less so); '~' marks a time whose samples "
              f"spread (interquartile range) over {NOISY:.0%} of the median")
    sys.stdout.flush()

    records = []
    total = len(args.workloads) * len(args.ops_) * len(args.dtypes_)
    done = 0
    for dtype in args.dtypes_:
        per_op = {op: [] for op in args.ops_}
        for w in args.workloads:
            data = make_data(w, dtype, args.seed)
            for op in args.ops_:
                done += 1
                case = Case(op, data)
                t0 = time.perf_counter()
                print(f"[{done}/{total}] {op} {dtype} {w.name} ...", end="", file=sys.stderr, flush=True)
                faulthandler.dump_traceback_later(args.watchdog, exit=True)
                check = None if args.no_check else check_kernel(case)
                if done == 1:
                    # The process's first seconds of MindSpore calls ran bimodal (PYNATIVE
                    # samples of 0.05 and 1 ms, built-in and ours alike): one untimed pass.
                    run_case(case, args)
                results, reps, phases = run_case(case, args)
                faulthandler.cancel_dump_traceback_later()
                rat = ratios(results)
                print(f" {time.perf_counter() - t0:.1f} s ({reps} reps)", file=sys.stderr, flush=True)
                records.append({"op": op, "dtype": dtype, "workload": w.name,
                                "shape": [w.rows, w.cols], "n_indices": w.n, "pattern": w.pattern,
                                "distinct_rows": data.unique_rows, "bytes": case.bytes, "reps": reps,
                                "kernel_check": check, "phases_s": phases, "impls": results, "ratios": rat})
                per_op[op].append((w, results, rat, check))
            del data
            gc.collect()
        for op in args.ops_:
            print_tables(op, dtype, per_op[op])

    print_summary(records)
    print_targets(records)
    choices = ms_modules()[6].thread_choices()
    print_thread_choices(choices)
    elapsed = time.perf_counter() - start
    try:
        load_end = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        load_end = None
    peak_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print("\nnotes:")
    print("  ratios: built-in/ours kern = min(ms-py, ms-g) / kernel, py = ms-py / ours-py, graph = ms-g / ours-gF;"
          " torch kern = torch / kernel, py = torch / ours-py; jax kern = jax / kernel, graph = jax / ours-gF;"
          " peer = the faster of torch and JAX / ours; 16B cost = kern-16 / kernel;"
          " pool gain = kern-1t / kernel (>1: the kernel's thread pool helps); k/copy, k/rmw = kernel GB/s as % of the"
          " copy probe's and the access probe's")
    bad = [f"{r['op']}/{r['dtype']}/{r['workload']}" for r in records if r["kernel_check"] is False]
    checked = sum(r["kernel_check"] is True for r in records)
    print(f"  kernel results checked against the numpy oracle on {checked} small cases"
          + (f"; WRONG on {', '.join(bad)}" if bad else ", all equal"))
    if not args.no_peers and (vers["torch"].startswith("torch not") or vers["jax"].startswith("jax not")):
        print("  missing peers are skipped (install torch==2.13.0 (CPU) and jax[cpu] to fill their columns)")
    print(f"  load at end: load average {load_end}, CPU pressure {_pct(cpu_pressure())} "
          "(other processes on the machine add noise; '~' marks a noisy time)")
    print(f"  elapsed {elapsed:.0f} s, peak RSS {peak_gib:.1f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": dict(mach, loadavg_end=load_end, cpu_pressure_end=cpu_pressure()),
                       "versions": vers,
                       "config": {"quick": args.quick, "workloads": [w.name for w in args.workloads],
                                  "ops": args.ops_, "dtypes": args.dtypes_, "seed": args.seed,
                                  "sample_s": args.sample_s},
                       "elapsed_s": elapsed, "thread_choices": choices, "records": records}, f, indent=1)
        print(f"  wrote {args.json}")
    if args.chart:
        if write_chart(args.chart, records, args.workloads, args.ops_, args.dtypes_):
            print(f"  wrote {args.chart}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
