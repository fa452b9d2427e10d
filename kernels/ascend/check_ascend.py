"""Check ms_scatter's Ascend kernels on an Ascend host, in minutes, and print a table.

    python kernels/ascend/check_ascend.py [--build] [--opp DIR] [--quick] [--no-bench]
    python kernels/ascend/check_ascend.py --emulate      # the same checks on CPU (no chip, no CANN)

Needs ms_scatter installed (pip install .) with MindSpore 2.10 for Ascend and a CANN toolkit
(MindSpore 2.10 supports CANN 8.2, 8.3, 8.5, 9.0, 9.1; source its set_env.sh first).

1. The package: the one ``pip install .`` built into ms_scatter (if any), else (or with --build)
   built now by build_ascend.py into a temporary directory, or the vendor directory --opp.
   ASCEND_CUSTOM_OPP_PATH is set before MindSpore runs any Ascend op.
2. Through MindSpore, device target Ascend, PYNATIVE and GRAPH:
   * the seed examples (every printed example of the reference pages), both forms;
   * the oracle suite: the 21 primitives and 21 functions on seeded cases with duplicate
     indices, value and index dtypes rotating over the operators (every registered dtype pair
     is covered), the result and the Parameter / input_x against the numpy loop oracle;
   * the policies: float16 rounded once, NaN in Max/Min, integer wrap and truncating division,
     index order with duplicates;
   * errors: PYNATIVE raises ScatterIndexError / ScatterZeroDivisionError with the CPU kernel's
     exact message and leaves input_x unchanged; a GRAPH step writes nothing;
   * a larger call (ScatterAdd, float32 1e5 x 64, 1e5 indices) against the oracle, and its time
     against MindSpore's own ScatterAdd in the same run (unless --no-bench).
3. A probe for future work: whether ops.Assert (documented for CPU/GPU only) fails an Ascend
   graph step.

Exits 1 if a check failed. --emulate runs everything on the CPU target with the host build of
the op (tests/_ascend_build.py, MS_SCATTER_ASCEND_EMULATION): a check of this script and of the
Python layer, not of the chip.
"""
import argparse
import importlib.util
import os
import sys
import tempfile
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(args):
    """Choose the package (or the emulation) and set the environment; before MindSpore runs."""
    if args.emulate:
        os.environ["MS_SCATTER_ASCEND_EMULATION"] = _load("_mss_ascend_build", os.path.join(
            REPO, "tests", "_ascend_build.py")).build()
        return "CPU", "emulated (host build of the op, tests/ascend_core_driver.cc)"
    vendor = args.opp
    if not vendor and not args.build:
        spec = importlib.util.find_spec("ms_scatter")
        if spec and spec.origin:
            installed = os.path.join(os.path.dirname(spec.origin), "kernels", "ascend", "opp", "vendors", "ms_scatter")
            if os.path.isfile(os.path.join(installed, "op_api", "lib", "libcust_opapi.so")):
                vendor = installed
    if not vendor:
        build_ascend = _load("_mss_build_ascend", os.path.join(HERE, "build_ascend.py"))
        root = tempfile.mkdtemp(prefix="ms_scatter_ascend_check_")
        vendor = build_ascend.build(os.path.join(root, "opp"), verbose=True)
    paths = [p for p in os.environ.get("ASCEND_CUSTOM_OPP_PATH", "").split(":") if p and p != vendor]
    os.environ["ASCEND_CUSTOM_OPP_PATH"] = ":".join([vendor] + paths)
    return "Ascend", vendor


class Table:
    def __init__(self):
        self.rows = []

    def run(self, name, mode, fn):
        t0 = time.perf_counter()
        passed, total, note = 0, 0, ""
        try:
            passed, total, note = fn()
        except Exception as err:  # a crash of a whole check is a failure of it, with its reason
            note = f"{type(err).__name__}: {str(err).splitlines()[0][:150]}"
            traceback.print_exc()
        self.rows.append((name, mode, passed, total, time.perf_counter() - t0, note))
        status = "ok" if total and passed == total else "FAIL"
        print(f"[{status}] {name} ({mode}): {passed}/{total} {note}", flush=True)

    def print(self):
        width = max(len(r[0]) for r in self.rows)
        print(f"\n{'check':<{width}}  {'mode':<8}  {'passed':>9}  {'s':>6}  note")
        for name, mode, passed, total, seconds, note in self.rows:
            mark = "" if total and passed == total else "  <-- FAILED"
            print(f"{name:<{width}}  {mode:<8}  {passed:>4}/{total:<4}  {seconds:6.1f}  {note}{mark}")
        return all(total and passed == total for _, _, passed, total, _, _ in self.rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", action="store_true", help="build the package now even if one is installed")
    ap.add_argument("--opp", help="an installed vendor directory (.../vendors/ms_scatter) to check")
    ap.add_argument("--quick", action="store_true", help="one dtype pair per operator, fewer error cases")
    ap.add_argument("--no-bench", action="store_true", help="skip the timing of the larger call")
    ap.add_argument("--emulate", action="store_true", help="run on CPU with the host build of the op")
    args = ap.parse_args(argv)
    target, where = prepare(args)

    import numpy as np
    import mindspore as ms
    from mindspore import Parameter, Tensor, nn, ops

    import ms_scatter
    from ms_scatter import _ascend, infer
    from ms_scatter.seed_examples import SEED_EXAMPLES, run_example
    from ms_scatter.testing import call_kernel, oracle, random_case, split_op

    ms.set_context(device_target=target)
    if not args.emulate:  # the package checked may not be the installed one
        _ascend.VENDOR_DIR = os.environ["ASCEND_CUSTOM_OPP_PATH"].split(":")[0]
    os.environ.setdefault("MS_SCATTER_QUIET", "1")
    print(f"ms_scatter Ascend check: MindSpore {ms.__version__}, target {target}, package {where}", flush=True)

    ops_list = list(ms_scatter.primitives.PRIMITIVES)
    dtypes = _ascend.ASCEND_VALUE_DTYPES
    index_dtypes = _ascend.ASCEND_INDEX_DTYPES

    def set_mode(mode):
        ms.set_context(mode=ms.GRAPH_MODE if mode == "GRAPH" else ms.PYNATIVE_MODE)

    def in_place(op):
        return split_op(op)[0] != "TensorScatter"

    class InPlace(nn.Cell):
        def __init__(self, p, fn):
            super().__init__()
            self.p, self.fn = p, fn

        def construct(self, i, u):
            return self.fn(self.p, i, u)

    class OutOfPlace(nn.Cell):
        def __init__(self, fn):
            super().__init__()
            self.fn = fn

        def construct(self, x, i, u):
            return self.fn(x, i, u)

    def call(mode, fn, op, x, indices, updates):
        """(output, target) of one call; target: the Parameter (in place) or the input Tensor."""
        set_mode(mode)
        target = Parameter(Tensor(x), name="p") if in_place(op) else Tensor(x)
        i, u = Tensor(indices), Tensor(updates)
        if mode == "GRAPH":
            out = InPlace(target, fn)(i, u) if in_place(op) else OutOfPlace(fn)(target, i, u)
        else:
            out = fn(target, i, u)
        return out, target

    def same(a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.kind == "f":
            return bool(((a == b) | (np.isnan(a) & np.isnan(b))).all())
        return bool((a == b).all())

    def form(op, kind):
        return getattr(ms_scatter, op)() if kind == "primitive" else getattr(ms_scatter, infer.function_name(op))

    def rng(*case):
        return np.random.default_rng(zlib.crc32(repr(case).encode()))

    table = Table()

    for mode in ("PYNATIVE", "GRAPH"):
        def seeds(mode=mode):
            ok = 0
            for ex in SEED_EXAMPLES:
                ok += str(run_example(ex, mode)) == ex["expected"]
            return ok, len(SEED_EXAMPLES), ""
        table.run("seed examples", mode, seeds)

    def oracle_cases():
        cases = []
        pairs = [(d, i) for d in dtypes for i in index_dtypes]
        for n, op in enumerate(ops_list):
            chosen = [pairs[n % len(pairs)]] if args.quick else [pairs[(n + k) % len(pairs)] for k in range(0, 14, 5)]
            for dtype, index_dtype in chosen:
                shape = (5, 3) if split_op(op)[0] == "Scatter" else (4, 3, 2)
                x, idx, upd = random_case(rng(op, dtype, index_dtype), op, shape, 6, dtype, index_dtype)
                vectors = idx.reshape(6, -1)
                vectors[-1] = vectors[0]  # a duplicate
                cases.append((op, x, idx, upd))
        return cases

    cases = oracle_cases()
    for mode in ("PYNATIVE", "GRAPH"):
        def suite(mode=mode):
            ok = total = 0
            covered = set()
            for op, x, idx, upd in cases:
                expected = oracle(op, x, idx, upd)
                for kind in ("primitive", "function"):
                    total += 1
                    out, target = call(mode, form(op, kind), op, x, idx, upd)
                    good = same(out.asnumpy(), expected)
                    good &= same(target.asnumpy(), expected if in_place(op) else x)
                    ok += good
                    covered.add((str(x.dtype), str(idx.dtype)))
            return ok, total, f"{len(covered)} of {len(dtypes) * len(index_dtypes)} dtype pairs"
        table.run("oracle: 21 ops x 2 forms", mode, suite)

    policy_cases = [
        ("float16 rounded once", "ScatterNdAdd", np.full((4, 8), 2048, np.float16), np.zeros((64, 1), np.int32),
         np.ones((64, 8), np.float16)),
        ("NaN in Max", "ScatterMax", np.array([[np.nan, 1.0], [2.0, 3.0]], np.float32), np.array([0, 1, 1], np.int32),
         np.array([[5.0, np.nan], [np.nan, 0.0], [7.0, 8.0]], np.float32)),
        ("NaN in Min", "TensorScatterMin", np.array([[np.nan, 1.0], [2.0, 3.0]], np.float16),
         np.array([[0], [1], [1]], np.int64), np.array([[5.0, np.nan], [np.nan, 0.0], [7.0, 8.0]], np.float16)),
        ("int8 wrap", "ScatterAdd", np.array([127, -128, 5], np.int8), np.array([0, 1, 0], np.int32),
         np.array([1, -1, 100], np.int8)),
        ("int32 truncating Div", "ScatterNdDiv", np.array([7, -7, -2147483648, 9], np.int32),
         np.array([[0], [1], [2], [3]], np.int32), np.array([2, 2, -1, -4], np.int32)),
        ("last Update wins", "ScatterUpdate", np.zeros((3, 2), np.float32), np.array([1, 1, 1], np.int64),
         np.array([[1, 1], [2, 2], [3, 3]], np.float32)),
    ]
    for mode in ("PYNATIVE", "GRAPH"):
        def policies(mode=mode):
            ok = 0
            for _, op, x, idx, upd in policy_cases:
                out, _ = call(mode, form(op, "function"), op, x, idx, upd)
                ok += same(out.asnumpy(), oracle(op, x, idx, upd))
            return ok, len(policy_cases), ", ".join(c[0] for c in policy_cases)
        table.run("policies", mode, policies)

    def error_cases():
        out = []
        for op in (ops_list if not args.quick else ["ScatterAdd", "ScatterNdUpdate", "TensorScatterMax"]):
            shape = (5, 3) if split_op(op)[0] == "Scatter" else (4, 3, 2)
            x, idx, upd = random_case(rng("err", op), op, shape, 6, "float32", "int64")
            idx.reshape(-1)[3] = 9 if idx.reshape(-1)[3] >= 0 else -9
            out.append((op, x, idx, upd, ms_scatter.ScatterIndexError))
        for op in ("ScatterDiv", "ScatterNdDiv", "TensorScatterDiv"):
            shape = (5, 3) if op == "ScatterDiv" else (4, 3, 2)
            x, idx, upd = random_case(rng("zero", op), op, shape, 6, "int32", "int32")
            upd.reshape(-1)[4] = 0
            out.append((op, x, idx, upd, ms_scatter.ScatterZeroDivisionError))
        return out

    errors = error_cases()

    def pynative_errors():
        ok = 0
        for op, x, idx, upd, exc in errors:
            rc, _, _ = call_kernel(op, x, idx, upd, "token" if in_place(op) else "tensor")
            expected = ms_scatter.last_error()[1]
            try:
                call("PYNATIVE", form(op, "primitive"), op, x, idx, upd)
                good = False
            except exc as err:
                good = rc != 0 and str(err) == expected
            ok += good
        return ok, len(errors), "the CPU kernel's exact message, input_x unchanged"

    def graph_errors():
        ok = 0
        for op, x, idx, upd, _ in errors:
            out, target = call("GRAPH", form(op, "function"), op, x, idx, upd)
            ok += same(out.asnumpy(), x) and same(target.asnumpy(), x)
        return ok, len(errors), "an invalid call writes nothing, the step goes on"

    table.run("errors", "PYNATIVE", pynative_errors)
    table.run("errors", "GRAPH", graph_errors)

    def large(mode):
        def run():
            g = rng("large")
            x = g.standard_normal((100_000, 64)).astype(np.float32)
            idx = g.integers(0, 100_000, 100_000).astype(np.int32)
            upd = g.standard_normal((100_000, 64)).astype(np.float32)
            expected = x.copy()
            np.add.at(expected, idx, upd)
            out, target = call(mode, form("ScatterAdd", "function"), "ScatterAdd", x, idx, upd)
            good = np.allclose(out.asnumpy(), expected, rtol=1e-5, atol=1e-4)
            note = ""
            if not args.no_bench and mode == "PYNATIVE":
                p = Parameter(Tensor(x), name="bench")
                ti, tu = Tensor(idx), Tensor(upd)

                def median(f, reps=10):
                    f()
                    times = []
                    for _ in range(reps):
                        t0 = time.perf_counter()
                        f().asnumpy()
                        times.append(time.perf_counter() - t0)
                    return sorted(times)[reps // 2] * 1e3

                ours = median(lambda: ms_scatter.scatter_add(p, ti, tu))
                # anchor: one elementwise op over the updates (no scatter), on the same device
                anchor = median(lambda: tu + tu)
                note = (f"ms_scatter {ours:.2f} ms; anchor updates + updates {anchor:.2f} ms "
                        f"(scatter / anchor {ours / anchor:.1f}x)")
            return int(good), 1, note
        return run

    for mode in ("PYNATIVE", "GRAPH"):
        table.run("1e5 x 64 float32, 1e5 indices", mode, large(mode))

    def assert_probe():
        set_mode("GRAPH")

        class Probe(nn.Cell):
            def __init__(self):
                super().__init__()
                self.check = ops.Assert(3)

            def construct(self, x):
                self.check(x > 1, (x,))
                return x * 2

        try:
            Probe()(Tensor(np.array([0.5], np.float32))).asnumpy()
            return 1, 1, "informational: ops.Assert did NOT fail the step"
        except Exception as err:  # what it raises is the information
            return 1, 1, f"informational: ops.Assert failed the step ({type(err).__name__})"

    table.run("probe: ops.Assert in a graph", "GRAPH", assert_probe)

    ok = table.print()
    print(f"\n{'all checks passed' if ok else 'SOME CHECKS FAILED'} (package: {where})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
