"""Scale-out benchmark: ms_scatter.distributed with two worker processes on 127.0.0.1 (and
the same code in one process), GRAPH mode, against anchors measured in the same run.

    python -m st.bench_distributed [--rows 200000] [--dim 64] [--batch 4096] [--repeat 30]

Per rank: a float32 table of rows x dim, a batch of `batch` int32 ids and their update
rows. Timed (median of --repeat calls after a warm-up, per process):

  local        ms_scatter.scatter_add of this rank's batch on a whole-table Parameter (no
               communication: what data parallel without all-gather does, and drifts)
  global       ms_scatter.scatter_add of both ranks' batch (2 x batch) on a whole table,
               in one process: what one process does with the global batch
  gather       the all-gather of this rank's ids and updates alone
  replicated   Replicated().scatter_add (all-gather + the global batch on every rank)
  sharded      ShardedTable.scatter_add (all-gather + the rows of this rank's block)
  lookup       ShardedTable.lookup of this rank's ids
  lookup+grad  a lookup loss and its gradient with respect to the shard

Ratios are against `global` of the same process. The bytes each rank receives per call
follow from the shapes (printed; see ms_scatter.distributed's docstring for the formulas).
On a 2-core machine the two ranks and the scheduler share the cores: the times include
that contention, and the communication is local (TCP on 127.0.0.1).
"""
import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np


def _worker(out, single, rows, dim, batch, repeat):
    import mindspore as ms  # pylint: disable=import-outside-toplevel
    from mindspore import Parameter, Tensor, nn  # pylint: disable=import-outside-toplevel
    ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")
    if not single:
        from mindspore.communication import init  # pylint: disable=import-outside-toplevel
        init()
    import ms_scatter  # pylint: disable=import-outside-toplevel
    from ms_scatter import distributed  # pylint: disable=import-outside-toplevel
    _, rank, size = distributed.group_info()
    rng = np.random.default_rng(rank)
    table = np.random.default_rng(99).standard_normal((rows, dim)).astype(np.float32)
    ids = Tensor(rng.integers(0, rows, batch).astype(np.int32))
    upd = Tensor(rng.standard_normal((batch, dim)).astype(np.float32))
    both_ids = Tensor(np.random.default_rng(7).integers(0, rows, 2 * batch).astype(np.int32))
    both_upd = Tensor(np.random.default_rng(8).standard_normal((2 * batch, dim)).astype(np.float32))

    class Whole(nn.Cell):
        def __init__(self):
            super().__init__()
            self.p = Parameter(Tensor(table), name="whole")

        def construct(self, i, u):
            return ms_scatter.scatter_add(self.p, i, u)

    class Gather(nn.Cell):
        def __init__(self):
            super().__init__()
            self.batch = distributed.BatchGather()

        def construct(self, i, u):
            return self.batch(i), self.batch(u)

    class Rep(nn.Cell):
        def __init__(self):
            super().__init__()
            self.p = Parameter(Tensor(table), name="replicated")
            self.rep = distributed.Replicated()

        def construct(self, i, u):
            return self.rep.scatter_add(self.p, i, u)

    class Sharded(nn.Cell):
        def __init__(self, t):
            super().__init__()
            self.t = t

        def construct(self, i, u):
            return self.t.scatter_add(i, u)

    class Lookup(nn.Cell):
        def __init__(self, t):
            super().__init__()
            self.t = t

        def construct(self, i):
            return self.t.lookup(i)

    class Loss(nn.Cell):
        def __init__(self, t):
            super().__init__()
            self.t = t

        def construct(self, i, w):
            return (self.t.lookup(i) * w).sum()

    t = distributed.ShardedTable(rows, (dim,), init=table, name="bench_table")
    loss_grad = ms.grad(Loss(t), grad_position=None, weights=t.param)
    cases = {
        "local": (Whole(), (ids, upd)),
        "global": (Whole(), (both_ids, both_upd)),
        "gather": (Gather(), (ids, upd)),
        "replicated": (Rep(), (ids, upd)),
        "sharded": (Sharded(t), (ids, upd)),
        "lookup": (Lookup(t), (ids,)),
        "lookup+grad": (loss_grad, (ids, upd)),
    }
    times = {name: [] for name in cases}
    for fn, args in cases.values():
        _sync(fn(*args))  # compile, warm up
    for _ in range(repeat):  # interleaved repetitions; every rank runs the same sequence
        for name, (fn, args) in cases.items():
            start = time.perf_counter()
            _sync(fn(*args))
            times[name].append(time.perf_counter() - start)
    result = {name: float(np.median(v)) for name, v in times.items()}
    with open(os.path.join(out, "single.json" if single else f"rank{rank}.json"), "w") as f:
        json.dump({"rank": rank, "size": size, "times": result}, f)


def _sync(out):
    for o in out if isinstance(out, tuple) else (out,):
        o.asnumpy()


def _bytes_per_call(size, batch, dim, value_bytes=4, index_bytes=4):
    """What each rank receives per call (ms_scatter.distributed's formulas)."""
    w, n, s = size, batch, dim
    return {
        "gather": (w - 1) * n * (index_bytes + s * value_bytes),
        "replicated": (w - 1) * n * (index_bytes + s * value_bytes),
        "sharded": (w - 1) * n * (index_bytes + s * value_bytes),
        "lookup": (w - 1) * n * index_bytes + (w - 1) * w * n * s * value_bytes,
        "lookup+grad": 2 * (w - 1) * n * index_bytes + (w - 1) * w * n * s * value_bytes + (w - 1) * n * s * value_bytes,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200000)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(args.worker, args.single, args.rows, args.dim, args.batch, args.repeat)
        return 0
    from st._launch import launch, log_tail  # pylint: disable=import-outside-toplevel
    sizes = ["--rows", str(args.rows), "--dim", str(args.dim), "--batch", str(args.batch), "--repeat", str(args.repeat)]
    me = os.path.abspath(__file__)
    with tempfile.TemporaryDirectory() as out:
        # the ranks first, then the single process alone (no sharing of the cores between them)
        elapsed, codes = launch([sys.executable, me, "--worker", out] + sizes, out, workers=2, timeout=900)
        _, single_codes = launch([], out, workers=0,
                                 extra=[("single", [sys.executable, me, "--worker", out, "--single"] + sizes)],
                                 timeout=900)
        codes.update(single_codes)
        if any(c != 0 for c in codes.values()):
            for name in ("worker0", "worker1", "single"):
                print(f"--- {name}\n{log_tail(os.path.join(out, name + '.log'))}")
            raise SystemExit(f"benchmark processes failed: {codes}")
        runs = {}
        for name in ("rank0", "rank1", "single"):
            with open(os.path.join(out, f"{name}.json")) as f:
                runs[name] = json.load(f)["times"]
    volume = _bytes_per_call(2, args.batch, args.dim)
    print(f"table {args.rows} x {args.dim} float32, {args.batch} ids per rank, GRAPH mode, median of {args.repeat}; "
          f"two ranks on 127.0.0.1 ({elapsed:.0f} s launch)")
    print(f"{'':12s} {'rank0 ms':>9s} {'rank1 ms':>9s} {'1 proc ms':>9s} {'rank0/global':>12s} "
          f"{'received per rank':>18s}")
    for name in runs["rank0"]:
        r0, r1, one = (runs[k][name] * 1e3 for k in ("rank0", "rank1", "single"))
        ratio = runs["rank0"][name] / runs["rank0"]["global"]
        vol = f"{volume[name] / 2**20:.2f} MiB" if name in volume else "-"
        print(f"{name:12s} {r0:9.3f} {r1:9.3f} {one:9.3f} {ratio:12.2f} {vol:>18s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
