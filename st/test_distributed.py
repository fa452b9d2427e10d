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
* training: 3 steps (sharded embedding lookup + its gradient + SGD, a sharded running
  max, a replicated count) equal on both ranks, in the single-process run and in numpy.

Bounded in time (MS_SCATTER_DIST_TIMEOUT, default 420 s) on a free port; every process the
test starts is ended (its process group), also on failure or timeout.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

from . import _distributed_worker as worker

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_distributed_worker.py")
TIMEOUT = float(os.environ.get("MS_SCATTER_DIST_TIMEOUT", "420"))
RUNS = ("rank0", "rank1", "single")
_CLUSTER_VARS = ("MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM", "MS_NODE_ID")


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd, env, cwd, log):
    with open(log, "w") as f:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)


def _end(procs):
    """Ends every process we started (and its children: each has its own process group)."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def _tail(path, n=4000):
    try:
        with open(path, errors="replace") as f:
            lines = [line for line in f if "WARNING" not in line and "[INFO]" not in line]
        return "".join(lines)[-n:]
    except OSError:
        return "(no log)"


def _launch(out):
    """Runs the two ranks and the single-process reference; returns (elapsed, {name: code})."""
    base = {k: v for k, v in os.environ.items() if k not in _CLUSTER_VARS}
    base.update(MS_SCATTER_QUIET="1", PYTHONUNBUFFERED="1")
    port = _free_port()
    cluster = dict(base, MS_SCHED_HOST="127.0.0.1", MS_SCHED_PORT=str(port), MS_WORKER_NUM="2")
    procs, names = [], []
    start = time.monotonic()
    try:
        procs.append(_start([sys.executable, "-c", "from mindspore.communication import init; init()"],
                            dict(cluster, MS_ROLE="MS_SCHED"), out, os.path.join(out, "scheduler.log")))
        names.append("scheduler")
        for r in range(2):
            procs.append(_start([sys.executable, WORKER, out], dict(cluster, MS_ROLE="MS_WORKER", MS_NODE_ID=str(r)),
                                out, os.path.join(out, f"worker{r}.log")))
            names.append(f"worker{r}")
        procs.append(_start([sys.executable, WORKER, out, "--single"], base, out, os.path.join(out, "single.log")))
        names.append("single")
        deadline = start + TIMEOUT
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.2)
    finally:
        _end(procs)
    return time.monotonic() - start, {n: p.returncode for n, p in zip(names, procs)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("distributed"))
    elapsed, codes = _launch(out)
    logs = {n: _tail(os.path.join(out, f"{n}.log")) for n in ("scheduler", "worker0", "worker1", "single")}
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
