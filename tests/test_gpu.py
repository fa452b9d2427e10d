"""The CUDA kernel library (kernels/gpu/scatter_gpu.cu, built by kernels/gpu/build_gpu.py).

Wherever nvcc exists (skipped with the reason where it does not):
* the library compiles for sm_90 without a warning, and exports exactly the CPU
  library's entry points (nm -D): the 35 aot entries, the 21 row-shard entries, the
  <entry>InferShape and <entry>InferType functions of each (graph nodes), ms_scatter_last_error,
  ms_scatter_format_error, ms_scatter_call_counts, ms_scatter_infer_shape and
  ms_scatter_set_int32_type_id; only the
  CPU thread-pool controls are CPU-only;
* argument errors found on the host give the CPU library's code and message (no device
  needed: they return before any CUDA call);
* on a machine without a CUDA device, a call fails cleanly with code 4 and a message.

Where a CUDA GPU and CuPy are present (skipped otherwise): every entry point x value
dtype x index dtype on CuPy device buffers against the numpy loop oracle, bit for bit and
bit-identical on a second run; out-of-range/negative indices and integer division by zero
(code, the CPU message, input_x unchanged); index order, float16 rounded once, a
non-default stream, concurrent calls on two streams. The same checks run standalone,
without MindSpore, as kernels/gpu/check_gpu.py.
"""
import ctypes
import importlib.util
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from ms_scatter import infer
from ms_scatter import testing as ms_testing
from ms_scatter._lib import CPU_LIBRARY

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
GPU_DIR = os.path.join(REPO, "kernels", "gpu")


def _load(name, filename):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(GPU_DIR, filename))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


build_gpu = _load("_ms_scatter_build_gpu", "build_gpu.py")
check_gpu = _load("_ms_scatter_check_gpu", "check_gpu.py")

NVCC = build_gpu.find_nvcc()
NO_NVCC = ("no CUDA compiler here (MS_SCATTER_NVCC, nvcc on PATH, CUDA_HOME/CUDA_PATH, /usr/local/cuda): "
           "the GPU library cannot be built on this machine")
# Exported by the CPU library only: its host thread pool's controls.
CPU_ONLY = {"ms_scatter_num_threads", "ms_scatter_set_num_threads", "ms_scatter_set_caller_waits",
            "ms_scatter_thread_choices", "ms_scatter_reset_thread_choices", "ms_scatter_thread_rule_learns",
            "ms_scatter_last_threads", "ms_scatter_probe_rmw"}  # the last two: the benchmark's access probe
# The fused message-passing and segment-arg kernels (kernels/cpu/message.h) have no CUDA version yet.
CPU_ONLY |= {f"{e}{suffix}" for e in ("GspmmSum", "GspmmMean", "GspmmMax", "GspmmMin", "GsddmmAdd", "GsddmmSub",
                                      "GsddmmMul", "GsddmmDot", "GspmmTieGrad", "GspmmTieGradWeight", "ScatterTieGradX",
                                      "ScatterTieGradUpdates", "ScatterGradGather",
                                      "SegmentArgMax", "SegmentArgMin", "SegmentArgValues", "SegmentSoftmax",
                                      "SegmentSoftmaxGrad", "SegmentReduceSum", "SegmentReduceMean",
                                      "SegmentReduceMax", "SegmentReduceMin", "SegmentReduceProd", "SegmentCsrSum",
                                      "SegmentCsrMean", "SegmentCsrMax", "SegmentCsrMin", "SegmentCsrProd")
            for suffix in ("", "InferShape", "InferType")}
ENTRIES = check_gpu.all_entries(ms_testing)


def _gpu_with_cupy():
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        return False


HAS_GPU = _gpu_with_cupy()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="no CUDA GPU with CuPy here: the device checks need both")


def _cuda_device_count():
    """Devices the driver sees (0 without a driver), without CuPy or the runtime."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if cuda.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    return count.value if cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 else 0


@pytest.fixture(scope="session")
def sm90_build(tmp_path_factory):
    """(path, compiler output) of the library built for sm_90 alone."""
    if NVCC is None:
        pytest.skip(NO_NVCC)
    path = tmp_path_factory.mktemp("gpu_sm90") / "libms_scatter_gpu.so"
    build_gpu.build(path, NVCC, archs=("90",), ptx=False)
    return str(path), build_gpu.build.last_output


def exported_functions(path):
    """Names of the functions a shared library exports with C linkage (nm -D)."""
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("no nm (binutils) here")
    out = subprocess.run([nm, "-D", "--defined-only", str(path)], check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[1] == "T" and not fields[2].startswith("_Z"):
            names.add(fields[2])
    return names


# ------------------------------------------------------------------ no nvcc needed

@pytest.mark.parametrize("release, volta", [("11.8", True), ("12.4", True), ("13.0", False)])
def test_default_architectures_follow_the_nvcc_version(tmp_path, release, volta):
    """sm_70 (Volta, which MindSpore 2.10's CUDA 11 build supports) only with an nvcc that
    still targets it; Turing..Hopper always."""
    fake = tmp_path / "nvcc"
    fake.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.0'\n")
    fake.chmod(0o755)
    archs = build_gpu.default_archs(str(fake))
    assert archs == (("70",) if volta else ()) + build_gpu.DEFAULT_ARCHS
    assert build_gpu.DEFAULT_ARCHS == ("75", "80", "86", "89", "90")


# ------------------------------------------------------------------ wherever nvcc exists

def test_gpu_library_exports_the_cpu_entry_points(sm90_build):
    path, output = sm90_build
    gpu = exported_functions(path)
    cpu = exported_functions(CPU_LIBRARY)
    assert CPU_ONLY <= cpu, f"the CPU library no longer exports {CPU_ONLY - cpu}: update CPU_ONLY"
    assert gpu == cpu - CPU_ONLY, (f"only in the GPU library: {sorted(gpu - cpu)}; "
                                   f"missing from it: {sorted(cpu - CPU_ONLY - gpu)}")
    expected = {ms_testing.entry_name(op, out) for op, out in ENTRIES} | {"ms_scatter_last_error",
                                                                          "ms_scatter_format_error",
                                                                          "ms_scatter_call_counts",
                                                                          "ms_scatter_infer_shape",
                                                                          "ms_scatter_set_int32_type_id",
                                                                          "ms_scatter_set_int64_type_id"}
    shards = {ms_testing.entry_name(f + r, sharded=True) for f in infer.FAMILIES for r in infer.REDUCTIONS}
    segments = set(infer.OWN_ENTRY_OPERATORS)  # UnsortedSegmentSum ... and ScatterNd
    entries = expected | shards | segments
    infer_shapes = {e + "InferShape" for e in entries if not e.startswith("ms_scatter_")}
    infer_types = {e + "InferType" for e in entries if not e.startswith("ms_scatter_")}
    assert len(ENTRIES) == 35 and len(shards) == 21 and len(segments) == 5
    assert len(infer_shapes) == len(infer_types) == 61
    assert gpu == entries | infer_shapes | infer_types
    assert "warning" not in output.lower(), output


def _host_call(path, entry, arrays, dtype_names=None, nparam=4):
    """Call an entry with host pointers: only for calls that must fail on the host."""
    lib = ctypes.CDLL(str(path))
    fn = getattr(lib, entry)
    fn.restype = ctypes.c_int
    params = (ctypes.c_void_p * 4)(*[a.ctypes.data for a in arrays])
    ndims = (ctypes.c_int * 4)(*[a.ndim for a in arrays])
    bufs = [(ctypes.c_int64 * max(a.ndim, 1))(*a.shape) for a in arrays]
    shapes = (ctypes.POINTER(ctypes.c_int64) * 4)(*[ctypes.cast(b, ctypes.POINTER(ctypes.c_int64)) for b in bufs])
    names = dtype_names or [a.dtype.name for a in arrays]
    dtypes = (ctypes.c_char_p * 4)(*[n.encode() for n in names])
    rc = fn(nparam, params, ndims, shapes, dtypes, None, None)
    lib.ms_scatter_last_error.restype = ctypes.c_int
    buf = ctypes.create_string_buffer(1024)
    code = lib.ms_scatter_last_error(buf, len(buf), None)
    return rc, code, buf.value.decode()


HOST_ERRORS = [  # (entry, x, indices, updates, dtype names or None, nparam)
    ("ScatterAdd_token", np.zeros((4, 3), np.float32), np.zeros((2,), np.int32), np.zeros((2, 2), np.float32), None, 4),
    ("TensorScatterMax", np.zeros((4, 3), np.float32), np.zeros((2, 3), np.int64), np.zeros((2,), np.float32), None, 4),
    ("ScatterNdMul_return", np.zeros((4, 3), np.int8), np.zeros((2, 1), np.int64), np.zeros((2, 3), np.int8),
     ["int8", "int64", "int16", "int8"], 4),
    ("ScatterDiv_return", np.zeros((4, 3), np.float32), np.zeros((2,), np.int16), np.zeros((2, 3), np.float32),
     None, 4),
    ("ScatterMax_token", np.zeros((4, 3), np.bool_), np.zeros((2,), np.int32), np.zeros((2, 3), np.bool_), None, 4),
    ("ScatterNdSub_token", np.zeros((4, 3), np.float32), np.zeros((2, 1), np.int32), np.zeros((2, 3), np.float32),
     None, 3),
    ("ScatterNdSub_token", np.zeros((4, 3), np.float32), np.zeros((2, 3), np.int32), np.zeros((2,), np.float32),
     None, 4),
]


@pytest.mark.parametrize("case", range(len(HOST_ERRORS)))
def test_host_side_errors_match_the_cpu_library(sm90_build, case):
    entry, x, idx, upd, names, nparam = HOST_ERRORS[case]
    arrays = [x, idx, upd, np.zeros((1,), np.int32) if entry.endswith("_token") else np.zeros_like(x)]
    gpu = _host_call(sm90_build[0], entry, arrays, names, nparam)
    cpu = _host_call(CPU_LIBRARY, entry, arrays, names, nparam)
    assert gpu[0] == 1 and gpu == cpu


def test_call_without_a_device_fails_cleanly(sm90_build):
    if _cuda_device_count() > 0:
        pytest.skip("a CUDA device is present: this checks the no-device path")
    arrays = [np.zeros((4, 3), np.float32), np.zeros((2,), np.int64), np.ones((2, 3), np.float32),
              np.zeros((1,), np.int32)]
    rc, code, message = _host_call(sm90_build[0], "ScatterAdd_token", arrays)
    assert rc == 4 and code == 4
    assert message.startswith("For 'ScatterAdd', CUDA error while "), message


# ------------------------------------------------------------------ on a GPU with CuPy

@pytest.fixture(scope="session")
def gpu_lib(tmp_path_factory, sm90_build):
    arch = check_gpu.local_arch()
    if arch == "90":
        path = sm90_build[0]
    else:
        path = str(tmp_path_factory.mktemp(f"gpu_sm{arch}") / "libms_scatter_gpu.so")
        build_gpu.build(path, NVCC, archs=(arch,), ptx=False)
    return check_gpu.GpuLibrary(path, ms_testing)


def _entry_params():
    return [pytest.param(op, out, id=f"{op}-{out}") for op, out in ENTRIES]


@needs_gpu
@pytest.mark.parametrize("op,output", _entry_params())
def test_gpu_matches_oracle(gpu_lib, op, output):
    """Every value dtype x index dtype of one entry point (looped here, not parametrized:
    one test per entry point keeps the skip list short where there is no GPU)."""
    fails = []
    for dtype in infer.VALUE_DTYPES:
        for index_dtype in infer.INDEX_DTYPES:
            big = dtype in check_gpu.BIG_DTYPES and index_dtype == "int64"
            checked, f = check_gpu.check_entry(gpu_lib, ms_testing, op, output, dtype, index_dtype, big)
            assert checked > 0
            fails += f
    assert not fails, f"{len(fails)} failure(s):\n" + "\n".join(fails[:20])


@needs_gpu
@pytest.mark.parametrize("op,output", _entry_params())
def test_gpu_errors_write_nothing(gpu_lib, op, output):
    fails = []
    for dtype in infer.VALUE_DTYPES:
        for index_dtype in infer.INDEX_DTYPES:
            checked, f = check_gpu.check_errors(gpu_lib, ms_testing, op, output, dtype, index_dtype)
            assert checked > 0
            fails += f
    assert not fails, f"{len(fails)} failure(s):\n" + "\n".join(fails[:20])


@needs_gpu
def test_gpu_policies(gpu_lib):
    checked, fails = check_gpu.check_policies(gpu_lib, ms_testing)
    assert checked > 0 and not fails, "\n".join(fails)


@needs_gpu
@pytest.mark.parametrize("op,output", [("ScatterNdAdd", "token"), ("TensorScatterDiv", "tensor"),
                                       ("ScatterMin", "return")])
def test_gpu_error_messages_equal_the_cpu_ones(gpu_lib, op, output):
    family = ms_testing.split_op(op)[0]
    x = np.arange(24, dtype=np.int32).reshape(4, 3, 2) + 1
    if family == "Scatter":
        idx = np.array([[0, 2], [5, 1]], np.int64)
        upd = np.ones((2, 2, 3, 2), np.int32)
    else:
        idx = np.array([[0, 1], [3, -2]], np.int64)
        upd = np.ones((2, 2), np.int32)
    cases = [(idx, upd)]
    if op.endswith("Div"):
        ok_idx = np.array([[0, 1], [3, 2]], np.int64)
        zero = upd.copy()
        zero[1, 1] = 0
        cases.append((ok_idx, zero))
    for i, u in cases:
        rc_gpu, x_gpu, _ = gpu_lib.call(op, x, i, u, output)
        gpu_message = gpu_lib.last_error()[1]
        rc_cpu, x_cpu, _ = ms_testing.call_kernel(op, x, i, u, output, library=CPU_LIBRARY)
        buf = ctypes.create_string_buffer(1024)
        ms_testing.kernel_library(CPU_LIBRARY).ms_scatter_last_error(buf, len(buf), None)
        cpu_message = buf.value.decode()
        assert rc_gpu == rc_cpu and rc_gpu in (2, 3)
        assert gpu_message == cpu_message
        assert x_gpu.tobytes() == x.tobytes() == x_cpu.tobytes()
