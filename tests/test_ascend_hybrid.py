"""The Ascend backend's hybrid-DSL kernels (kernels/ascend/hybrid.py), run on CPU.

MindSpore compiles a hybrid kernel with AKG for the current device target, so on this CPU
machine the very kernel sources meant for Ascend are compiled by AKG's CPU backend and run.
Each call goes through ``hybrid_scatter`` (views, float16/uint8 compute dtype, the Custom)
and is compared bit for bit with the numpy loop oracle (ms_scatter.testing.oracle):

* test_matches_oracle: all 21 operators (the in-place families through their out-of-place
  kernels) x float32/int32-indices, float16/int32, int32/int64, duplicates included; and
  every operator x int8, int16, int64, float64, uint8 with int32 or int64 indices;
* test_shapes: index depths 0-3, 1-d and 3-d input_x, 0-d indices, no duplicates, and
  2000 index vectors onto 3 rows (index order kept under AKG's scheduler);
* the policies the kernels implement: NaN in Max/Min, integer wrap-around, truncating
  integer division with MIN / -1, float16 accumulated in float32 (and the bare Custom on
  float16, which rounds after every update), last Update wins;
* the documented gaps (a hybrid kernel cannot raise): out-of-range index vectors are
  skipped, an integer division by zero leaves the destination unchanged, empty inputs;
* the DSL itself: every generated source passes MindSpore's DSL check for target Ascend,
  uint8 is refused by the DSL (asserted), the registration info for Ascend;
* GRAPH mode: a Cell holding a Parameter assigns HybridScatter's result (the in-place
  wiring the primitive layer uses on the Ascend path, ms_scatter/_ascend.py; the
  primitives themselves on that path: st/test_ascend_path.py).

Compiles are shared: every case of a mode uses the same kernel view shapes, so a kernel
compiles once per (kernel, dtype, index dtype). A failed AKG compile kills MindSpore's
build server for the rest of the process, so nothing here compiles something known to fail.
"""
import ast
import importlib
import importlib.util
import os
import sys

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn, ops

from ms_scatter import infer
from ms_scatter.testing import oracle, random_case, split_op


def _load_hybrid():
    """ms_scatter.kernels.ascend.hybrid once setup.py installs it, else the source file."""
    try:
        return importlib.import_module("ms_scatter.kernels.ascend.hybrid")
    except ImportError:
        name = "ms_scatter_ascend_hybrid"
        if name in sys.modules:
            return sys.modules[name]
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "kernels", "ascend", "hybrid.py")
        spec = importlib.util.spec_from_file_location(name, os.path.normpath(path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # GRAPH mode resolves the Cell's globals through sys.modules
        spec.loader.exec_module(module)
        return module


hybrid = _load_hybrid()

ALL_OPS = tuple(f + r for f in infer.FAMILIES for r in infer.REDUCTIONS)
FIRST_AXIS_SHAPE = (5, 3)  # kernel view (5, 3)
ND_SHAPE = (4, 3, 2)       # depth 2: kernel view (4, 3, 2)
N_INDEX = 6                # 6 index vectors, batch shape (3, 2)


@pytest.fixture(scope="module", autouse=True)
def _cpu_pynative_and_kernel_cache(tmp_path_factory):
    """PYNATIVE on CPU; AKG's kernel cache in a temporary directory. MindSpore's build server
    writes akg_kernel_meta/ under MS_COMPILER_CACHE_PATH (else under its working directory,
    which the main process must then share), and a log into its working directory: both
    are kept out of the checkout. MS_COMPILER_CACHE_PATH stays set for the process, so that
    a later hybrid compile from any directory still finds its kernels."""
    tmp = tmp_path_factory.mktemp("akg_cache")
    os.environ.setdefault("MS_COMPILER_CACHE_PATH", str(tmp))
    previous_dir, previous_mode = os.getcwd(), ms.get_context("mode")
    os.chdir(tmp)
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    try:
        yield
    finally:
        ms.set_context(mode=previous_mode)
        os.chdir(previous_dir)


def shape_of(op):
    return FIRST_AXIS_SHAPE if split_op(op)[0] == "Scatter" else ND_SHAPE


def run(op, x, indices, updates):
    """hybrid_scatter on numpy arrays; checks that x is left as it was (out of place)."""
    x_tensor = Tensor(x)
    out = hybrid.hybrid_scatter(op, x_tensor, Tensor(indices), Tensor(updates)).asnumpy()
    assert x_tensor.asnumpy().tobytes() == x.tobytes(), f"{op}: input_x modified"
    return out


def expected_of(op, x, indices, updates):
    with np.errstate(all="ignore"):
        return oracle(op, x, indices, updates)


def check(op, x, indices, updates, bits_equal, what=""):
    got = run(op, x, indices, updates)
    bits_equal(got, expected_of(op, x, indices, updates), f"{op} {what}")
    return got


# ------------------------------------------------------------------ against the oracle

CORE = (("float32", "int32"), ("float16", "int32"), ("int32", "int64"))
WIDE = (("int8", "int64"), ("int16", "int32"), ("int64", "int64"), ("float64", "int32"), ("uint8", "int64"))


@pytest.mark.parametrize("op,dtype,index_dtype", [
    pytest.param(op, d, i, id=f"{op}-{d}-{i}") for d, i in CORE + WIDE for op in ALL_OPS])
def test_matches_oracle(op, dtype, index_dtype, rng_for, bits_equal):
    x, indices, updates = random_case(rng_for((op, dtype, index_dtype)), op, shape_of(op), N_INDEX, dtype,
                                      index_dtype, duplicates=True)
    check(op, x, indices, updates, bits_equal, f"{dtype}/{index_dtype}")


@pytest.mark.parametrize("op,dtype,shape,n_index,depth,duplicates", [
    pytest.param("ScatterNdAdd", "float32", ND_SHAPE, 6, 1, True, id="nd-depth1"),
    pytest.param("TensorScatterMax", "float32", ND_SHAPE, 6, 3, True, id="nd-depth3"),
    pytest.param("ScatterNdUpdate", "int32", ND_SHAPE, 3, 0, True, id="nd-depth0"),
    pytest.param("ScatterAdd", "float32", (7,), 6, None, True, id="first-axis-1d"),
    pytest.param("ScatterMin", "float32", (3, 4, 5), 6, None, True, id="first-axis-3d"),
    pytest.param("TensorScatterMul", "float32", ND_SHAPE, 6, 2, False, id="no-duplicates"),
    pytest.param("ScatterAdd", "float32", (3, 64), 2000, None, True, id="order-2000-onto-3-rows"),
    pytest.param("TensorScatterUpdate", "int32", (3, 4, 64), 2000, 2, True, id="last-update-wins-2000"),
    pytest.param("ScatterNdAdd", "float16", (4, 16), 1000, 1, True, id="float16-1000-updates"),
])
def test_shapes(op, dtype, shape, n_index, depth, duplicates, rng_for, bits_equal):
    x, indices, updates = random_case(rng_for((op, shape, n_index, depth)), op, shape, n_index, dtype, "int32",
                                      duplicates=duplicates, depth=depth)
    check(op, x, indices, updates, bits_equal, f"shape {shape} depth {depth}")


def test_zero_d_indices(bits_equal):
    x = np.arange(15, dtype=np.float32).reshape(FIRST_AXIS_SHAPE)
    check("ScatterUpdate", x, np.array(2, np.int32), np.array([7, 8, 9], np.float32), bits_equal)


# ------------------------------------------------------------------ the policies

def first_axis_or_nd(op, rows):
    """Indices selecting first-axis rows `rows`: (k,) for Scatter*, (k, 1) otherwise."""
    idx = np.asarray(rows, np.int32)
    return idx if split_op(op)[0] == "Scatter" else idx.reshape(-1, 1)


@pytest.mark.parametrize("op", ["ScatterMax", "ScatterMin", "ScatterNdMax", "TensorScatterMin"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_nan_propagates_in_max_min(op, dtype, bits_equal):
    nan, inf = np.nan, np.inf
    x = np.array([[1, nan, 3, inf, -inf, nan], [0, 0, 0, nan, 2, -inf]], dtype)
    updates = np.array([[nan, 5, 1, nan, 2, nan], [2, -2, nan, inf, nan, -inf]], dtype)
    got = check(op, x, first_axis_or_nd(op, [0, 1]), updates, bits_equal)
    nan_expected = np.isnan(x) | np.isnan(updates)
    assert np.array_equal(np.isnan(got), nan_expected), f"{op}: NaN from either side must propagate\n{got}"


@pytest.mark.parametrize("dtype,x0,updates,expected", [
    ("int8", 100, [100, 0], -56),                          # 200 wraps to -56
    ("uint8", 200, [100, 0], 44),                          # 300 wraps to 44 (computed in int32)
    ("int64", 2 ** 62, [2 ** 62, 2 ** 62], -(2 ** 62)),    # 3 * 2**62 wraps to -2**62
])
def test_integer_add_wraps(dtype, x0, updates, expected, bits_equal):
    got = check("ScatterAdd", np.array([[x0]], dtype), np.array([0, 0], np.int32),
                np.array(updates, dtype).reshape(2, 1), bits_equal)
    assert int(got[0, 0]) == expected


@pytest.mark.parametrize("op", ["ScatterSub", "TensorScatterMul"])
@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_integer_sub_mul_wrap(op, dtype, bits_equal):
    x = np.array([[5, 100, 16, 255 if dtype == "uint8" else 127]], dtype)
    updates = np.array([[10, 100, 16, 2]], dtype)
    check(op, x, first_axis_or_nd(op, [0]), updates, bits_equal)


@pytest.mark.parametrize("op", ["ScatterDiv", "ScatterNdDiv"])
@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_integer_division_truncates_and_min_wraps(op, dtype, bits_equal):
    lo = np.iinfo(dtype).min
    x = np.array([[7, -7, 7, -7, lo, lo, 0, 5, -9]], dtype)
    updates = np.array([[2, 2, -2, -2, -1, 1, 3, -1, 4]], dtype)
    got = check(op, x, first_axis_or_nd(op, [0]), updates, bits_equal)
    assert got[0].tolist() == [3, -3, -3, 3, lo, lo, 0, -5, -2]


def test_float16_accumulates_in_float32(bits_equal):
    x = np.full((1, 2), 2048, np.float16)
    updates = np.ones((2, 2), np.float16)  # 2048 + 1 rounds back to 2048 in float16; 2048 + 2 does not
    got = check("ScatterAdd", x, np.array([0, 0], np.int32), updates, bits_equal)
    assert got.tolist() == [[2050, 2050]]
    # why HybridScatter computes float16 in float32: the DSL compiles float16 natively,
    # but then rounds after every update
    native = hybrid.hybrid_custom("ScatterAdd")(Tensor(x), Tensor(np.array([0, 0], np.int32)), Tensor(updates))
    assert native.dtype == ms.float16 and native.asnumpy().tolist() == [[2048, 2048]]


@pytest.mark.parametrize("op", ["ScatterUpdate", "ScatterNdUpdate", "TensorScatterUpdate"])
def test_last_update_wins(op, bits_equal):
    x = np.zeros(FIRST_AXIS_SHAPE, np.float32)
    rows = [3, 1, 3, 3, 1, 0]
    updates = np.arange(18, dtype=np.float32).reshape(6, 3)
    got = check(op, x, first_axis_or_nd(op, rows), updates, bits_equal)
    assert got[3].tolist() == updates[3].tolist() and got[1].tolist() == updates[4].tolist()


# ------------------------------------------------------------------ documented gaps

@pytest.mark.parametrize("op,x_shape,indices", [
    ("ScatterAdd", FIRST_AXIS_SHAPE, np.array([[1, 9], [-1, 1], [4, 5]], np.int32)),
    ("ScatterNdMax", ND_SHAPE, np.array([[0, 1], [4, 0], [1, -1], [3, 2], [-4, 2], [0, 3]], np.int64)),
    ("TensorScatterUpdate", ND_SHAPE, np.array([[2, 2], [2, 3], [1, 0], [9, 9], [1, 0], [0, 0]], np.int32)),
])
def test_out_of_range_index_vectors_are_skipped(op, x_shape, indices, rng_for, bits_equal):
    """The kernel cannot raise: a vector with any component outside [0, dim) is skipped
    (never an out-of-bounds write). The primitive layer must validate before calling."""
    rng = rng_for(("out of range", op))
    first_axis = split_op(op)[0] == "Scatter"
    depth = 1 if first_axis else indices.shape[-1]
    batch = indices.shape if first_axis else indices.shape[:-1]
    vectors = indices.reshape(-1, depth)
    x = rng.standard_normal(x_shape).astype(np.float32)
    updates = rng.standard_normal(batch + x_shape[depth:]).astype(np.float32)
    valid = np.all((vectors >= 0) & (vectors < np.array(x_shape[:depth])), axis=1)
    assert 0 < valid.sum() < len(valid)
    kept_vectors = vectors[valid].reshape(-1) if first_axis else vectors[valid]
    kept_updates = updates.reshape((len(vectors),) + x_shape[depth:])[valid]
    expected = expected_of(op, x, kept_vectors, kept_updates)
    bits_equal(run(op, x, indices, updates), expected, f"{op} skipping out-of-range vectors")


@pytest.mark.parametrize("op", ["ScatterDiv", "TensorScatterDiv"])
def test_integer_division_by_zero_leaves_destination(op):
    """No trap: the destination keeps its value. The primitive layer must raise before."""
    x = np.array([[9, 9, 9]], np.int32)
    updates = np.array([[0, 2, 0], [1, 0, -1]], np.int32)
    got = run(op, x, first_axis_or_nd(op, [0, 0]), updates)
    assert got.tolist() == [[9, 4, -9]]


@pytest.mark.parametrize("op,x,indices,updates", [
    ("ScatterAdd", np.ones((4, 3), np.float32), np.zeros((0,), np.int32), np.zeros((0, 3), np.float32)),
    ("TensorScatterAdd", np.ones((4, 3), np.float32), np.zeros((0, 2), np.int64), np.zeros((0,), np.float32)),
    ("ScatterNdMax", np.ones((4, 0), np.float32), np.zeros((2, 1), np.int32), np.zeros((2, 0), np.float32)),
])
def test_empty_inputs_return_x(op, x, indices, updates, bits_equal):
    bits_equal(run(op, x, indices, updates), x, f"{op} empty")


# ------------------------------------------------------------------ the DSL

def test_kernels_are_generated_from_one_table():
    names = set()
    for reduction in infer.REDUCTIONS:
        for mode in ("first_axis", "nd"):
            for integer in ((False, True) if reduction == "Div" else (False,)):
                source = hybrid.generate_source(mode, reduction, 2, integer)
                tree = ast.parse(source)
                assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef)
                names.add(tree.body[0].name)
    assert len(names) == 2 * len(infer.REDUCTIONS) + 2  # 14 kernels, Div with an integer form in each mode
    for reduction in infer.REDUCTIONS:  # ScatterNd* and TensorScatter* share their N-d kernels
        shared = hybrid.kernel_function("ScatterNd" + reduction, 3)
        assert shared is hybrid.kernel_function("TensorScatter" + reduction, 3)
        custom = hybrid.hybrid_custom("Scatter" + reduction)
        assert isinstance(custom, ops.Custom) and custom.func_type == "hybrid"


def test_sources_pass_the_dsl_check_for_ascend():
    """MindSpore checks a hybrid source before compiling; on target Ascend it refuses the
    'general' intrinsics (isnan, int64(), trunc, ...). Every generated kernel passes the
    check as it runs for Ascend; a source using isnan does not (the reason Max/Min use
    an unordered-pair fallback instead)."""
    from mindspore.ops.operations._ms_kernel import VariableUsage

    def ascend_check(source):
        tree = ast.parse(source)
        visitor = VariableUsage(tree.body[0].name)
        visitor.device = "Ascend"
        visitor.visit(tree)

    for op in ALL_OPS:
        for depth in range(1, hybrid.MAX_DEPTH + 1):
            for dtype in ("float32", "int32"):
                ascend_check(hybrid.kernel_source(op, depth, dtype))
    with pytest.raises(ValueError, match="not available on the device Ascend"):
        ascend_check(hybrid.kernel_source("ScatterMax").replace("a == b", "isnan(a)"))


def test_uint8_is_refused_by_the_dsl():
    """AKG's hybrid parser allocates output_tensor/allocate buffers through
    calls._allocate_tensor, which accepts only dtypes named int*/float*: uint8 cannot be a
    kernel dtype, so hybrid_scatter computes uint8 in int32 (tests above). Asserted on the
    parser's own function: compiling a uint8 kernel would kill the build server."""
    assert hybrid.DSL_REFUSED_DTYPES == ("uint8",) and hybrid.COMPUTE_DTYPE["uint8"] == "int32"
    from mindspore._extends.parallel_compile.akg_compiler.get_file_path import get_akg_path
    if get_akg_path() not in sys.path:
        sys.path.append(get_akg_path())
    from akg import tvm  # pylint: disable=import-outside-toplevel
    from akg.tvm.hybrid import calls  # pylint: disable=import-outside-toplevel
    shape = [tvm.const(2, "int32")]
    with pytest.raises(ValueError, match="either int or float"):
        calls._allocate_tensor("output_tensor", [shape, "uint8"])  # pylint: disable=protected-access
    for dtype in ("int8", "int16", "int32", "int64", "float16", "float32", "float64"):
        assert calls._allocate_tensor("output_tensor", [shape, dtype])[1] == dtype  # pylint: disable=protected-access


def test_ascend_registration_info():
    info = hybrid.ascend_reg_info()
    assert info["target"] == "Ascend"
    assert [i["name"] for i in info["inputs"]] == ["x", "indices", "updates"]
    assert len(info["outputs"]) == 1


# ------------------------------------------------------------------ GRAPH mode

class _InPlace(nn.Cell):
    """The in-place wiring: the kernel's out-of-place result assigned to the Parameter."""

    def __init__(self, op, x):
        super().__init__()
        self.p = Parameter(Tensor(x), name="p")
        self.scatter = hybrid.HybridScatter(op)

    def construct(self, indices, updates):
        ops.assign(self.p, self.scatter(self.p, indices, updates))
        return self.p


@pytest.mark.parametrize("op,dtype,index_dtype", [
    ("ScatterAdd", "float32", "int32"), ("ScatterNdMax", "float16", "int64"), ("ScatterDiv", "int32", "int64")])
def test_graph_mode_in_place_wiring(op, dtype, index_dtype, rng_for, bits_equal):
    x, indices, updates = random_case(rng_for(("graph", op)), op, shape_of(op), N_INDEX, dtype, index_dtype)
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.GRAPH_MODE)
    try:
        net = _InPlace(op, x)
        out = net(Tensor(indices), Tensor(updates)).asnumpy()
        param = net.p.asnumpy()
    finally:
        ms.set_context(mode=previous)
    expected = expected_of(op, x, indices, updates)
    bits_equal(out, expected, f"{op} GRAPH output")
    bits_equal(param, expected, f"{op} GRAPH Parameter")
