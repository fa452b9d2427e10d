"""ms_scatter.distributed on MindSpore's own distributed runtime: two worker processes and a
scheduler on 127.0.0.1, launched with MindSpore's environment variables (MS_ROLE,
MS_SCHED_HOST, MS_SCHED_PORT, MS_WORKER_NUM: what msrun sets), plus the single-process
reference run, all at once in one launch (st/_distributed_worker.py runs every check in
PYNATIVE and GRAPH mode in each process).

* replicated Parameters: the 21 operators (and int8, float16, int64, float64, int32, uint8)
  over the global batch equal the oracle on the concatenated batch, bit for bit, and the
  two replicas are identical;
* row-sharded tables (11 rows: blocks of 6 and 5): the 14 in-place operators (the 7
  reductions, first-axis and depth-2 indices) and six dtypes, each shard and the gathered
  table against the oracle on the whole table; lookups and their gradient; the gradients
  of sharded and replicated scatters against one process holding the whole table;
* errors: an out-of-range index on rank 1 only fails the call on both ranks and neither
  writes (replicated, sharded, lookup; in PYNATIVE also a bad second component and an
  integer zero divisor), and the cluster works afterwards;
* the one in-place path's promises on shards: a discarded result under value_and_grad
  (both modes), and under a gradient a bad second component raises the documented error,
  writes nothing and leaves the process able to compile gradient graphs;
* training: 3 steps (sharded embedding lookup + its gradient + SGD, a sharded running
  max, a replicated count) equal on both ranks, in the single-process run and in numpy.

Bounded in time (MS_SCATTER_DIST_TIMEOUT, default 420 s) on a free port; every process the
test starts is ended (its process group), also on failure or timeout.
"""
import json
import os
import sys
import time

import numpy as np
import pytest

from . import _distributed_worker as worker
from ._launch import launch, log_tail

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_distributed_worker.py")
TIMEOUT = float(os.environ.get("MS_SCATTER_DIST_TIMEOUT", "420"))
RUNS = ("rank0", "rank1", "single")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("distributed"))
    elapsed, codes = launch([sys.executable, WORKER, out], out, workers=2,
                            extra=[("single", [sys.executable, WORKER, out, "--single"])], timeout=TIMEOUT)
    logs = {n: log_tail(os.path.join(out, f"{n}.log")) for n in ("scheduler", "worker0", "worker1", "single")}
    results, arrays = {}, {}
    for name in RUNS:
        try:
            with open(os.path.join(out, f"{name}.json")) as f:
                results[name] = json.load(f)
            with np.load(os.path.join(out, f"{name}.npz")) as data:
                arrays[name] = dict(data)
        except OSError:
            results[name], arrays[name] = None, None
    print(f"\ndistributed launch: {elapsed:.1f} s, exit codes {codes}")
    for name in RUNS:
        if results[name]:
            slow = sorted(results[name]["times"].items(), key=lambda kv: -kv[1])[:6]
            print(f"  {name}: " + ", ".join(f"{k} {v:.1f} s" for k, v in slow))
    return {"elapsed": elapsed, "codes": codes, "logs": logs, "results": results, "arrays": arrays}


def _explain(runs):
    return f"exit codes {runs['codes']} after {runs['elapsed']:.0f} s; logs:\n" + "\n".join(
        f"--- {n}\n{t}" for n, t in runs["logs"].items())


def test_every_process_ends_in_time(runs):
    assert runs["elapsed"] < TIMEOUT, _explain(runs)
    assert all(code == 0 for code in runs["codes"].values()), _explain(runs)


def test_two_ranks(runs):
    for name in ("rank0", "rank1"):
        assert runs["results"][name] is not None, _explain(runs)
    assert sorted([runs["results"]["rank0"]["rank"], runs["results"]["rank1"]["rank"]]) == [0, 1]
    assert runs["results"]["rank0"]["size"] == 2 and runs["results"]["single"]["size"] == 1


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("check", worker.CHECKS)
def test_check(runs, check, run):
    result = runs["results"][run]
    assert result is not None, _explain(runs)
    assert result["results"].get(check) == "ok", f"{run} {check}:\n{result['results'].get(check, 'not run')}"


def test_replicas_are_identical(runs):
    a, b = runs["arrays"]["rank0"], runs["arrays"]["rank1"]
    assert a is not None and b is not None, _explain(runs)
    keys = [k for k in a if k.startswith("replicated_")]
    assert len(keys) == 2 * (7 + 7 + 7 + 6)
    for k in keys:
        assert a[k].tobytes() == b[k].tobytes(), k


@pytest.mark.parametrize("what", ["embedding", "max", "counts"])
@pytest.mark.parametrize("mode", worker.MODES)
def test_training_equals_the_single_process_run(runs, what, mode):
    key = f"train_{what}_{mode}"
    arrays = [runs["arrays"][name] for name in RUNS]
    assert all(a is not None and key in a for a in arrays), _explain(runs)
    single = arrays[2][key]
    for name, a in zip(RUNS[:2], arrays[:2]):
        assert a[key].dtype == single.dtype and a[key].tobytes() == single.tobytes(), (name, a[key], single)


def test_a_launch_past_its_deadline_is_ended(tmp_path):
    """The launcher's own guarantee: processes still running at the deadline (here workers
    that never finish) are ended, scheduler included, and the call returns."""
    start = time.monotonic()
    elapsed, codes = launch([sys.executable, "-c", "import time; time.sleep(600)"], str(tmp_path), workers=2,
                            extra=[("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"])], timeout=3)
    assert time.monotonic() - start < 30
    assert set(codes) == {"scheduler", "worker0", "worker1", "sleeper"}
    assert all(code is not None and code < 0 for code in codes.values()), codes  # ended by a signal
