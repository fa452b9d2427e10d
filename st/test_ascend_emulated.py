"""The Ascend path (ops/_ascend.py) through MindSpore on CPU, with an emulated Ascend op.

On an Ascend target every primitive and function calls the CANN op MsScatterNd<R> through
``ops.Custom("MsScatterNd<R>", func_type="aot")``. Here MS_SCATTER_ASCEND_EMULATION names a
host library whose aot entries MsScatterNd<R> have the op's inputs and outputs (x, indices,
updates -> y, status) and run its engine: tests/ascend_core_driver.cc, kernels/ascend/
scatter_core.h on 8 emulated cores with a 4 KiB UB (built by tests/_ascend_build.py). So the
Python layer of the Ascend path runs here as on a chip: the Scatter* reshape, PYNATIVE's status
check and error, the out-of-place result and ops.assign of the in-place families, the
__ms_class__ route of primitives in graphs, jit, the gated graph on an invalid call. What does
not run here: CANN, the Ascend C kernel on a chip, MindSpore's Ascend launch (aclnn).

* every seed example, both forms, PYNATIVE and GRAPH;
* each of the 21 primitives and 21 functions on a seeded oracle case with duplicate indices,
  PYNATIVE and GRAPH (value and index dtypes rotate over the operators);
* errors: PYNATIVE raises ScatterIndexError / ScatterZeroDivisionError with exactly the aot CPU
  kernel's message; a GRAPH step writes nothing and goes on; inference errors as on the aot path;
* without the package: the error that says how to build it; MS_SCATTER_KERNELS=host (PYNATIVE);
* ASCEND_CUSTOM_OPP_PATH at import, the registration against op_host, the CANN versions.
"""
import importlib.util
import os
import re
import zlib

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor

import ms_scatter
from ms_scatter import _ascend
from ms_scatter._lib import DIVISION_BY_ZERO, INDEX_OUT_OF_RANGE
from ms_scatter.seed_examples import SEED_EXAMPLES
from ms_scatter.testing import call_kernel, oracle, random_case, split_op

from .helpers import assert_same, assert_unchanged, call_in_mode, function_name, in_place, target_for
from .test_ordering import TwiceCell, _case as _ordering_case
from .test_seeds import _check_printed, _ids, _other_form, _run

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPS = list(ms_scatter.primitives.PRIMITIVES)
ROTATE = ("float32", "int32", "float16", "int64", "uint8", "int8", "int16")  # the Ascend op's dtypes
SCATTER_SHAPE = (5, 3)  # Scatter*: indices (3, 2), updates (3, 2, 3)
ND_SHAPE = (4, 3, 2)    # ScatterNd*/TensorScatter*: depth 2, indices (3, 2, 2), updates (3, 2, 2)


def _load_build():
    spec = importlib.util.spec_from_file_location("_ms_scatter_ascend_build",
                                                  os.path.join(REPO, "tests", "_ascend_build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def emulation_library():
    return _load_build().build()


@pytest.fixture
def emulated(monkeypatch, emulation_library):
    """The Ascend path, with the emulated op, for this test only."""
    monkeypatch.setenv(_ascend.EMULATION_ENV, emulation_library)
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")  # the aot reference calls' stderr


def _rng(case):
    return np.random.default_rng(zlib.crc32(repr(case).encode()))


def _dtypes(op):
    n = OPS.index(op)
    return ROTATE[n % len(ROTATE)], ("int32", "int64")[(n // 4) % 2]


def _case(op, with_duplicate=True):
    family = split_op(op)[0]
    dtype, index_dtype = _dtypes(op)
    shape = SCATTER_SHAPE if family == "Scatter" else ND_SHAPE
    x, indices, updates = random_case(_rng(op), op, shape, 6, dtype, index_dtype, duplicates=True)
    if with_duplicate:
        vectors = indices.reshape(6, -1)
        vectors[-1] = vectors[0]
    return x, indices, updates


def _callable(op, kind):
    if kind == "primitive":
        prim = getattr(ms_scatter, op)()
        assert isinstance(prim._hybrid, _ascend.AscendOp)  # pylint: disable=protected-access
        return prim
    assert _ascend.use_ascend_path()
    return getattr(ms_scatter, function_name(op))


# ------------------------------------------------------------------ seed examples

EXAMPLES = pytest.mark.parametrize("example", SEED_EXAMPLES, ids=_ids())


@EXAMPLES
def test_seed_example(example, mode, emulated, capsys):
    call = getattr(ms_scatter, example["op"])
    if example["kind"] == "primitive":
        call = call()
        assert isinstance(call._hybrid, _ascend.AscendOp)  # pylint: disable=protected-access
    output, input_x = _run(example, mode, call)
    _check_printed(example, output, input_x, capsys)


@EXAMPLES
def test_seed_example_other_form(example, mode, emulated, capsys):
    output, input_x = _run(example, mode, _other_form(example))
    _check_printed(example, output, input_x, capsys)


# ------------------------------------------------------------------ against the oracle

@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("op", OPS)
def test_matches_oracle(op, kind, mode, emulated):
    x, indices, updates = _case(op)
    target = target_for(op, x)
    out = call_in_mode(mode, _callable(op, kind), op, target, indices, updates)
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected, f"{op} {kind} {mode}")
    if in_place(op):
        assert_same(target.asnumpy(), expected, f"{op} {kind} {mode}: the Parameter")
    else:
        assert_unchanged(target, x)


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("kind", ["primitive", "function"])
def test_program_order_in_graph(kind, mode, emulated):
    """As st/test_ordering.py on the aot path: `a = op(p); b = p * 1; c = op(p)`."""
    x, i, u, after1, after2 = _ordering_case("ScatterAdd")
    cell = TwiceCell(x, _callable("ScatterAdd", kind))
    a, a_inside, b, c = cell(Tensor(i), Tensor(u))
    assert_same(a_inside.asnumpy(), after1)
    assert_same(b.asnumpy(), after1)
    assert_same(c.asnumpy(), after2)
    assert_same(cell.p.asnumpy(), after2)
    assert_same(a.asnumpy(), after2)


@pytest.mark.parametrize("mode", ["JIT"], indirect=True)
@pytest.mark.parametrize("op", ["ScatterNdSub", "TensorScatterMin"])
def test_jit(op, mode, emulated):
    x, indices, updates = _case(op)
    target = target_for(op, x)
    out = call_in_mode(mode, _callable(op, "function"), op, target, indices, updates)
    assert_same(out.asnumpy(), oracle(op, x, indices, updates))


@pytest.mark.parametrize("kind", ["primitive", "function"])
def test_float16_updates_converted_into_float32_parameter(kind, mode, emulated):
    op = "ScatterNdAdd"
    x, indices, updates = random_case(_rng("f16"), op, ND_SHAPE, 6, "float32", "int32")
    updates16 = (updates * 1.37).astype(np.float16)
    p = Parameter(Tensor(x), name="p")
    out = call_in_mode(mode, _callable(op, kind), op, p, indices, updates16)
    expected = oracle(op, x, indices, updates16.astype(np.float32))
    assert out.dtype == ms.float32
    assert_same(out.asnumpy(), expected)
    assert_same(p.asnumpy(), expected)


@pytest.mark.parametrize("op,x_dtype,updates_dtype,error,match", [
    ("TensorScatterAdd", "float32", "float16", TypeError, "For 'TensorScatterAdd', the dtype of 'updates' must be"),
    ("ScatterSub", "int32", "float32", TypeError, "Data type conversion is not supported for a 'Parameter'"),
    ("ScatterNdMax", "float32", "float32", ValueError, "For 'ScatterNdMax', the shape of 'updates' must be"),
    ("ScatterNdMax", "float64", "float64", TypeError, "For 'ScatterNdMax', on Ascend 'input_x' must be one of"),
])
def test_inference_errors(op, x_dtype, updates_dtype, error, match, mode, emulated):
    x, indices, updates = random_case(_rng(op), op, SCATTER_SHAPE if op == "ScatterSub" else ND_SHAPE, 6, x_dtype,
                                      "int32")
    updates = updates.astype(updates_dtype)
    if error is ValueError:
        updates = updates[:2]
    target = target_for(op, x)
    with pytest.raises(error, match=match):
        call_in_mode(mode, _callable(op, "primitive"), op, target, indices, updates)
    assert_unchanged(target, x)


def test_rank_limit_on_ascend(mode, emulated):
    """The Ascend kernels' tiling takes ranks up to 8 (the other backends 64): above it the same
    ValueError as infer's rank rule, before anything is launched or written."""
    x = np.ones((2,) * 9, np.float32)
    indices = np.array([[1]], np.int32)
    updates = np.full((1,) + (2,) * 8, 3.0, np.float32)
    target = target_for("ScatterNdAdd", x)
    with pytest.raises(ValueError, match=r"For 'ScatterNdAdd', on Ascend the rank of 'input_x' must be <= 8, but "
                                         r"got 9\."):
        call_in_mode(mode, _callable("ScatterNdAdd", "primitive"), "ScatterNdAdd", target, indices, updates)
    assert_unchanged(target, x)
    small = np.ones((2,) * 8, np.float32)  # rank 8: runs
    out = call_in_mode(mode, _callable("TensorScatterAdd", "primitive"), "TensorScatterAdd", Tensor(small), indices,
                       np.full((1,) + (2,) * 7, 3.0, np.float32))
    assert_same(out.asnumpy(), oracle("TensorScatterAdd", small, indices, np.full((1,) + (2,) * 7, 3.0, np.float32)))


EDGE_CASES = {  # op: x, indices, updates
    "0-d indices": ("ScatterUpdate", np.arange(15, dtype=np.float32).reshape(5, 3), np.array(2, np.int32),
                    np.array([7, 8, 9], np.float32)),
    "no index": ("ScatterAdd", np.ones((4, 3), np.float32), np.zeros((0,), np.int32), np.zeros((0, 3), np.float32)),
    "depth 0": ("ScatterNdDiv", np.full((2, 3), 12, np.int32), np.zeros((2, 0), np.int64),
                np.array([[[2, 3, 4], [1, 2, 3]], [[1, 5, 1], [2, 2, -2]]], np.int32)),
    "1-d x": ("ScatterMax", np.ones((7,), np.float32), np.array([1, 1, 6], np.int64), np.array([3, 2, 3], np.float32)),
    "wide rows": ("ScatterNdMul", np.full((3, 700), 1.5, np.float32), np.array([[2], [0], [2]], np.int32),
                  np.full((3, 700), 2.0, np.float32)),
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_edge_shapes(case, mode, emulated):
    op, x, indices, updates = EDGE_CASES[case]
    p = Parameter(Tensor(x), name="p")
    out = call_in_mode(mode, _callable(op, "primitive"), op, p, indices, updates)
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected)
    assert_same(p.asnumpy(), expected)


# ------------------------------------------------------------------ errors

def _aot_message(op, x, indices, updates, code):
    """The aot CPU kernel's message for the same call (ctypes, no MindSpore)."""
    rc, _, _ = call_kernel(op, x, indices, updates, "tensor" if not in_place(op) else "token")
    assert rc == code
    return ms_scatter.last_error()[1]


def _with_bad_index(op, value_of, where):
    x, indices, updates = _case(op)
    depth = 1 if split_op(op)[0] == "Scatter" else indices.shape[-1]
    value = value_of(x.shape[where % depth])
    if not np.iinfo(indices.dtype).min <= value <= np.iinfo(indices.dtype).max:
        indices = indices.astype(np.int64)
    indices.reshape(-1)[where] = value
    return x, indices, updates


INDEX_ERRORS = [  # op, kind, bad value from the dimension's size, flat position in indices
    ("ScatterAdd", "primitive", lambda n: n, 3),
    ("ScatterMul", "function", lambda n: -1, 0),
    ("ScatterNdMin", "primitive", lambda n: -n, 5),
    ("ScatterNdUpdate", "function", lambda n: 2 ** 40 + 1, 11),
    ("TensorScatterSub", "primitive", lambda n: n, 1),
    ("TensorScatterMax", "function", lambda n: -1, 10),
]


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("op,kind,bad,where", INDEX_ERRORS, ids=[f"{c[0]}-{c[1]}" for c in INDEX_ERRORS])
def test_index_error_pynative_same_message_as_aot(op, kind, bad, where, mode, emulated):
    x, indices, updates = _with_bad_index(op, bad, where)
    expected = _aot_message(op, x, indices, updates, INDEX_OUT_OF_RANGE)
    fn = _callable(op, kind)
    target = target_for(op, x)
    with pytest.raises(ms_scatter.ScatterIndexError) as info:
        call_in_mode(mode, fn, op, target, indices, updates)
    assert str(info.value) == expected
    assert isinstance(info.value, IndexError) and isinstance(info.value, RuntimeError)
    assert_unchanged(target, x)
    good = indices.copy()
    good.reshape(-1)[where] = 0
    out = call_in_mode(mode, fn, op, target, good, updates)  # the same callable and target still work
    assert_same(out.asnumpy(), oracle(op, x, good, updates))


ZERO_DIVISIONS = [("ScatterDiv", "primitive", "int32"), ("ScatterNdDiv", "function", "int8"),
                  ("TensorScatterDiv", "primitive", "uint8")]


def _with_zero_divisor(op, dtype):
    family = split_op(op)[0]
    x, indices, updates = random_case(_rng(("zero", op)), op, SCATTER_SHAPE if family == "Scatter" else ND_SHAPE,
                                      6, dtype, "int64")
    updates.reshape(-1)[4] = 0
    return x, indices, updates


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
@pytest.mark.parametrize("op,kind,dtype", ZERO_DIVISIONS)
def test_zero_division_pynative_same_message_as_aot(op, kind, dtype, mode, emulated):
    x, indices, updates = _with_zero_divisor(op, dtype)
    expected = _aot_message(op, x, indices, updates, DIVISION_BY_ZERO)
    target = target_for(op, x)
    with pytest.raises(ms_scatter.ScatterZeroDivisionError) as info:
        call_in_mode(mode, _callable(op, kind), op, target, indices, updates)
    assert str(info.value) == expected
    assert isinstance(info.value, ZeroDivisionError)
    assert_unchanged(target, x)


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_index_error_with_empty_input_x(mode, emulated):
    """An empty input_x: nothing to write, the indices are still checked (on the host)."""
    x, indices, updates = np.zeros((3, 0), np.float32), np.array([1, 3], np.int32), np.zeros((2, 0), np.float32)
    expected = _aot_message("ScatterAdd", x, indices, updates, INDEX_OUT_OF_RANGE)
    with pytest.raises(ms_scatter.ScatterIndexError) as info:
        _callable("ScatterAdd", "primitive")(Parameter(Tensor(x), name="p"), Tensor(indices), Tensor(updates))
    assert str(info.value) == expected


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
@pytest.mark.parametrize("op,kind,what", [("ScatterAdd", "primitive", "index"),
                                          ("ScatterNdUpdate", "function", "index"),
                                          ("TensorScatterMax", "primitive", "index"),
                                          ("ScatterDiv", "function", "zero")])
def test_graph_invalid_call_writes_nothing(op, kind, what, mode, emulated):
    """A graph on the Ascend path cannot fail the step (no ops.Assert on Ascend, and an aot
    kernel there reports through outputs): an invalid call writes nothing, y = input_x."""
    if what == "index":
        x, indices, updates = _with_bad_index(op, lambda n: n + 2, 3)
    else:
        x, indices, updates = _with_zero_divisor(op, "int32")
    fn = _callable(op, kind)
    target = target_for(op, x)
    out = call_in_mode(mode, fn, op, target, indices, updates)
    assert_unchanged(target, x)
    assert_same(out.asnumpy(), x)
    if what == "index":
        indices.reshape(-1)[3] = 0
    else:
        updates.reshape(-1)[4] = 1
    out = call_in_mode(mode, fn, op, target, indices, updates)
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected)
    if in_place(op):
        assert_same(target.asnumpy(), expected)


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
def test_tensor_scatter_gradients_in_a_graph(mode, emulated):
    """TensorScatter* on the Ascend path carry ms_scatter._grad's rules (as on the aot path)."""
    op = "TensorScatterMax"
    x, indices, updates = random_case(_rng("grad"), op, ND_SHAPE, 6, "float32", "int32")
    fn = _callable(op, "function")

    def loss(a, u):
        return (fn(a, Tensor(indices), u) * Tensor(np.arange(24, dtype=np.float32).reshape(ND_SHAPE))).sum()

    got = ms.grad(loss, grad_position=(0, 1))(Tensor(x), Tensor(updates))
    os.environ.pop(_ascend.EMULATION_ENV)  # the aot path, for the reference
    expected = ms.grad(loss, grad_position=(0, 1))(Tensor(x), Tensor(updates))
    for g, e in zip(got, expected):
        assert_same(g.asnumpy(), e.asnumpy())


# ------------------------------------------------------------------ without the package

def test_default_is_aot_on_cpu(monkeypatch):
    monkeypatch.delenv(_ascend.EMULATION_ENV, raising=False)
    assert not _ascend.use_ascend_path()
    prim = ms_scatter.ScatterAdd()
    assert prim.func_type == "aot" and prim._hybrid is None  # pylint: disable=protected-access
    assert _ascend.use_ascend_path("Ascend")


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
def test_missing_package_says_how_to_build_it(monkeypatch, mode):
    monkeypatch.delenv(_ascend.EMULATION_ENV, raising=False)
    monkeypatch.delenv(_ascend.ENV, raising=False)
    assert not _ascend.package_installed()  # no CANN here, so none was built
    op = _ascend.AscendOp("ScatterNdAdd", ms_scatter.ScatterNdAdd().convert)
    x, indices, updates = _case("ScatterNdAdd")
    p = Parameter(Tensor(x), name="p")
    with pytest.raises(RuntimeError) as info:
        call_in_mode(mode, op if mode == "PYNATIVE" else op.graph_call, "ScatterNdAdd", p, indices, updates)
    message = str(info.value)
    for part in ("no Ascend kernels are installed", "CANN custom-op package", "MS_SCATTER_ASCEND=1 pip install",
                 "set_env.sh", "MS_SCATTER_KERNELS=host", "8.2, 8.3, 8.5, 9.0, 9.1"):
        assert part in message, part
    assert_unchanged(p, x)


@pytest.mark.parametrize("mode", ["PYNATIVE", "GRAPH"], indirect=True)
@pytest.mark.parametrize("op", ["ScatterMax", "ScatterNdDiv", "TensorScatterUpdate"])
def test_host_fallback(monkeypatch, mode, op):
    """MS_SCATTER_KERNELS=host: PYNATIVE calls run the CPU kernel on host copies (same results,
    same errors); a graph refuses, saying why."""
    monkeypatch.delenv(_ascend.EMULATION_ENV, raising=False)
    monkeypatch.setenv(_ascend.ENV, "host")
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")
    convert = getattr(ms_scatter, op)().convert
    ascend_op = _ascend.AscendOp(op, convert)
    x, indices, updates = _case(op)
    target = target_for(op, x)
    if mode == "GRAPH":
        with pytest.raises(RuntimeError, match="MS_SCATTER_KERNELS=host runs .* in PYNATIVE mode only"):
            call_in_mode(mode, ascend_op.graph_call, op, target, indices, updates)
        return
    out = ascend_op(target, Tensor(indices), Tensor(updates))
    expected = oracle(op, x, indices, updates)
    assert_same(out.asnumpy(), expected)
    if in_place(op):
        assert_same(target.asnumpy(), expected)
    bad = indices.copy()
    bad.reshape(-1)[0] = 99
    with pytest.raises(ms_scatter.ScatterIndexError, match="but got 99 at position"):
        ascend_op(target, Tensor(bad), Tensor(updates))
    assert_same(target.asnumpy(), expected if in_place(op) else x)


def test_package_put_on_ascend_custom_opp_path(monkeypatch, tmp_path):
    vendor = tmp_path / "vendors" / "ms_scatter"
    (vendor / "op_api" / "lib").mkdir(parents=True)
    (vendor / "op_api" / "lib" / "libcust_opapi.so").write_bytes(b"")
    monkeypatch.setattr(_ascend, "VENDOR_DIR", str(vendor))
    monkeypatch.setenv(_ascend.CUSTOM_OPP_ENV, "/opt/other/vendors/x")
    assert _ascend.expose_package() == str(vendor)
    assert os.environ[_ascend.CUSTOM_OPP_ENV] == f"{vendor}:/opt/other/vendors/x"
    _ascend.expose_package()  # once
    assert os.environ[_ascend.CUSTOM_OPP_ENV].count(str(vendor)) == 1
    monkeypatch.delenv(_ascend.CUSTOM_OPP_ENV)
    assert _ascend.expose_package() and os.environ[_ascend.CUSTOM_OPP_ENV] == str(vendor)


def test_registration_matches_op_host():
    """ops.Custom's reg_info names the inputs, outputs and dtype combinations op_host defines."""
    info = _ascend.reg_info("MsScatterNdAdd")
    assert info["op_name"] == "MsScatterNdAdd" and info["target"] == "Ascend"
    assert [i["name"] for i in info["inputs"]] == ["x", "indices", "updates"]
    assert [o["name"] for o in info["outputs"]] == ["y", "status"]
    combos = [(row[0][0], row[1][0]) for row in info["dtype_format"]]
    expected = [(v, i) for v in _ascend.ASCEND_VALUE_DTYPES for i in _ascend.ASCEND_INDEX_DTYPES]
    assert [(("float16" if v == "float16" else v), i) for v, i in combos] == expected
    assert all(row[4][0] == "int64" for row in info["dtype_format"])
    host = open(os.path.join(REPO, "kernels", "ascend", "op_host", "ms_scatter_nd.cpp")).read()
    names = re.findall(r'op\.(Input|Output)\("(\w+)"\)', host)
    assert names == [("Input", "x"), ("Input", "indices"), ("Input", "updates"), ("Output", "y"),
                     ("Output", "status")]


def test_cann_versions_are_mindsporess():
    """The CANN versions the missing-package error and the docs' Backends page name are those of the
    installed MindSpore's own check (run_check/_check_version.py, AscendEnvChecker)."""
    path = os.path.join(os.path.dirname(ms.__file__), "run_check", "_check_version.py")
    text = open(path).read()
    block = text[text.index("class AscendEnvChecker"):]
    versions = tuple(re.search(r"self\.version = \[([^\]]*)\]", block).group(1).replace('"', "").replace(" ", "")
                     .split(","))
    assert versions == _ascend.CANN_VERSIONS
    backends = open(os.path.join(REPO, "docs", "guide", "backends.md")).read()
    assert "CANN " + ", ".join(versions) in backends


def test_check_script_runs_emulated(tmp_path):
    """kernels/ascend/check_ascend.py, the prepared check for an Ascend host, runs to its table
    here with --emulate (CPU target, the host build of the op)."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, os.path.join(REPO, "kernels", "ascend", "check_ascend.py"), "--emulate",
                           "--quick", "--no-bench"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k != _ascend.EMULATION_ENV})
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-4000:]
    assert "all checks passed" in out
    for row in ("seed examples", "oracle: 21 ops x 2 forms", "policies", "errors", "1e5 x 64 float32"):
        assert out.count(row) >= 3, row  # PYNATIVE and GRAPH lines, and the table
