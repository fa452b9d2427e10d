"""Launching MindSpore worker processes on 127.0.0.1 for the distributed test and benchmark:
a scheduler and `workers` workers with MindSpore's launcher variables (what msrun sets:
MS_ROLE, MS_SCHED_HOST, MS_SCHED_PORT, MS_WORKER_NUM, MS_NODE_ID) on a free port, plus any
plain processes, all at once, bounded by a deadline; every process started is ended (its
own process group), also on failure, timeout or interruption."""
import os
import signal
import socket
import subprocess
import sys
import time

CLUSTER_VARS = ("MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM", "MS_NODE_ID")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd, env, cwd, log):
    with open(log, "w") as f:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, env=env, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def end(procs):
    """Ends every process in `procs` (and its children: each has its own process group)."""
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


def launch(worker_cmd, out, workers=2, extra=(), timeout=420, env=None):
    """Runs `worker_cmd` as `workers` ranks (logs out/worker<r>.log; no scheduler when 0) and each (name, cmd) of
    `extra` as a plain process without the cluster variables (out/<name>.log), in `out`.
    Returns (seconds, {name: exit code}); a process still running at the deadline is ended
    and its code is negative."""
    base = {k: v for k, v in (env or os.environ).items() if k not in CLUSTER_VARS}
    base.update(MS_SCATTER_QUIET="1", PYTHONUNBUFFERED="1")
    cluster = dict(base, MS_SCHED_HOST="127.0.0.1", MS_SCHED_PORT=str(free_port()), MS_WORKER_NUM=str(workers))
    procs, names = [], []
    start = time.monotonic()
    try:
        if workers:
            procs.append(_start([sys.executable, "-c", "from mindspore.communication import init; init()"],
                                dict(cluster, MS_ROLE="MS_SCHED"), out, os.path.join(out, "scheduler.log")))
            names.append("scheduler")
        for r in range(workers):
            procs.append(_start(list(worker_cmd), dict(cluster, MS_ROLE="MS_WORKER", MS_NODE_ID=str(r)), out,
                                os.path.join(out, f"worker{r}.log")))
            names.append(f"worker{r}")
        for name, cmd in extra:
            procs.append(_start(list(cmd), base, out, os.path.join(out, f"{name}.log")))
            names.append(name)
        deadline = start + timeout
        while time.monotonic() < deadline and any(p.poll() is None for p in procs):
            time.sleep(0.2)
    finally:
        end(procs)
    return time.monotonic() - start, {n: p.returncode for n, p in zip(names, procs)}


def log_tail(path, n=4000):
    """The end of a log without MindSpore's WARNING/INFO lines."""
    try:
        with open(path, errors="replace") as f:
            lines = [line for line in f if "WARNING" not in line and "[INFO]" not in line]
        return "".join(lines)[-n:]
    except OSError:
        return "(no log)"
