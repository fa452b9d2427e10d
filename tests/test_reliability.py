"""Reliability of the kernel library under hostile and random inputs (no MindSpore graph).

* Property-based fuzzing (hypothesis, derandomized) of every one of the 21 operators'
  entry points against the numpy loop oracle: random shapes with zero-size dimensions,
  0-d / empty / rank-1 indices, index depth 0 .. rank, all 8 value dtypes, both index
  dtypes, duplicates, NaN, +-inf, -0.0 and dtype extremes. Results equal the oracle
  (NaN == NaN, and the sign of zero checked); a case the oracle rejects gets the kernel's
  matching code with input_x untouched.
* Determinism across thread counts: calls big enough for the multi-thread path give the
  same bytes at 1, 2 and 3 threads, for every operator and dtype (random and sorted
  index order, duplicates, float16).
* Hostile inputs: out-of-range / negative indices at the first, a middle and the last
  position (code 2, nothing written, the message names op, value, position, range),
  wrong updates shapes (code 1), unsupported dtype strings and argument counts (code 1),
  integer division by zero (code 3, nothing written).
* A tensor of more than 2**31 elements (marker `bigmem`, MS_SCATTER_BIGMEM=1).

Environment: MS_SCATTER_FUZZ_EXAMPLES=N sets hypothesis' examples per fuzz test (default
sized so this file runs in well under a minute on 2 cores) and enables the `slow` test
test_fuzz_long_run. MS_SCATTER_BIGMEM=1 enables the big-tensor test where /proc/meminfo
shows enough available memory.
"""
import ctypes
import math
import os
import re
import time
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ms_scatter
from ms_scatter import infer
from ms_scatter.testing import (KernelCall, is_float, np_dtype, OracleIndexError, OracleZeroDivisionError, call_kernel,
                                kernel_library, oracle, rss_mb, split_op)


def _register_markers():
    """Register this module's markers (tests/conftest.py is not ours to edit) so that
    `-m "not slow"` works without an unknown-marker warning."""
    config = getattr(pytest.mark, "_config", None)
    if config is not None:
        known = {line.split(":")[0].strip() for line in config.getini("markers")}
        for name, doc in (("slow", "long runs, enabled by an environment variable"),
                          ("bigmem", "needs > 2 GiB of memory; MS_SCATTER_BIGMEM=1")):
            if name not in known:
                config.addinivalue_line("markers", f"{name}: {doc}")


_register_markers()

ALL_OPS = tuple(f + r for f in infer.FAMILIES for r in infer.REDUCTIONS)
VALUE_DTYPES = infer.VALUE_DTYPES
INDEX_DTYPES = infer.INDEX_DTYPES
FUZZ_ENV = os.environ.get("MS_SCATTER_FUZZ_EXAMPLES")
EXAMPLES = int(FUZZ_ENV) if FUZZ_ENV else 30

FUZZ = settings(derandomize=True, deadline=None, max_examples=EXAMPLES, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])


def outputs_of(op):
    return ("tensor",) if split_op(op)[0] == "TensorScatter" else ("token", "return")


# ------------------------------------------------------------------ comparison helpers

def assert_same(got, expected, what=""):
    """Same dtype and shape; equal with NaN == NaN; -0.0 told apart from +0.0."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if got.dtype.name == "bfloat16":  # exact in float32
        got, expected = got.astype(np.float32), expected.astype(np.float32)
    if got.dtype.kind == "f":
        equal = np.array_equal(got, expected, equal_nan=True)
        real = ~np.isnan(expected)
        signs = np.array_equal(np.signbit(got[real]), np.signbit(expected[real]))
        assert equal and signs, f"{what}:\n got {got!r}\n expected {expected!r}"
    else:
        assert np.array_equal(got, expected), f"{what}:\n got {got!r}\n expected {expected!r}"


def expected_outcome(op, x, indices, updates):
    """(kernel code the policies require, oracle result or None)."""
    try:
        with np.errstate(all="ignore"):
            return 0, oracle(op, x, indices, updates)
    except OracleIndexError:
        return 2, None
    except OracleZeroDivisionError:
        return 3, None


def check_against_oracle(op, output, x, indices, updates):
    code, want = expected_outcome(op, x, indices, updates)
    x0, i0, u0 = x.tobytes(), indices.tobytes(), updates.tobytes()
    rc, x_after, out = call_kernel(op, x, indices, updates, output)
    what = (f"{op}/{output} x{x.shape}:{x.dtype} indices{indices.shape}:{indices.dtype} "
            f"updates{updates.shape}")
    assert rc == code, f"{what}: code {rc}, expected {code} ({ms_scatter.last_error()[1]})"
    assert (x.tobytes(), indices.tobytes(), updates.tobytes()) == (x0, i0, u0), f"{what}: caller's arrays modified"
    if code:
        assert x_after.tobytes() == x0, f"{what}: input_x written by a call that failed with code {code}"
        return
    assert_same(out if output == "tensor" else x_after, want, what)
    if output == "return":
        assert out.tobytes() == x_after.tobytes(), f"{what}: _return output != updated input_x"
    elif output == "tensor":
        assert x_after.tobytes() == x0, f"{what}: TensorScatter modified input_x"
    else:
        assert out.dtype == np.int32 and out.shape == (1,)


# ------------------------------------------------------------------ strategies

# bfloat16 (no numpy finfo): max, -max, tiny, +-smallest subnormal, eps as bit patterns
BF16_SPECIAL_BITS = (0x7f7f, 0xff7f, 0x0080, 0x0001, 0x8001, 0x3c00)


def special_values(dtype):
    dtype = np_dtype(dtype)
    if dtype.name == "bfloat16":
        bits = np.array(BF16_SPECIAL_BITS, np.uint16).view(dtype).astype(np.float32).tolist()
        return [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0] + bits
    if dtype.kind == "f":
        fi = np.finfo(dtype)
        return [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, fi.max, fi.min, fi.tiny,
                fi.smallest_subnormal, -fi.smallest_subnormal, fi.eps]
    ii = np.iinfo(dtype)
    return sorted({int(ii.min), int(ii.max), 0, 1, int(ii.max) - 1, int(ii.min) + 1, -1 if ii.min else 2})


TINY_POOLS = {"f": [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0],
              "i": ["min", "max", -1, 0, 1], "u": ["min", "max", 0, 1]}


def value_arrays(dtype, shape, tiny=False):
    """Arrays mixing the dtype's special values, a few small values (so that equal values,
    0.0 against -0.0 and NaN against numbers meet at one destination) and any value; with
    `tiny`, only a handful of values (NaN, +-inf, +-0.0, +-1; or MIN, MAX, -1, 0, 1), so
    that they collide on every destination."""
    dtype = np_dtype(dtype)
    if dtype.name == "bfloat16":  # drawn as float32 values that bfloat16 holds exactly
        bf16 = dtype
        return value_arrays(np.float32, shape, tiny).map(lambda a: a.astype(bf16))
    if tiny:
        pool = [getattr(np.iinfo(dtype), v) if isinstance(v, str) else v for v in TINY_POOLS[dtype.kind]]
        return hnp.arrays(dtype, shape, elements=st.sampled_from(pool), fill=st.nothing())
    small = [-3, -2, -1, 0, 1, 2, 3] + ([0.5, -0.0, -0.5] if dtype.kind == "f" else [])
    if dtype.kind == "u":
        small = [v for v in small if v >= 0]
    anything = (hnp.from_dtype(dtype, allow_nan=True, allow_infinity=True, allow_subnormal=True)
                if dtype.kind == "f" else hnp.from_dtype(dtype))
    elements = st.one_of(st.sampled_from(special_values(dtype)), st.sampled_from(small), anything)
    return hnp.arrays(dtype, shape, elements=elements, fill=st.nothing())  # every element drawn


def sizes(max_dim):
    """A dimension size: 1..max_dim, and 0 about one time in 3 * max_dim + 1."""
    return st.sampled_from(list(range(1, max_dim + 1)) * 3 + [0])


@st.composite
def scatter_cases(draw, op, dtype=None, max_dim=4, max_batch_rank=2, tiny=False):
    """(output, x, indices, updates) of a valid-shaped call of `op` (values of `dtype`, or
    of any dtype); index values mostly in range (a zero-size indexed dimension makes any
    index out of range)."""
    family, reduction = split_op(op)
    output = draw(st.sampled_from(outputs_of(op)))
    dtype = dtype or draw(st.sampled_from(VALUE_DTYPES))
    index_dtype = draw(st.sampled_from(INDEX_DTYPES))
    dim = sizes(max_dim)
    x_shape = tuple(draw(st.lists(dim, min_size=1, max_size=3)))
    # index batch rank: Scatter 0 (a 0-d index) .. max; ScatterNd 0 (rank-1 indices) ..;
    # TensorScatter 1 .. (indices of rank >= 2)
    min_rank = 1 if family == "TensorScatter" else 0
    batch_rank = draw(st.sampled_from(list(range(min_rank, max_batch_rank + 1)) * 2 + [min_rank]))
    batch = tuple(draw(st.lists(dim, min_size=batch_rank, max_size=batch_rank)))
    if family == "Scatter":
        depth = 1
    else:  # depth 1 .. rank mostly, 0 (every vector addresses all of x) sometimes
        depth = draw(st.sampled_from(list(range(1, len(x_shape) + 1)) * 3 + [0]))
    n = math.prod(batch)
    dims = x_shape[:depth]
    # raw components, then reduced into range: few distinct values, hence duplicates
    raw = draw(hnp.arrays(np.int64, (n, depth), elements=st.integers(0, 7)))
    if draw(st.booleans()):  # all index vectors from the first two: many duplicates
        raw = raw[np.arange(n) % 2] if n >= 2 else raw
    for d, size in enumerate(dims):
        if size:
            raw[:, d] %= size
    indices = raw.reshape(batch) if family == "Scatter" else raw.reshape(batch + (depth,))
    indices = indices.astype(index_dtype)
    x = draw(value_arrays(dtype, x_shape, tiny))
    updates = draw(value_arrays(dtype, batch + x_shape[depth:], tiny))
    if reduction == "Div" and not is_float(dtype) and draw(st.booleans()):
        updates[updates == 0] = 1  # else most integer Div cases are the division-by-zero error
    return output, x, indices, updates


# ------------------------------------------------------------------ fuzzing against the oracle

OP_DTYPES = [pytest.param(op, dtype, id=f"{op}-{dtype}") for op in ALL_OPS for dtype in VALUE_DTYPES]


@pytest.mark.parametrize("op,dtype", OP_DTYPES)
def test_fuzz_matches_oracle(op, dtype):
    @FUZZ
    @given(case=scatter_cases(op, dtype))
    def run(case):
        check_against_oracle(op, *case)

    run()


@pytest.mark.parametrize("op,dtype", OP_DTYPES)
def test_fuzz_colliding_special_values(op, dtype):
    """Values from a handful (NaN, +-inf, +-0.0, +-1 / MIN, MAX, -1, 0, 1) on few
    destinations: NaN propagation in Max/Min, the sign of zero, inf - inf, 0 * inf,
    MIN / -1 and wrap-around meet on every case."""
    @settings(FUZZ, max_examples=max(5, EXAMPLES // 2))
    @given(case=scatter_cases(op, dtype, max_dim=3, tiny=True))
    def run(case):
        check_against_oracle(op, *case)

    run()


@pytest.mark.slow
@pytest.mark.skipif(not FUZZ_ENV, reason="long fuzz run: set MS_SCATTER_FUZZ_EXAMPLES=N")
def test_fuzz_long_run():
    """All operators and dtypes in one run, larger shapes and index batches: 21 * 8 * N
    examples."""
    @settings(FUZZ, max_examples=EXAMPLES * len(OP_DTYPES))
    @given(data=st.data())
    def run(data):
        op = data.draw(st.sampled_from(ALL_OPS))
        check_against_oracle(op, *data.draw(scatter_cases(op, max_dim=9, max_batch_rank=3)))

    run()


# ------------------------------------------------------------------ hostile inputs

def _flat_position(where, size, data):
    if where == "first":
        return 0
    if where == "last":
        return size - 1
    return data.draw(st.integers(0, size - 1)) if size > 2 else size // 2


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("op", ALL_OPS)
def test_bad_index_rejected_before_any_write(op, where):
    """One (or a second, later) index value outside [0, dim): code 2, input_x byte for byte
    unchanged, and the message names the op, the first bad value in index order, its
    position in `indices` and the valid range."""
    @settings(FUZZ, max_examples=max(8, EXAMPLES // 2))
    @given(data=st.data())
    def run(data):
        output, x, indices, updates = data.draw(scatter_cases(op))
        family = split_op(op)[0]
        depth = 1 if family == "Scatter" else indices.shape[-1]
        assume(indices.size > 0 and all(d > 0 for d in x.shape[:depth]))
        flat = _flat_position(where, indices.size, data)
        component = 0 if family == "Scatter" else flat % depth
        size = x.shape[component]
        info = np.iinfo(indices.dtype)
        bad = data.draw(st.sampled_from([size, size + 1, size + 1000, -1, -size, -1000, int(info.min),
                                         int(info.max)]))
        indices = indices.copy()
        indices.reshape(-1)[flat] = bad
        if flat + 1 < indices.size and data.draw(st.booleans()):
            later = flat + 1 + data.draw(st.integers(0, indices.size - flat - 2))
            indices.reshape(-1)[later] = -7  # a later bad value: not the one reported
        before = ms_scatter.last_error()[2]
        x0 = x.tobytes()
        rc, x_after, _ = call_kernel(op, x, indices, updates, output)
        assert rc == 2, ms_scatter.last_error()
        assert x_after.tobytes() == x0
        code, message, count = ms_scatter.last_error()
        assert code == 2 and count == before + 1
        position = tuple(int(p) for p in np.unravel_index(flat, indices.shape))
        assert message.startswith(f"For '{op}', "), message
        assert f"must be in [0, {size}) (dimension {component} of 'input_x' with shape " in message, message
        assert f"but got {bad} at position {position} of 'indices' (shape {indices.shape})" in message, message

    run()


def _perturbed_shapes(shape):
    out = [shape + (1,), shape + (2,), (3,) + shape]
    if shape:
        out.append(shape[:-1])
        out.append(shape[1:])
        for d in range(len(shape)):
            out.append(shape[:d] + (shape[d] + 1,) + shape[d + 1:])
            if shape[d] > 0:
                out.append(shape[:d] + (shape[d] - 1,) + shape[d + 1:])
    return [s for s in out if s != shape]


@pytest.mark.parametrize("op", ALL_OPS)
def test_wrong_updates_shape_straight_to_the_kernel(op):
    """Shapes MindSpore's inference would refuse, passed to the kernel directly: code 1
    and nothing written (the kernel reads no buffer of a shape it did not check)."""
    @settings(FUZZ, max_examples=max(5, EXAMPLES // 2))
    @given(data=st.data())
    def run(data):
        output, x, indices, updates = data.draw(scatter_cases(op))
        shape = data.draw(st.sampled_from(_perturbed_shapes(updates.shape)))
        bad_updates = np.ones(shape, updates.dtype)
        before = ms_scatter.last_error()[2]
        rc, x_after, _ = call_kernel(op, x, indices, bad_updates, output)
        assert rc == 1, (x.shape, indices.shape, shape)
        assert x_after.tobytes() == x.tobytes()
        code, message, count = ms_scatter.last_error()
        assert code == 1 and count == before + 1
        assert message.startswith(f"For '{op}', the shape of 'updates' must match"), message

    run()


BAD_VALUE_DTYPES = [b"bool", b"complex64", b"complex128", b"float8_e4m3fn", b"int4", b"BFloat16",
                    b"float", b"double", b"half", b"Float32", b"float32 ", b" int8", b"", b"x" * 300]
BAD_INDEX_DTYPES = [b"int8", b"int16", b"uint8", b"uint32", b"uint64", b"float32", b"float64", b"bool",
                    b"Int32", b"int", b""]


@pytest.mark.parametrize("op,output", [(op, out) for op in ALL_OPS for out in outputs_of(op)])
def test_unsupported_dtype_strings(op, output):
    family = split_op(op)[0]
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    indices = np.array([1, 3], np.int32) if family == "Scatter" else np.array([[1], [3]], np.int32)
    updates = np.ones((2, 3), np.float32)

    def launch(x_dtype, index_dtype, updates_dtype):
        xx = x.copy()
        call = KernelCall(op, xx, indices.copy(), updates.copy(), output)
        call.dtypes[0], call.dtypes[1], call.dtypes[2] = x_dtype, index_dtype, updates_dtype
        before = ms_scatter.last_error()[2]
        rc = call.run()
        code, message, count = ms_scatter.last_error()
        what = (x_dtype[:20], index_dtype, updates_dtype[:20])
        assert rc == 1 and code == 1 and count == before + 1, what
        assert message.startswith(f"For '{op}', "), message
        assert xx.tobytes() == x.tobytes(), what

    for name in BAD_VALUE_DTYPES:
        if op.endswith("Update") and name.decode() in infer.COPY_DTYPES:
            continue  # Update copies these (tests/test_kernels.py: test_update_copies_bool_and_complex)
        launch(name, b"int32", name)
    for name in BAD_INDEX_DTYPES:
        launch(b"float32", name, b"float32")
    for x_dtype, updates_dtype in [(b"float32", b"float64"), (b"float32", b"int32"), (b"int32", b"float32"),
                                   (b"float32", b"float16"), (b"int8", b"uint8")]:
        launch(x_dtype, b"int32", updates_dtype)
    # and a wrong argument count (MindSpore passes 3 inputs + 1 output)
    call = KernelCall(op, x.copy(), indices.copy(), updates.copy(), output)
    for nparam in (0, 1, 3, 5):
        assert call.fn(nparam, call.params, call.ndims, call.shapes, call.dtypes, None, None) == 1
    assert call.arrays[0].tobytes() == x.tobytes()


@pytest.mark.parametrize("op", [f + "Div" for f in infer.FAMILIES])
def test_integer_division_by_zero_before_any_write(op):
    """A zero anywhere in an integer `updates` (also at a position whose index repeats):
    code 3, input_x unchanged, the position of the first zero reported. An out-of-range
    index in the same call takes precedence (code 2)."""
    @settings(FUZZ, max_examples=max(20, 2 * EXAMPLES))
    @given(data=st.data())
    def run(data):
        dtype = data.draw(st.sampled_from([d for d in VALUE_DTYPES if np_dtype(d).kind in "iu"]))
        output, x, indices, updates = data.draw(scatter_cases(op, dtype).filter(lambda c: c[3].size > 0))
        family = split_op(op)[0]
        depth = 1 if family == "Scatter" else indices.shape[-1]
        assume(all(d > 0 for d in x.shape[:depth]))
        updates = np.where(updates == 0, np.ones_like(updates), updates)
        flat = data.draw(st.integers(0, updates.size - 1))
        updates.reshape(-1)[flat] = 0
        if flat + 1 < updates.size and data.draw(st.booleans()):
            updates.reshape(-1)[data.draw(st.integers(flat + 1, updates.size - 1))] = 0
        rc, x_after, _ = call_kernel(op, x, indices, updates, output)
        assert rc == 3, ms_scatter.last_error()
        assert x_after.tobytes() == x.tobytes()
        code, message, _ = ms_scatter.last_error()
        position = tuple(int(p) for p in np.unravel_index(flat, updates.shape))
        assert code == 3 and message.startswith(f"For '{op}', integer division by zero"), message
        assert f"but got 0 at position {position} of 'updates' (shape {updates.shape})" in message, message
        if indices.size:
            bad = indices.copy()
            bad.reshape(-1)[-1] = -1
            rc, x_after, _ = call_kernel(op, x, bad, updates, output)
            assert rc == 2 and x_after.tobytes() == x.tobytes()

    run()


# ------------------------------------------------------------------ determinism across thread counts

KERNEL_SOURCE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "kernels", "cpu",
                             "scatter_cpu.cc")


def parallel_thresholds():
    """(kParallelMinWork elements, kFewRowsBytes bytes) of choose_threads(), read from the
    kernel source the library is built from, so that the cases below stay on the
    multi-thread path when the thresholds are retuned."""
    values = {"kParallelMinWork": 1 << 22, "kFewRowsBytes": 1 << 20}
    with open(KERNEL_SOURCE) as f:
        source = f.read()
    for name in values:
        m = re.search(name + r"\s*=\s*int64_t\(1\)\s*<<\s*(\d+)\s*;", source)
        assert m, f"{name} not found in {KERNEL_SOURCE}: update parallel_thresholds()"
        values[name] = 1 << int(m.group(1))
    return values["kParallelMinWork"], values["kFewRowsBytes"]


PARALLEL_MIN_WORK, PARALLEL_MIN_SPAN = parallel_thresholds()


def takes_parallel_path(x, indices, depth, threads):
    """The multi-thread conditions of choose_threads(), recomputed from the inputs."""
    slice_ = math.prod(x.shape[depth:])
    vectors = indices.reshape(-1, depth).astype(np.int64)
    strides = [math.prod(x.shape[d + 1:]) for d in range(depth)]
    off = vectors @ np.array(strides, np.int64)
    n = len(off)
    span = (int(off.max()) - int(off.min()) + slice_) * x.itemsize
    return threads > 1 and n * slice_ >= PARALLEL_MIN_WORK and n >= 2 * threads and span >= PARALLEL_MIN_SPAN


@pytest.fixture
def set_threads():
    """ms_scatter_set_num_threads (n >= 1: at most n threads; 0: automatic), restored after."""
    lib = kernel_library()
    lib.ms_scatter_num_threads.restype = ctypes.c_int
    lib.ms_scatter_set_num_threads.argtypes = [ctypes.c_int]
    saved = lib.ms_scatter_num_threads()
    yield lib.ms_scatter_set_num_threads
    lib.ms_scatter_set_num_threads(saved)
    assert lib.ms_scatter_num_threads() == saved


def big_case(op, dtype, index_dtype, order, rng):
    """A call on the multi-thread path: 256 index vectors, slices of PARALLEL_MIN_WORK / 256
    elements (n * slice = the threshold), input_x spanning 2 MiB or more; half the indices
    on 8 hot rows (duplicates), the first and last rows always touched; values with 1%
    NaN / inf / -0.0 / extremes."""
    family, reduction = split_op(op)
    dtype = np_dtype(dtype)
    n = 256
    slice_ = max(1, PARALLEL_MIN_WORK // n)
    rows = max(16, -(-2 * PARALLEL_MIN_SPAN // (slice_ * dtype.itemsize)))
    rows += -rows % 8
    x_shape, depth = ((rows, slice_), 1) if family == "Scatter" else ((rows // 8, 8, slice_), 2)
    hot = rng.choice(rows, 8, replace=False)
    flat = np.concatenate([rng.integers(0, rows, n // 2), hot[rng.integers(0, 8, n - n // 2)]])
    flat[:2] = (0, rows - 1)
    rng.shuffle(flat)
    if order == "sorted":
        flat.sort()
    if family == "Scatter":
        indices = flat.astype(index_dtype)
    else:
        indices = np.stack(np.unravel_index(flat, x_shape[:2]), axis=-1).astype(index_dtype)

    def values(shape):
        if is_float(dtype):
            v = rng.standard_normal(shape, dtype=np.float32) * 4
            if reduction in ("Mul", "Div"):
                v[np.abs(v) < 0.25] = 1.5
            v = v.astype(dtype)
        else:
            info = np.iinfo(dtype)
            v = rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=dtype)
        specials = np.array(special_values(dtype), dtype)
        flat_v = v.reshape(-1)
        where = rng.integers(0, flat_v.size, flat_v.size // 100)
        flat_v[where] = specials[rng.integers(0, len(specials), where.size)]
        if reduction == "Div" and not is_float(dtype):
            v[v == 0] = 1
        return v

    return values(x_shape), indices, values((n,) + x_shape[depth:]), depth


# every operator in float16 (the grouped path, which also takes threads when left
# automatic) and every dtype for one operator of each reduction kind and family
THREAD_CASES = sorted({(op, "float16") for op in ALL_OPS}
                      | {(op, dtype) for op in ("ScatterAdd", "ScatterNdMax", "TensorScatterUpdate", "ScatterDiv",
                                                "ScatterNdMul", "TensorScatterMin", "ScatterSub")
                         for dtype in VALUE_DTYPES},
                      key=lambda c: (ALL_OPS.index(c[0]), VALUE_DTYPES.index(c[1])))
THREAD_CASES = [pytest.param(op, dtype, id=f"{op}-{dtype}") for op, dtype in THREAD_CASES]


@pytest.mark.parametrize("op,dtype", THREAD_CASES)
def test_same_bytes_at_1_2_3_threads(op, dtype, set_threads):
    """The multi-thread path (every destination slice owned by one thread, index order
    inside it) gives the single-thread bytes, for random and sorted index order (two
    partitioning schemes), and those equal the oracle."""
    output = outputs_of(op)[-1]  # _return: the in-place path plus the copy; TensorScatter: its one entry
    for order in ("random", "sorted"):
        seed = zlib.crc32(f"{op}-{dtype}-{order}".encode())
        index_dtype = INDEX_DTYPES[seed % 2]
        x, indices, updates, depth = big_case(op, dtype, index_dtype, order, np.random.default_rng(seed))
        assert takes_parallel_path(x, indices, depth, 2), "case too small for the multi-thread path"
        results = {}
        for threads in (1, 2, 3, 0):
            set_threads(threads)
            rc, x_after, out = call_kernel(op, x, indices, updates, output)
            assert rc == 0, ms_scatter.last_error()
            results[threads] = (out if output == "tensor" else x_after).tobytes()
        for threads in (2, 3, 0):
            assert results[threads] == results[1], (
                f"{op} {dtype} {order}: {threads or 'automatic'} threads differ from 1")
        code, want = expected_outcome(op, x, indices, updates)
        assert code == 0
        assert_same(np.frombuffer(results[1], x.dtype).reshape(x.shape), want, f"{op} {dtype} {order}")


def test_same_bytes_elementwise_float16_many_duplicates(set_threads):
    """Depth == rank (slices of one element), PARALLEL_MIN_WORK float16 updates, a quarter
    of them on 16 hot elements: the grouped float32 accumulation is the same at any thread
    count and equals the in-order float32 sum (numpy.add.at is unbuffered, in index
    order)."""
    rng = np.random.default_rng(2024)
    side = 1024
    x = (rng.standard_normal((side, side), dtype=np.float32) * 4).astype(np.float16)
    n = PARALLEL_MIN_WORK
    indices = rng.integers(0, side, (n, 2))
    indices[: n // 4] %= 4
    updates = rng.standard_normal(n, dtype=np.float32).astype(np.float16)
    assert takes_parallel_path(x, indices, 2, 2)
    acc = x.astype(np.float32)
    np.add.at(acc, (indices[:, 0], indices[:, 1]), updates.astype(np.float32))
    want = acc.astype(np.float16)
    for op, output in (("ScatterNdAdd", "token"), ("TensorScatterAdd", "tensor")):
        for threads in (1, 2, 3, 0):
            set_threads(threads)
            rc, x_after, out = call_kernel(op, x, indices, updates, output)
            assert rc == 0
            assert (out if output == "tensor" else x_after).tobytes() == want.tobytes(), f"{op} threads={threads}"


# float16 over a dense span of more than 2^20 slices (kCountedRows): the blocked counting
# sort (destination blocks of 256 KiB of float accumulators).
COUNTED_ROWS = 1 << 20


def blocked_case(op, cols, rng):
    """x (rows, cols) float16 with rows > COUNTED_ROWS; 3/4 of the updates in the first
    8192 rows (blocks dense enough to be loaded whole), the rest spread over all rows
    (blocks loaded slice by slice); first and last rows touched; duplicates; 1% NaN / inf /
    -0.0 / extremes in x and updates."""
    rows = COUNTED_ROWS + 4099  # a partial last block
    n = rows // 3  # dense: span <= 4 n + 1024 rows
    flat = np.concatenate([rng.integers(0, 8192, 3 * n // 4), rng.integers(0, rows, n - 3 * n // 4)])
    rng.shuffle(flat)
    flat[:2] = (rows - 1, 0)
    specials = np.array(special_values(np.float16), np.float16)

    def values(shape):
        v = (rng.standard_normal(shape, dtype=np.float32) * 4).astype(np.float16)
        flat_v = v.reshape(-1)
        where = rng.integers(0, flat_v.size, flat_v.size // 100)
        flat_v[where] = specials[rng.integers(0, len(specials), where.size)]
        return v

    indices = flat.astype(np.int32)
    if split_op(op)[0] != "Scatter":
        indices = indices[:, None]
    return values((rows, cols)), indices, values((n, cols))


@pytest.mark.parametrize("cols", [4, 3])
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterMin", "ScatterNdMul", "TensorScatterMax", "TensorScatterSub"])
def test_float16_blocked_path(op, cols, set_threads):
    """The blocked path equals the oracle (float32 accumulation, rounded once) at 1 and
    2 threads, byte for byte; untouched elements keep their exact bits."""
    rng = np.random.default_rng(zlib.crc32(f"blocked-{op}-{cols}".encode()))
    x, indices, updates = blocked_case(op, cols, rng)
    assert x.shape[0] > COUNTED_ROWS
    output = outputs_of(op)[-1]
    code, want = expected_outcome(op, x, indices, updates)
    assert code == 0
    for threads in (1, 2):
        set_threads(threads)
        rc, x_after, out = call_kernel(op, x, indices, updates, output)
        assert rc == 0, ms_scatter.last_error()
        got = out if output == "tensor" else x_after
        assert_same(got, want, f"{op} cols={cols} threads={threads}")
        untouched = np.setdiff1d(np.arange(x.shape[0]), indices.reshape(-1))
        assert got[untouched].tobytes() == x[untouched].tobytes()


# ------------------------------------------------------------------ the automatic thread rule

def _rule_library():
    lib = kernel_library()
    lib.ms_scatter_thread_rule_learns.restype = ctypes.c_int
    lib.ms_scatter_reset_thread_choices.restype = None
    return lib


def _candidates(cores):
    """The counts the rule tries on `cores` cores (thread_rule.h): 1, 2, 4, ..., cores."""
    out, c = [], 1
    while c < cores:
        out.append(c)
        c *= 2
    return out + [cores]


needs_learning_rule = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2 or os.environ.get("MS_SCATTER_THREAD_RULE") == "fixed",
    reason="the automatic thread rule learns only with 2 or more cores and MS_SCATTER_THREAD_RULE unset")

RULE_CASES = [("ScatterAdd", "float32", "random", "direct"), ("ScatterAdd", "int64", "sorted", "direct-sorted"),
              ("ScatterNdMax", "float16", "random", "float-accumulated"),
              ("TensorScatterMin", "bfloat16", "sorted", "float-accumulated-sorted"),
              ("TensorScatterAdd", "float32", "few", "copy")]


@needs_learning_rule
@pytest.mark.parametrize("op,dtype,order,kind", RULE_CASES, ids=[c[3] for c in RULE_CASES])
def test_automatic_rule_learns_from_the_calls(op, dtype, order, kind, set_threads):
    """Left automatic, the first calls of a kind of work try each candidate count (one
    untimed warm-up call each, then three timed ones) and the rule then keeps one count:
    exactly 4 x candidates calls decide, later calls keep the choice and take no more
    samples, and every call on the way gives the single-thread bytes."""
    lib = _rule_library()
    if order == "few":  # a large copy of input_x (16 MiB and more) and a few updates
        rng = np.random.default_rng(5)
        x = rng.standard_normal((1 << 16, 64)).astype(np.float32)
        indices = rng.integers(0, 1 << 16, (8, 1)).astype(np.int32)
        updates = rng.standard_normal((8, 64)).astype(np.float32)
    else:
        x, indices, updates, _ = big_case(op, dtype, "int32", order, np.random.default_rng(zlib.crc32(kind.encode())))
    output = outputs_of(op)[-1]
    set_threads(1)
    rc, x_after, out = call_kernel(op, x, indices, updates, output)
    assert rc == 0, ms_scatter.last_error()
    want = (out if output == "tensor" else x_after).tobytes()
    set_threads(0)
    lib.ms_scatter_reset_thread_choices()
    assert ms_scatter.thread_choices() == []
    calls, decided = 0, None
    while decided is None and calls < 200:
        rc, x_after, out = call_kernel(op, x, indices, updates, output)
        calls += 1
        assert rc == 0, ms_scatter.last_error()
        assert (out if output == "tensor" else x_after).tobytes() == want, f"call {calls} differs from 1 thread"
        rows = [r for r in ms_scatter.thread_choices() if r["kind"] == kind]
        assert len(rows) == 1, ms_scatter.thread_choices()
        if rows[0]["threads"]:
            decided = rows[0]
    assert decided is not None, "the rule never decided"
    cands = _candidates(decided["cores"])
    assert decided["threads"] in cands
    assert calls == 4 * len(cands) and decided["samples"] == 3 * len(cands), (calls, decided)
    assert decided["ns_per_kunit"] > 0
    for _ in range(3):
        rc, x_after, out = call_kernel(op, x, indices, updates, output)
        assert rc == 0 and (out if output == "tensor" else x_after).tobytes() == want
    assert [r for r in ms_scatter.thread_choices() if r["kind"] == kind] == [decided]


@needs_learning_rule
def test_explicit_thread_count_learns_nothing(set_threads):
    """set_num_threads(n >= 1) is used as given: the rule's table stays empty."""
    lib = _rule_library()
    x, indices, updates, _ = big_case("ScatterAdd", "float32", "int32", "sorted", np.random.default_rng(9))
    lib.ms_scatter_reset_thread_choices()
    for threads in (1, 2):
        set_threads(threads)
        for _ in range(10):
            assert call_kernel("ScatterAdd", x, indices, updates, "token")[0] == 0
    assert ms_scatter.thread_choices() == []


def test_fixed_rule_by_environment():
    """MS_SCATTER_THREAD_RULE=fixed: the library does not learn (checked in a fresh process,
    the setting is read once)."""
    import subprocess
    import sys
    code = ("import ctypes, ms_scatter; from ms_scatter.testing import kernel_library; "
            "print(kernel_library().ms_scatter_thread_rule_learns(), ms_scatter.thread_choices())")
    env = dict(os.environ, MS_SCATTER_THREAD_RULE="fixed")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[-2] == "0 []", out.stdout


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc/self/status (Linux)")
def test_scratch_given_back_after_a_large_call(set_threads):
    """The calling thread keeps its scratch (here the 64-bit offsets, 8 bytes per index)
    between calls, and gives back a buffer over 64 MiB when a call needs less than a
    quarter of it: a 9e6-index call leaves ~72 MB, the next small call frees it."""
    set_threads(1)
    n = 9_000_000
    rng = np.random.default_rng(31)
    x = np.zeros(16, np.float32)
    indices = rng.integers(0, 16, n).astype(np.int32)
    updates = np.ones(n, np.float32)
    rc, x_after, _ = call_kernel("ScatterAdd", x, indices, updates, "token")
    assert rc == 0
    assert x_after.sum() == n  # small integers: exact in float32
    del indices, updates
    before = rss_mb()
    rc, x_after, _ = call_kernel("ScatterAdd", x, np.array([3], np.int32), np.ones(1, np.float32), "token")
    assert rc == 0 and x_after[3] == 1
    after = rss_mb()
    assert before - after > 0.8 * n * 8 / 2 ** 20, f"VmRSS {before:.0f} MB -> {after:.0f} MB"


# ------------------------------------------------------------------ a tensor of more than 2**31 elements

BIG_ROWS, BIG_COLS = 2 ** 21 + 1, 1024   # int8: 2**31 + 1024 elements, 2 GiB


def _available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def _bigmem_skip_reason():
    if os.environ.get("MS_SCATTER_BIGMEM") != "1":
        return "big-tensor test (2 GiB int8 array, > 2**31 elements): set MS_SCATTER_BIGMEM=1"
    need = 6 << 30
    if _available_bytes() < need:
        return f"MemAvailable {_available_bytes() >> 20} MiB < {need >> 20} MiB needed by the big-tensor test"
    return None


@pytest.mark.bigmem
@pytest.mark.skipif(_bigmem_skip_reason() is not None, reason=str(_bigmem_skip_reason()))
@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
def test_more_than_2_31_elements(index_dtype, set_threads, capsys):
    """An int8 input_x of shape (2**21 + 1, 1024): rows whose element offset is at or
    beyond 2**31 are updated in place (KernelCall on the array itself, no copy), by
    Scatter (row offsets), ScatterNd of depth 2 (element offsets) and on the multi-thread
    path (offsets spread over the whole 2 GiB); every touched row is checked against the
    oracle on the gathered rows and no other byte changes."""
    t0 = time.time()
    x = np.zeros((BIG_ROWS, BIG_COLS), np.int8)  # calloc: untouched pages are never materialised
    rng = np.random.default_rng(31)
    high = np.array([2 ** 21, 2 ** 21 - 1, 2 ** 21 - 2, 2 ** 20 * 3 // 2], np.int64)  # offset 2**31 and near it

    def check_rows(op, rows_before, rows, indices_rows, updates):
        """Oracle on the gathered rows (the remapped indices address the gathered copy)."""
        uniq, inverse = np.unique(rows, return_inverse=True)
        want = oracle(op, rows_before, inverse.reshape(indices_rows.shape), updates)
        assert np.array_equal(x[uniq], want), op

    # 1. ScatterAdd / ScatterMax on rows around and beyond 2**31 (token entry, in place)
    for op in ("ScatterAdd", "ScatterMax", "ScatterUpdate"):
        idx = np.concatenate([high, high[:2]]).astype(index_dtype)  # duplicates too
        upd = rng.integers(-100, 100, (len(idx), BIG_COLS)).astype(np.int8)
        uniq = np.unique(idx.astype(np.int64))
        before = x[uniq].copy()
        call = KernelCall(op, x, idx, upd, "token")
        assert call.run() == 0, ms_scatter.last_error()
        check_rows(op, before, idx.astype(np.int64), idx, upd)
    # 2. ScatterNdAdd / ScatterNdUpdate, depth 2: single elements at offsets >= 2**31
    for op in ("ScatterNdAdd", "ScatterNdUpdate"):
        idx = np.array([[2 ** 21, 0], [2 ** 21, 1023], [2 ** 21 - 1, 1023], [2 ** 21, 512], [2 ** 21, 0]],
                       index_dtype)
        upd = rng.integers(-100, 100, len(idx)).astype(np.int8)
        rows = np.unique(idx[:, 0].astype(np.int64))
        sub_idx = np.stack([np.searchsorted(rows, idx[:, 0].astype(np.int64)), idx[:, 1]], axis=-1)
        want = oracle(op, x[rows], sub_idx.astype(index_dtype), upd)
        call = KernelCall(op, x, idx, upd, "token")
        assert call.run() == 0, ms_scatter.last_error()
        assert np.array_equal(x[rows], want), op
    # 3. the multi-thread path over the whole array: PARALLEL_MIN_WORK / 1024 rows spread over
    #    2 GiB, the last one included
    set_threads(2)
    spread = np.concatenate([rng.integers(0, BIG_ROWS, max(500, PARALLEL_MIN_WORK // BIG_COLS)), high,
                             [BIG_ROWS - 1] * 8]).astype(index_dtype)
    upd = rng.integers(-100, 100, (len(spread), BIG_COLS)).astype(np.int8)
    assert takes_parallel_path(x, spread, 1, 2)
    uniq = np.unique(spread.astype(np.int64))
    before = x[uniq].copy()
    call = KernelCall("ScatterAdd", x, spread, upd, "token")
    assert call.run() == 0, ms_scatter.last_error()
    check_rows("ScatterAdd", before, spread.astype(np.int64), spread, upd)
    # 4. a bad index just past the end is still caught (64-bit offsets, nothing written)
    x_last = x[-1].copy()
    bad = np.array([BIG_ROWS - 1, BIG_ROWS], index_dtype)
    call = KernelCall("ScatterAdd", x, bad, np.ones((2, BIG_COLS), np.int8), "token")
    assert call.run() == 2
    assert np.array_equal(x[-1], x_last)
    assert f"but got {BIG_ROWS} at position (1,)" in ms_scatter.last_error()[1]
    # 5. nothing else changed: every nonzero byte lies in a MiB block of a touched row
    touched = set(np.concatenate([high, spread.astype(np.int64)]).tolist())
    block = 1 << 20
    flat = x.reshape(-1)
    nonzero_blocks = set()
    for start in range(0, flat.size, 64 * block):
        chunk = flat[start:start + 64 * block]
        if np.count_nonzero(chunk):
            for s in range(0, chunk.size, block):
                if np.count_nonzero(chunk[s:s + block]):
                    nonzero_blocks.add((start + s) // block)
    stray = sorted(nonzero_blocks - {r * BIG_COLS // block for r in touched})
    assert not stray, f"bytes changed outside the touched rows, in MiB blocks {stray[:10]}"
    with capsys.disabled():
        print(f"\n[bigmem] {index_dtype}: int8 x of {x.size} elements ({x.nbytes / 2 ** 30:.2f} GiB), "
              f"{time.time() - t0:.1f} s", flush=True)
    del x
