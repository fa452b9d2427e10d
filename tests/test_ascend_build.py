"""kernels/ascend/build_ascend.py without CANN: the op project it stages, checked with a
stand-in of CANN's Ascend C op project template, and the staged sources compiled with g++ in
their flattened layout (the kernel files against the stand-in Ascend C API of
tests/ascend_stub/). What needs CANN (opbuild, the kernel compiler, the .run installer) is not
run here; kernels/ascend/check_ascend.py does it on an Ascend host."""
import importlib.util
import json
import os
import re
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("_ms_scatter_build_ascend",
                                               os.path.join(REPO, "kernels", "ascend", "build_ascend.py"))
build_ascend = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_ascend)

REDUCTIONS = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Update"]


@pytest.fixture
def fake_cann(tmp_path):
    """A CANN root with just the Ascend C op project template (as CANN lays it out)."""
    root = tmp_path / "cann"
    project = root / "tools/op_project_templates/ascendc/customize"
    for sub in ("op_host", "op_kernel", "cmake"):
        (project / sub).mkdir(parents=True)
    (project / "op_host" / "add_custom.cpp").write_text("// sample\n")
    (project / "op_host" / "CMakeLists.txt").write_text("# kept\n")
    (project / "op_kernel" / "add_custom.cpp").write_text("// sample\n")
    (project / "build.sh").write_text("#!/bin/bash\n")
    (project / "CMakePresets.json").write_text(json.dumps({"configurePresets": [{"cacheVariables": {
        "ASCEND_CANN_PACKAGE_PATH": {"type": "PATH", "value": "/usr/local/Ascend/latest"},
        "ASCEND_COMPUTE_UNIT": {"type": "STRING", "value": "ascend910b"},
        "vendor_name": {"type": "STRING", "value": "customize"}}}]}))
    common = root / "tools/op_project_templates/ascendc/common"
    common.mkdir(parents=True)
    (common / "util.cmake").write_text("# common\n")
    return root


def test_reductions_come_from_dtypes_h():
    assert [r for r, _ in build_ascend.reductions()] == REDUCTIONS
    assert build_ascend.snake("MsScatterNdUpdate") == "ms_scatter_nd_update"


def test_find_cann(monkeypatch, fake_cann, tmp_path):
    monkeypatch.setenv("MS_SCATTER_CANN", str(fake_cann))
    assert build_ascend.find_cann() == str(fake_cann)
    monkeypatch.setenv("MS_SCATTER_CANN", str(tmp_path))  # no template there
    assert build_ascend.find_cann() is None
    monkeypatch.setenv("MS_SCATTER_CANN", "")
    assert build_ascend.find_cann() is None


def test_stage(fake_cann, tmp_path):
    project = tmp_path / "project"
    build_ascend.stage(str(project), str(fake_cann), ("ascend910b", "ascend910_93"))
    host, kernel = sorted(os.listdir(project / "op_host")), sorted(os.listdir(project / "op_kernel"))
    assert "add_custom.cpp" not in host + kernel and "CMakeLists.txt" in host  # the sample op goes
    assert host == sorted(["CMakeLists.txt", "ms_scatter_nd.cpp", "scatter_core.h"] + list(build_ascend.SHARED_HEADERS))
    generated = [f"ms_scatter_nd_{r.lower()}.cpp" for r in REDUCTIONS]
    assert kernel == sorted(generated + ["ms_scatter_kernel.h", "scatter_core.h"] + list(build_ascend.SHARED_HEADERS))
    for r, name in zip(REDUCTIONS, generated):
        text = (project / "op_kernel" / name).read_text()
        assert f"MSS_ASCEND_KERNEL(ms_scatter_nd_{r.lower()}, ::ms_scatter::Op{r})" in text
    for d in ("op_host", "op_kernel"):
        for name in os.listdir(project / d):
            assert '#include "ms_scatter/' not in (project / d / name).read_text(), f"{d}/{name}: not flattened"
    presets = json.loads((project / "CMakePresets.json").read_text())["configurePresets"][0]["cacheVariables"]
    assert presets["ASCEND_CANN_PACKAGE_PATH"]["value"] == str(fake_cann)
    assert presets["ASCEND_COMPUTE_UNIT"]["value"] == "ascend910b;ascend910_93"
    assert presets["vendor_name"]["value"] == "ms_scatter"
    assert (project / "cmake" / "util" / "util.cmake").exists()
    assert os.access(project / "build.sh", os.X_OK)
    host_src = (project / "op_host" / "ms_scatter_nd.cpp").read_text()
    assert 'AddConfig("ascend910b")' in host_src and 'AddConfig("ascend910_93")' in host_src


@pytest.mark.parametrize("dtype, index_dtype", [("half", "int32_t"), ("float", "int64_t"), ("int8_t", "int32_t"),
                                                ("uint8_t", "int64_t"), ("int64_t", "int32_t")])
def test_staged_kernel_sources_compile_flattened(fake_cann, tmp_path, dtype, index_dtype):
    """Each generated kernel file compiles as AI core code with only the staged directory and
    the stand-in Ascend C API on the include path, for registered dtype pairs (CANN's build
    defines DTYPE_X / DTYPE_INDICES per pair)."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    assert cxx, "no g++ to compile the staged kernel sources"
    project = tmp_path / "project"
    build_ascend.stage(str(project), str(fake_cann))
    kernel = project / "op_kernel"
    unit = tmp_path / "all_kernels.cc"  # the seven generated files in one unit (one compile)
    unit.write_text("".join(f'#include "ms_scatter_nd_{r.lower()}.cpp"\n' for r in REDUCTIONS))
    proc = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror", "-D__CCE_AICORE__=220",
                           f"-DDTYPE_X={dtype}", f"-DDTYPE_INDICES={index_dtype}",
                           "-I", os.path.join(REPO, "tests", "ascend_stub"), "-I", str(kernel), str(unit)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_build_without_cann_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("MS_SCATTER_CANN", "")
    with pytest.raises(RuntimeError, match="no CANN toolkit found"):
        build_ascend.build(str(tmp_path / "opp"))


def test_setup_switch_documented():
    setup = open(os.path.join(REPO, "setup.py")).read()
    assert "MS_SCATTER_ASCEND" in setup and re.search(r"def build_ascend\(self\)", setup)


@pytest.fixture(scope="module")
def host_harness(tmp_path_factory):
    """The staged op_host/ms_scatter_nd.cpp with tests/ascend_host_harness.cc, against the
    stand-in CANN host headers (tests/ascend_stub/register, tests/ascend_stub/tiling)."""
    cxx = shutil.which(os.environ.get("CXX", "g++"))
    assert cxx, "no g++ to compile the staged op_host source"
    tmp = tmp_path_factory.mktemp("ascend_host")
    cann = tmp / "cann"
    template = cann / "tools/op_project_templates/ascendc/customize"
    for sub in ("op_host", "op_kernel"):
        (template / sub).mkdir(parents=True)
    (template / "CMakePresets.json").write_text(json.dumps({"configurePresets": [{"cacheVariables": {}}]}))
    project = tmp / "project"
    build_ascend.stage(str(project), str(cann))
    exe = tmp / "harness"
    proc = subprocess.run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-I",
                           os.path.join(REPO, "tests", "ascend_stub"), "-I", str(project / "op_host"),
                           str(project / "op_host" / "ms_scatter_nd.cpp"),
                           os.path.join(REPO, "tests", "ascend_host_harness.cc"), "-o", str(exe)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr

    def run(op, x_shape, idx_shape, dtype, index_dtype, cores=40, ub=192 * 1024):
        out = subprocess.run([str(exe), op, ",".join(map(str, x_shape)), ",".join(map(str, idx_shape)), dtype,
                              index_dtype, str(cores), str(ub)], capture_output=True, text=True, check=True)
        return out.stdout, out.stderr
    return run


GE = {"float16": 1, "float32": 0, "int8": 2, "int16": 6, "int32": 3, "int64": 9, "uint8": 4}


def test_op_host_registers_seven_ops_with_the_ascend_dtypes(host_harness):
    out, _ = host_harness("MsScatterNdAdd", (4, 3), (2, 1), "float32", "int32")
    ops_lines = [line for line in out.splitlines() if line.startswith("op ")]
    assert [line.split()[1] for line in ops_lines] == [f"MsScatterNd{r}" for r in REDUCTIONS]
    combos = ",".join(f"{GE[v]}/{GE[i]}/{GE[v]}/{GE[v]}/9" for v in GE for i in ("int32", "int64")) + ","
    for line in ops_lines:
        assert " in:x:14:1 in:indices:14:1 in:updates:14:1 out:y:14:1 out:status:14:1 " in line
        assert "soc:ascend910b soc:ascend910_93" in line and line.endswith("combos:" + combos)


@pytest.mark.parametrize("op, x_shape, idx_shape, dtype, index_dtype, cores, ub", [
    ("MsScatterNdAdd", (1000, 64), (500, 1), "float32", "int32", 40, 192 * 1024),
    ("MsScatterNdDiv", (200000, 8), (100, 1), "int32", "int64", 48, 192 * 1024),
    ("MsScatterNdMax", (200000, 8), (100, 2, 1), "float16", "int32", 40, 192 * 1024),
    ("MsScatterNdUpdate", (7, 5, 96), (30, 2), "uint8", "int64", 8, 64 * 1024),
])
def test_op_host_tiling_is_the_cores(host_harness, op, x_shape, idx_shape, dtype, index_dtype, cores, ub):
    """op_host's tiling function hands CANN exactly scatter_core.h's tiling_for_call (the one
    the core tests run), sets the block dim to its core count and asks for CANN's library
    workspace plus the float16 workspace; inference gives y = x's shape and dtype, status int64[4]."""
    import numpy as np
    spec = importlib.util.spec_from_file_location("_ms_scatter_ascend_build2", os.path.join(REPO, "tests",
                                                                                           "_ascend_build.py"))
    ab = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ab)
    core = ab.Core(ab.build())
    out, _ = host_harness(op, x_shape, idx_shape, dtype, index_dtype, cores, ub)
    line = next(line for line in out.splitlines() if line.startswith("tiling "))
    fields = line.split()
    assert fields[1] == "0"  # GRAPH_SUCCESS
    block_dim, workspace, words = int(fields[3]), int(fields[5]), [int(w) for w in fields[7:]]
    depth = idx_shape[-1]
    x = np.zeros(x_shape, dtype)
    idx = np.zeros(idx_shape, index_dtype)
    upd = np.ones(idx_shape[:-1] + x_shape[depth:], dtype)
    rc, _, _, tiling, _, _ = core.run(op[len("MsScatterNd"):], x, idx, upd, cores=cores,
                                      ub_bytes=ub - ab.KERNEL_UB_KEPT)
    assert rc == 0
    assert words[:len(ab.TILING_FIELDS)] == [tiling[f] for f in ab.TILING_FIELDS]
    assert len(words) == core.tiling_words
    assert block_dim == tiling["cores"] and workspace == 16 * 1024 * 1024 + tiling["workspace_bytes"]
    infer = next(line for line in out.splitlines() if line.startswith("infer "))
    assert infer == f"infer y:{','.join(map(str, x_shape))}, status:4, types {GE[dtype]} 9"


def test_op_host_tiling_refuses_what_the_op_cannot_run(host_harness):
    out, err = host_harness("MsScatterNdAdd", (4, 3), (2, 1), "float64", "int32")
    assert "tiling 4294967295 " in out  # GRAPH_FAILED
    assert "For 'MsScatterNdAdd', the Ascend kernel has no dtype float64 with indices of int32." in err
    out, err = host_harness("MsScatterNdAdd", (4, 3), (2, 3), "float32", "int32")  # depth above the rank
    assert "tiling 4294967295 " in out and "the index depth must be <= rank of 'input_x' (2), but got 3" in err
