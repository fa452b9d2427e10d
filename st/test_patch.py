"""ms_scatter.patch(): MindSpore's own scatter entry points run on ms_scatter.

Unmodified programs (st/dropin_programs.py: a recommendation model trained by nn.Adam /
nn.LazyAdam on sparse embedding gradients in GRAPH mode, graph-mode Tensor and Parameter
setitem, the Tensor.scatter_* methods, every mindspore.ops name of the family in both
modes) run three ways, in parallel subprocesses: on MindSpore's built-ins; under
``python -m ms_scatter.patch --report``; and with MindSpore's scatter names made unusable
before ms_scatter is imported, then ``ms_scatter.patch()``. The results must be
bit-identical, and our kernels' own launch counters must show that each case ran on them.

In this process: patch/unpatch restore every MindSpore attribute exactly, idempotence,
threads, the scoped form, the site table against the installed wheel, code imported
after the patch, and the launcher.
"""
import json
import os
import subprocess
import sys
import threading

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn, ops

import ms_scatter
from ms_scatter import _patch, infer

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "dropin_programs.py")
OPS = [f + r for f in infer.FAMILIES for r in infer.REDUCTIONS]
OPTIMIZERS = ("adam", "adam_nesterov", "adam_lazy", "adam_lazy_nesterov", "lazyadam")
TIMEOUT = 600


def _env():
    return dict(os.environ, MS_SCATTER_QUIET="1", GLOG_v="3")


def _start(args, cwd):
    return subprocess.Popen([sys.executable] + args, cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _finish(proc, what):
    out, err = proc.communicate(timeout=TIMEOUT)
    lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"{what} failed ({proc.returncode}):\n{out[-3000:]}\n{err[-6000:]}"
    data = json.loads(lines[-1][len("RESULT "):])
    data["stderr"] = err
    return data


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The programs on the built-ins, under the launcher, and with the built-ins hidden."""
    cwd = str(tmp_path_factory.mktemp("dropin"))
    plain = _start([PROGRAMS], cwd)
    patched = _start(["-m", "ms_scatter.patch", "--report", PROGRAMS], cwd)
    plain, patched = _finish(plain, "built-ins"), _finish(patched, "patched")
    hidden = _finish(_start([PROGRAMS, "--hide"], cwd), "hidden built-ins")
    return {"plain": plain, "patched": patched, "hidden": hidden}


def _ran(calls, *entries):
    return all(calls.get(e, 0) > 0 for e in entries)


# ----------------------------------------------------------------- real programs

def test_training_is_bit_identical_and_runs_on_our_kernels(runs):
    """200 steps of each optimizer give the built-ins' losses and table bit for bit, but for
    nn.Adam(use_nesterov=True): its sparse path keeps m through `m_temp = next_m * 10 ...
    m = m_temp / 10`, counting on ScatterAdd's result being the Parameter, and its final
    `assign(m, next_m)` then writes the rounded m_temp / 10; ours writes next_m, the value of
    the call (docs/guide/policies.md). There the two runs agree to float32 rounding."""
    plain, patched = runs["plain"], runs["patched"]
    for name in OPTIMIZERS:
        case = f"train/{name}"
        assert isinstance(plain["results"][case], dict), plain["results"][case]
        if name == "adam_nesterov":
            ours, theirs = patched["results"][case], plain["results"][case]
            assert ours["table"] != theirs["table"] or ours == theirs  # (bit-identical would be fine too)
            np.testing.assert_allclose(ours["table_values"], theirs["table_values"], rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(ours["last_loss"], theirs["last_loss"], rtol=1e-5)
        else:
            assert patched["results"][case] == plain["results"][case], case
        assert plain["calls"][case] == {}, "the built-in run launched our kernels"
        calls = patched["calls"][case]
        assert _ran(calls, "ScatterAdd_token"), (case, calls)
        if "lazy" in name:  # the lazy paths write m and v with ScatterUpdate
            assert _ran(calls, "ScatterUpdate_token"), (case, calls)
        assert set(calls) <= {"ScatterAdd_token", "ScatterUpdate_token"}, (case, calls)
    assert plain["results"]["train/adam"] != plain["results"]["train/adam_nesterov"]  # the cases differ


def test_launcher_reports_what_ran(runs):
    report = [line for line in runs["patched"]["stderr"].splitlines() if line.startswith("ms_scatter.patch:")]
    assert len(report) == 1, runs["patched"]["stderr"][-3000:]
    assert "MindSpore entry points replaced" in report[0]
    total = sum(n for calls in runs["patched"]["calls"].values() for entry, n in calls.items()
                if entry.startswith("ScatterAdd"))
    assert f"ScatterAdd {total}," in report[0] and "ScatterUpdate " in report[0], report[0]


def test_graph_setitem_runs_on_our_kernels(runs):
    plain, patched = runs["plain"], runs["patched"]
    assert isinstance(plain["results"]["setitem"], dict)
    assert patched["results"]["setitem"] == plain["results"]["setitem"]
    # the Tensor by TensorScatterUpdate, the Parameter in place by ScatterNdUpdate
    assert _ran(patched["calls"]["setitem"], "TensorScatterUpdate", "ScatterNdUpdate_token")


@pytest.mark.parametrize("method", ["scatter_add", "scatter_sub", "scatter_mul", "scatter_div", "scatter_max",
                                    "scatter_min"])
def test_tensor_methods_match_the_builtins(runs, method):
    plain, patched = runs["plain"], runs["patched"]
    op = "TensorScatter" + method.split("_")[1].title()
    reference = plain["results"][f"method/PYNATIVE/{method}"]
    assert not reference.startswith("error")
    for mode in ("PYNATIVE", "GRAPH"):
        case = f"method/{mode}/{method}"
        if mode == "GRAPH" and method == "scatter_div":
            # MindSpore 2.10 compiles x.scatter_div as standard_method.tensor_scatter_div, which it
            # lacks; the patch adds it
            assert "tensor_scatter_div" in plain["results"][case]
        else:
            assert plain["results"][case] == reference, case
        assert patched["results"][case] == reference, case
        assert patched["calls"][case] == {op: 1}, (case, patched["calls"][case])
    # the (dim, index, src) form of scatter_add is not ours: still MindSpore's
    dim_form = "method/PYNATIVE/scatter_add(dim, index, src)"
    assert patched["results"][dim_form] == plain["results"][dim_form] and patched["calls"][dim_form] == {}


@pytest.mark.parametrize("where", ["PYNATIVE", "GRAPH"])
def test_every_mindspore_ops_name_runs_ours(runs, where):
    plain, patched = runs["plain"], runs["patched"]
    names = [n for op in OPS for n in (op, infer.function_name(op))]
    if where == "GRAPH":
        got, expected = patched["results"]["ops/GRAPH"], plain["results"]["ops/GRAPH"]
        assert isinstance(expected, dict), expected
        assert "scatter_sub" not in expected and "scatter_sub" in got  # added to mindspore.ops by the patch
        assert {k: v for k, v in got.items() if k != "scatter_sub"} == expected
        calls = patched["calls"]["ops/GRAPH"]
        for op in OPS:
            entry = op if op.startswith("Tensor") else op + "_token"
            assert calls.get(entry) == 2, (op, calls)  # the primitive and the function
        return
    for name in names:
        case = f"ops/PYNATIVE/{name}"
        op = name if name[0].isupper() else "".join(p.title() for p in name.split("_"))
        entry = op if op.startswith("Tensor") else op + "_token"
        if name == "scatter_sub":
            assert case not in plain["results"]
            assert patched["results"][case] == patched["results"]["ops/PYNATIVE/ScatterSub"]
        else:
            assert patched["results"][case] == plain["results"][case], case
        assert patched["calls"][case] == {entry: 1}, (case, patched["calls"][case])


def test_hidden_builtins_come_back_with_the_patch(runs):
    """MindSpore's scatter names deleted from its namespaces (every other reference made to
    raise) before ms_scatter is imported: patch() brings them back and the same programs
    give the same results, on our kernels."""
    hidden, patched = runs["hidden"], runs["patched"]
    results = hidden["results"]
    assert results["hidden"] >= 150
    assert results["without_patch"] == {"ops.ScatterAdd": "AttributeError",
                                        "ops.function.array_func.scatter_add_": "RuntimeError",
                                        "Tensor.scatter_max": "AttributeError"}
    assert results["patched_sites"] >= 150
    compared = [k for k in patched["results"] if k != "method/PYNATIVE/scatter_add(dim, index, src)"]
    for case in compared:
        assert results[case] == patched["results"][case], case
        assert hidden["calls"][case] == patched["calls"][case], case


# ----------------------------------------------------------------- patch / unpatch

def _snapshot():
    """Every attribute of every loaded MindSpore module, of Tensor and of the registry, by
    identity."""
    from mindspore.common._register_for_tensor import tensor_operator_registry
    snap = {}
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "mindspore" or name.startswith("mindspore.")):
            try:
                snap[name] = {k: id(v) for k, v in vars(module).items()}
            except TypeError:
                pass
    snap["<Tensor>"] = {k: id(v) for k, v in vars(Tensor).items()}
    snap["<registry>"] = {k: id(v) for k, v in vars(tensor_operator_registry).items()}
    return snap


def _compare(before, after):
    diffs = []
    for name, attrs in before.items():
        now = after.get(name, {})
        diffs += [f"{name}.{k}" for k in set(attrs) | set(now) if attrs.get(k) != now.get(k)]
    return sorted(diffs)


def test_patch_replaces_every_site_and_unpatch_restores_exactly():
    assert not ms_scatter.patch.is_patched()
    before = _snapshot()
    original_add, original_fn = ops.ScatterAdd, ops.tensor_scatter_max
    handle = ms_scatter.patch()
    try:
        assert handle.active and ms_scatter.patch.is_patched()
        assert len(handle.replaced) >= 150
        assert ops.ScatterAdd is ms_scatter.ScatterAdd
        assert ops.operations.TensorScatterMax is ms_scatter.TensorScatterMax
        assert ops.tensor_scatter_max is ms_scatter.tensor_scatter_max
        assert ops.scatter_sub is ms_scatter.scatter_sub and "mindspore.ops:scatter_sub" in handle.added
        assert ops.functional.tensor_scatter_update is ms_scatter.tensor_scatter_update
        assert isinstance(ops.function.array_func.scatter_add_, ms_scatter.ScatterAdd)
        assert ops.scatter_nd_add.__name__ == "scatter_nd_add"  # ours, with MindSpore's use_locking
        with pytest.raises(TypeError, match="For 'ScatterNdAdd', 'use_locking' must be a bool"):
            ops.scatter_nd_add(None, None, None, use_locking=1)
        from mindspore.common._register_for_tensor import tensor_operator_registry
        assert tensor_operator_registry.get("tensor_scatter_min") is ms_scatter.tensor_scatter_min
        for site in handle.replaced:  # each is ours now
            module, path = site.split(":")
            owner, name = _patch._resolve(module, path)
            assert handle._ours(getattr(owner, name)), site
    finally:
        assert ms_scatter.unpatch() is handle
    assert not handle.active and ms_scatter.unpatch() is None
    assert ops.ScatterAdd is original_add and ops.tensor_scatter_max is original_fn
    assert not hasattr(ops, "scatter_sub")
    assert _compare(before, _snapshot()) == []


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
def test_unsorted_segment_names_run_ours_under_the_patch(mode):
    """MindSpore's unsorted segment class, function and Tensor method run our kernels under
    the patch (in a graph too), with MindSpore's results where the policies agree; unpatch
    puts MindSpore's back. scatter_nd stays MindSpore's (its Tensor item assignment takes bool)."""
    x = Tensor(np.arange(8, dtype=np.float32).reshape(4, 2))
    ids = Tensor(np.array([0, 2, -1, 0], np.int32))

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.op = ops.UnsortedSegmentSum()

        def construct(self, a, i):
            return self.op(a, i, 3), ops.unsorted_segment_max(a, i, 3), a.unsorted_segment_min(i, 3)

    expected = [o.asnumpy() for o in Net()(x, ids)]
    original = ops.UnsortedSegmentSum
    with ms_scatter.patched():
        assert ops.UnsortedSegmentSum is ms_scatter.UnsortedSegmentSum
        assert ops.unsorted_segment_max is ms_scatter.unsorted_segment_max
        assert ops.scatter_nd is not ms_scatter.scatter_nd
        before = ms_scatter.call_counts()
        got = [o.asnumpy() for o in Net()(x, ids)]
        after = ms_scatter.call_counts()
    assert ops.UnsortedSegmentSum is original
    for op in ("UnsortedSegmentSum", "UnsortedSegmentMax", "UnsortedSegmentMin"):
        assert after.get(op, 0) == before.get(op, 0) + 1, op
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)


def _together(n, fn):
    """Runs fn() in n threads released at once; returns their results."""
    barrier, results, errors = threading.Barrier(n), [None] * n, []

    def run(k):
        try:
            barrier.wait()
            results[k] = fn()
        except Exception as err:  # noqa: BLE001
            errors.append(err)
    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return results


def test_patch_is_idempotent_scoped_and_thread_safe():
    before = _snapshot()
    for _ in range(3):
        handles = _together(6, ms_scatter.patch)
        assert all(h is handles[0] for h in handles) and handles[0].active
        assert len(set(handles[0].replaced)) == len(handles[0].replaced)  # each site once
        undone = _together(6, ms_scatter.unpatch)
        assert sum(u is handles[0] for u in undone) == 1 and undone.count(None) == 5
        assert _compare(before, _snapshot()) == []

    def storm():
        for k in range(4):
            with ms_scatter.patched() as h:
                assert isinstance(h, _patch.Handle)
            (ms_scatter.patch if k % 2 else ms_scatter.unpatch)()
    _together(4, storm)
    ms_scatter.unpatch()
    assert _compare(before, _snapshot()) == []
    # a second patch() is the same handle; patched() inside an active patch leaves it active
    first = ms_scatter.patch()
    try:
        assert ms_scatter.patch() is first
        with ms_scatter.patched() as inner:
            assert inner is first
        assert first.active and ops.ScatterAdd is ms_scatter.ScatterAdd
    finally:
        ms_scatter.unpatch()
    with ms_scatter.patched() as scoped:
        assert ops.TensorScatterDiv is ms_scatter.TensorScatterDiv
    assert not scoped.active and ops.TensorScatterDiv is not ms_scatter.TensorScatterDiv
    assert _compare(before, _snapshot()) == []


def test_tensor_methods_in_pynative_under_patch():
    x = Tensor([[1.0, 2.0], [3.0, 4.0]], ms.float32)
    i, u = Tensor([[1], [0]], ms.int32), Tensor([[5.0, 0.5], [-1.0, 6.0]], ms.float32)
    expected = {m: getattr(x, m)(i, u).asnumpy() for m in ("scatter_max", "scatter_div", "scatter_add")}
    before = ms_scatter.call_counts()
    with ms_scatter.patched():
        got = {m: getattr(x, m)(i, u).asnumpy() for m in expected}
        param = ms.Parameter(Tensor(x.asnumpy()), name="p")
        assert param.scatter_min(i, u).asnumpy().tolist() == [[-1.0, 2.0], [3.0, 0.5]]  # Parameter inherits
    after = ms_scatter.call_counts()
    assert all((got[m] == expected[m]).all() for m in expected)
    assert {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)} == {
        "TensorScatterMax": 1, "TensorScatterDiv": 1, "TensorScatterAdd": 1, "TensorScatterMin": 1}


SUBPROCESS_CHECKS = r'''
import sys
import mindspore
from mindspore.common._register_for_tensor import tensor_operator_registry
from mindspore import ops, Tensor
before = {k: id(v) for k, v in vars(ops).items()}
registry = {k: id(v) for k, v in vars(tensor_operator_registry).items()}
methods = {k: id(v) for k, v in vars(Tensor).items()}
import ms_scatter                                  # nothing changes without patch()
assert {k: id(vars(ops)[k]) for k in before} == before
assert {k: id(v) for k, v in vars(tensor_operator_registry).items()} == registry
assert {k: id(v) for k, v in vars(Tensor).items()} == methods
assert "mindspore.ops.tensor_method" not in sys.modules
original = ops.function.array_func.tensor_scatter_add
h = ms_scatter.patch()
import mindspore.ops.tensor_method as tm           # imported under the patch: ours
assert tm.tensor_scatter_add is ms_scatter.tensor_scatter_add
from mindspore.ops import ScatterAdd, scatter_nd_max
assert ScatterAdd is ms_scatter.ScatterAdd and scatter_nd_max.__module__ == "ms_scatter"
assert any(s.startswith("mindspore.ops.tensor_method:") for s in h.replaced)
ms_scatter.unpatch()
assert tm.tensor_scatter_add is original           # MindSpore's again
assert ops.ScatterAdd is not ms_scatter.ScatterAdd
print("OK", len(h.replaced))
'''


def test_nothing_changes_without_patch_and_later_imports_are_patched(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SUBPROCESS_CHECKS], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stderr[-4000:]


def test_site_table_matches_the_installed_wheel(tmp_path):
    """ops/_patch_sites.py holds, for this MindSpore release, what the introspection of every
    module of its wheel finds (regenerate with python -m ms_scatter.patch --write-sites PATH
    on each release), and the tables of the other releases are kept as they were."""
    path = tmp_path / "sites.py"
    proc = subprocess.run([sys.executable, "-m", "ms_scatter.patch", "--write-sites", str(path)], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    namespace = {}
    exec(path.read_text(), namespace)  # noqa: S102 - our own generated table
    from ms_scatter._patch_sites import SITES, VERSIONS
    key = _patch.release_key()
    assert key in SITES, f"no site table for MindSpore {ms.__version__}: run --write-sites on it"
    assert _patch.release_key(VERSIONS[key]) == key
    assert namespace["SITES"][key] == SITES[key]
    assert {k: v for k, v in namespace["SITES"].items() if k != key} == {k: v for k, v in SITES.items() if k != key}
    assert _patch.table_key(SITES) == key
    for table in SITES.values():
        assert len(table) >= 150 and {s[2] for s in table} == {"class", "function", "instance", "method"}
        assert table == sorted(table, key=lambda s: (s[0], s[1])) and len(set(table)) == len(table)


def test_site_table_choice():
    """The running release's table; a release without one takes the newest older table."""
    tables = {"2.7": [], "2.8": [], "2.10": []}
    assert _patch.table_key(tables, "2.8") == "2.8"
    assert _patch.table_key(tables, "2.9") == "2.8"
    assert _patch.table_key(tables, "2.11") == "2.10"
    assert _patch.table_key(tables, "2.6") == "2.7"
    assert _patch.release_key("2.10.0") == "2.10" and _patch.release_key("2.7.1.post1") == "2.7"


def test_patch_is_a_callable_module_and_a_launcher(tmp_path):
    import types
    assert isinstance(ms_scatter.patch, types.ModuleType) and callable(ms_scatter.patch)
    (tmp_path / "prog.py").write_text(
        "import sys, mindspore\n"
        "import ms_scatter\n"
        "print('ARGV', sys.argv, __name__, mindspore.ops.ScatterAdd is ms_scatter.ScatterAdd)\n")
    for args, argv0 in ((["prog.py", "a", "-b"], "prog.py"), (["-m", "prog", "a", "-b"], str(tmp_path / "prog.py"))):
        proc = subprocess.run([sys.executable, "-m", "ms_scatter.patch"] + args, cwd=tmp_path, env=_env(),
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"ARGV [{argv0!r}, 'a', '-b'] __main__ True" in proc.stdout, proc.stdout
    proc = subprocess.run([sys.executable, "-m", "ms_scatter.patch"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode != 0 and "usage" in proc.stderr.lower()


LAUNCHED = """import os, sys
assert "mindspore" not in sys.modules, "MindSpore was imported before the program's first line"
os.environ["GLOG_v"] = "3"  # read by MindSpore at import: errors only
{first}
import numpy as np
import mindspore as ms
from mindspore import Parameter, Tensor, nn, ops
import ms_scatter
ms.set_context(mode=ms.GRAPH_MODE, device_target="CPU")  # logs a deprecation WARNING at GLOG_v=2


class Net(nn.Cell):
    def __init__(self):
        super().__init__()
        self.add = ops.ScatterAdd()
        self.p = Parameter(Tensor(np.zeros((3, 2), np.float32)), name="p")

    def construct(self, i, u):
        return self.add(self.p, i, u)


net = Net()
net(Tensor(np.array([0, 2], np.int32)), Tensor(np.ones((2, 2), np.float32)))
print("PATCHED", ops.ScatterAdd is ms_scatter.ScatterAdd, net.p.asnumpy().sum(), ms_scatter.call_counts()["ScatterAdd"])
"""


@pytest.mark.parametrize("first", ["", "import ms_scatter"])
def test_launcher_imports_mindspore_when_the_program_does(tmp_path, first):
    """A variable the program sets before its own import of MindSpore reaches MindSpore (here
    GLOG_v=3 hides MindSpore's warnings), and the patch is in place from that import on,
    whether the program imports MindSpore or ms_scatter first."""
    (tmp_path / "prog.py").write_text(LAUNCHED.format(first=first))
    env = dict(os.environ, MS_SCATTER_QUIET="1")
    env.pop("GLOG_v", None)
    proc = subprocess.run([sys.executable, "-m", "ms_scatter.patch", "--report", "prog.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "PATCHED True 4.0 1" in proc.stdout, proc.stdout
    assert "[WARNING]" not in proc.stderr, proc.stderr[-3000:]
    assert "replaced" in proc.stderr or "sites" in proc.stderr, proc.stderr[-3000:]  # the report
    # without GLOG_v in the program, the same warning shows: the check above can fail
    (tmp_path / "prog.py").write_text(LAUNCHED.format(first=first).replace('os.environ["GLOG_v"] = "3"', "pass"))
    proc = subprocess.run([sys.executable, "-m", "ms_scatter.patch", "prog.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 0 and "[WARNING]" in proc.stderr, proc.stderr[-3000:]


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_instance_made_before_patch_warns_once(mode):
    """A MindSpore primitive made before patch() keeps MindSpore's kernel: its Python calls say
    so, once per operator, while the patch is active; unpatch() restores MindSpore's class."""
    import warnings
    from ms_scatter import _patch
    op_name = "ScatterMax"
    old = getattr(ops, op_name)()
    cls = type(old)
    call_before = cls.__dict__.get("__call__")
    _patch._WARNED.discard(op_name)  # pylint: disable=protected-access
    p = Parameter(Tensor(np.zeros((3, 2), np.float32)), name="p")
    i, u = Tensor(np.array([1], np.int32)), Tensor(np.ones((1, 2), np.float32))
    with ms_scatter.patched():
        with pytest.warns(RuntimeWarning, match=rf"a MindSpore {op_name} made before patch\(\) ran MindSpore's own "
                                                rf"kernel; make the op after patch\(\), or use ms_scatter.{op_name}"):
            old(p, i, u)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            old(p, i, u)  # once per operator
            ops.ScatterMax()(p, i, u)  # made under the patch: ours, no warning
    assert cls.__dict__.get("__call__") is call_before
    assert p.asnumpy().tolist() == [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
