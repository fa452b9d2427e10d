"""The CPU kernel library, called through its aot entry points (ctypes, no MindSpore graph).

* test_matches_oracle: every entry point (21 ops, token/return or tensor) x 8 value
  dtypes x 2 index dtypes x several shapes and index depths, with and without duplicate
  indices, against the numpy loop oracle, bit for bit; plus the output contracts
  (_return's output == updated x, TensorScatter leaves x alone) and determinism.
* the project's policies, one test each: index order, last Update wins, float16
  accumulation in float32, NaN propagation in Max/Min, integer wrap-around, integer
  division, division by zero, out-of-range indices, empty and 0-d indices.
"""
import ctypes
import math
import threading
import zlib

import numpy as np
import pytest

import ms_scatter
from ms_scatter import infer
from ms_scatter.testing import call_kernel, kernel_library, np_dtype, oracle, random_case, split_op

ALL_OPS = tuple(f + r for f in infer.FAMILIES for r in infer.REDUCTIONS)
INT_DTYPES = tuple(d for d in infer.VALUE_DTYPES if d.startswith(("int", "uint")))
FLOAT_DTYPES = tuple(d for d in infer.VALUE_DTYPES if d.startswith("float"))


def outputs_of(op):
    return ("tensor",) if split_op(op)[0] == "TensorScatter" else ("token", "return")


OP_OUTPUTS = tuple((op, output) for op in ALL_OPS for output in outputs_of(op))


def ops_of(family=None, reduction=None):
    return tuple(f + r for f in infer.FAMILIES for r in infer.REDUCTIONS
                 if family in (None, f) and reduction in (None, r))


def op_outputs(reduction=None, family=None):
    """(op, output) params of every entry point, optionally of one reduction / family."""
    return [pytest.param(op, out, id=f"{op}-{out}") for op, out in OP_OUTPUTS
            if op in ops_of(family, reduction)]


def check_call(op, output, x, indices, updates, bits_equal, what, caller=call_kernel):
    """One successful call: result == oracle bit for bit, the output contract of the
    entry point, inputs untouched, and a second identical call gives identical bits."""
    with np.errstate(over="ignore"):  # float16 Mul may overflow to inf in the oracle's final cast
        expected = oracle(op, x, indices, updates)
    x0, i0, u0 = x.copy(), indices.copy(), updates.copy()
    rc, x_after, out = caller(op, x, indices, updates, output)
    assert rc == 0, f"{what}: code {rc}: {ms_scatter.last_error()[1]}"
    result = out if output == "tensor" else x_after
    bits_equal(result, expected, what)
    if output == "return":
        assert out.tobytes() == x_after.tobytes(), f"{what}: _return output != updated input_x"
    elif output == "token":
        assert out.dtype == np.int32 and out.shape == (1,)
    else:
        assert x_after.tobytes() == x0.tobytes(), f"{what}: TensorScatter modified input_x"
    assert indices.tobytes() == i0.tobytes() and updates.tobytes() == u0.tobytes(), f"{what}: inputs modified"
    assert x.tobytes() == x0.tobytes()
    rc2, x_after2, out2 = caller(op, x, indices, updates, output)
    assert rc2 == 0
    assert x_after2.tobytes() == x_after.tobytes() and out2.tobytes() == out.tobytes(), f"{what}: not deterministic"
    return result


# ------------------------------------------------------------------ against the oracle

SHAPES = {  # (x shape, index depth)
    "Scatter": [((7,), 1), ((5, 3), 1), ((4, 3, 2), 1)],
    "ScatterNd": [((7,), 1), ((5, 3), 1), ((5, 3), 2), ((4, 3, 2), 1), ((4, 3, 2), 2), ((4, 3, 2), 3)],
}
SHAPES["TensorScatter"] = SHAPES["ScatterNd"]


def _oracle_cases():
    for op, output in OP_OUTPUTS:
        for x_shape, depth in SHAPES[split_op(op)[0]]:
            yield pytest.param(op, output, x_shape, depth, id=f"{op}-{output}-x{'x'.join(map(str, x_shape))}-d{depth}")


@pytest.mark.parametrize("index_dtype", infer.INDEX_DTYPES)
@pytest.mark.parametrize("dtype", infer.VALUE_DTYPES)
@pytest.mark.parametrize("op,output,x_shape,depth", list(_oracle_cases()))
def test_matches_oracle(op, output, x_shape, depth, dtype, index_dtype, rng_for, bits_equal, call_raw):
    family = split_op(op)[0]
    destinations = math.prod(x_shape[:depth])
    for duplicates in (True, False):
        # 30 > every shape's number of destinations: duplicates for sure
        counts = (1, 5, 30) if duplicates else sorted({1, min(4, destinations), destinations})
        for n_index in counts:
            case = f"{op}-{output}-{x_shape}-{depth}-{dtype}-{index_dtype}-{duplicates}-{n_index}"
            rng = rng_for(case)
            x, indices, updates = random_case(rng, op, x_shape, n_index, dtype, index_dtype, duplicates, depth)
            assert indices.dtype == np.dtype(index_dtype) and x.dtype == np_dtype(dtype)
            vectors = indices.reshape(-1, depth if family != "Scatter" else 1)
            n_distinct = len({tuple(v) for v in vectors.tolist()})
            if duplicates and n_index == 30:
                assert n_distinct < n_index
            if not duplicates:
                assert n_distinct == n_index
            check_call(op, output, x, indices, updates, bits_equal, case)
    if family == "ScatterNd":
        # indices of rank 1: one index vector, updates of shape x.shape[depth:] (0-d when
        # depth == rank, hence call_raw: call_kernel cannot pass 0-d arrays, see below)
        case = f"{op}-{output}-{x_shape}-{depth}-{dtype}-{index_dtype}-rank1"
        x, indices, updates = random_case(rng_for(case), op, x_shape, 1, dtype, index_dtype, False, depth)
        indices, updates = indices.reshape(depth), updates.reshape(x_shape[depth:])
        check_call(op, output, x, indices, updates, bits_equal, case, caller=call_raw)


@pytest.mark.parametrize("op,output", op_outputs())
def test_larger_random_cases(op, output, rng_for, bits_equal):
    """Larger shapes and many duplicates, every dtype: still bit-exact."""
    family = split_op(op)[0]
    for dtype in infer.VALUE_DTYPES:
        for x_shape, depth in [((33, 17), 1), ((6, 5, 4, 3), 2 if family != "Scatter" else 1)]:
            case = f"{op}-{output}-{dtype}-{x_shape}-large"
            x, indices, updates = random_case(rng_for(case), op, x_shape, 200, dtype, "int64", True, depth)
            check_call(op, output, x, indices, updates, bits_equal, case)


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
@pytest.mark.parametrize("op,output", op_outputs())
def test_big_case_matches_oracle_every_run(op, output, dtype, rng_for, bits_equal):
    """A call big enough for any parallel path a kernel may take (n * slice = 2**19
    elements over a multi-MiB input_x, many duplicates): bit-exact and identical on
    every run."""
    family = split_op(op)[0]
    x_shape, depth = ((16384, 64), 1) if family == "Scatter" else ((128, 128, 64), 2)
    case = f"{op}-{output}-{dtype}-big"
    x, indices, updates = random_case(rng_for(case), op, x_shape, 8192, dtype, "int64", True, depth)
    first = check_call(op, output, x, indices, updates, bits_equal, case)
    for _ in range(2):
        rc, x_after, out = call_kernel(op, x, indices, updates, output)
        assert rc == 0
        assert (out if output == "tensor" else x_after).tobytes() == first.tobytes(), f"{case}: not deterministic"


@pytest.fixture
def thread_counts():
    """The worker counts to try: 1, 2, 3 and 8 where the library lets its callers set
    them (ms_scatter_set_num_threads), else only its own setting. Restores it after."""
    lib = kernel_library()
    setter = getattr(lib, "ms_scatter_set_num_threads", None)
    if setter is None:
        yield [None], lambda n: None
        return
    getter = lib.ms_scatter_num_threads
    getter.restype = ctypes.c_int
    before = getter()
    yield [1, 2, 3, 8], setter
    setter(before)


@pytest.mark.parametrize("op,output", [("ScatterAdd", "token"), ("ScatterNdSub", "return"),
                                       ("TensorScatterMul", "tensor"), ("ScatterNdUpdate", "token"),
                                       ("TensorScatterMax", "tensor"), ("ScatterDiv", "return")])
@pytest.mark.parametrize("dtype", ["float16", "float32", "int8"])
def test_same_bits_at_any_thread_count(op, output, dtype, thread_counts, rng_for, bits_equal):
    family = split_op(op)[0]
    x_shape, depth = ((16384, 64), 1) if family == "Scatter" else ((128, 128, 64), 2)
    x, indices, updates = random_case(rng_for(f"threads-{op}-{dtype}"), op, x_shape, 8192, dtype, "int32", True,
                                      depth)
    with np.errstate(over="ignore"):
        expected = oracle(op, x, indices, updates)
    counts, set_threads = thread_counts
    for n in counts:
        set_threads(n)
        rc, x_after, out = call_kernel(op, x, indices, updates, output)
        assert rc == 0
        bits_equal(out if output == "tensor" else x_after, expected, f"{op} {dtype} threads={n}")


def test_concurrent_calls(prepare_call, rng_for):
    """Python threads (ctypes releases the GIL) launching kernels at once: in-place calls
    on one input_x lose no update, and out-of-place calls on separate arrays are exact."""
    rng = rng_for("concurrent")
    shared = np.zeros((4096, 64), np.int64)
    jobs, expected_shared = [], shared.copy()
    for t in range(4):
        idx = rng.integers(0, shared.shape[0], size=4096).astype(np.int64)
        upd = rng.integers(-9, 10, size=(4096, 64)).astype(np.int64)
        expected_shared = oracle("ScatterAdd", expected_shared, idx, upd)  # integer Add: order-free
        jobs.append(prepare_call("ScatterAdd", shared, idx, upd, "token")[0])
    separate = []
    for t in range(4):
        x, idx, upd = random_case(rng, "TensorScatterAdd", (128, 128, 64), 4096, "float32", "int64", True, 2)
        run, out = prepare_call("TensorScatterAdd", x, idx, upd, "tensor")
        jobs.append(run)
        separate.append((out, oracle("TensorScatterAdd", x, idx, upd)))
    codes = []
    threads = [threading.Thread(target=lambda job=job: codes.append(job())) for job in jobs]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads), "a kernel call did not return"
    assert codes == [0] * len(jobs)
    assert np.array_equal(shared, expected_shared)
    for out, expected in separate:
        assert out.tobytes() == expected.tobytes()


# ------------------------------------------------------------------ index order / Update

@pytest.mark.parametrize("op,output", op_outputs("Add"))
def test_duplicates_applied_in_index_order(op, output, family_indices, run_ok):
    """float32 addition is not associative: the result shows the order the updates were
    applied in. In index order, ((0 + 1e8) + 1) - 1e8 == 0, whereas 1e8 - 1e8 + 1 == 1."""
    x = np.zeros((3, 2), np.float32)
    first = np.array([[1e8, 1e8], [1, 1], [-1e8, -1e8]], np.float32)
    second = first[[0, 2, 1]]
    idx = family_indices(op, [1, 1, 1])
    got_first = run_ok(op, x, idx, first, output)[0]
    got_second = run_ok(op, x, idx, second, output)[0]
    assert np.array_equal(got_first, oracle(op, x, idx, first))
    assert np.array_equal(got_second, oracle(op, x, idx, second))
    assert got_first[1, 0] == 0.0 and got_second[1, 0] == 1.0
    assert not got_first[[0, 2]].any() and not got_second[[0, 2]].any()


@pytest.mark.parametrize("dtype", infer.VALUE_DTYPES + infer.COPY_DTYPES)
@pytest.mark.parametrize("op,output", op_outputs("Update"))
def test_update_last_occurrence_wins(op, output, dtype, family_indices, run_ok, rng_for, bits_equal):
    rng = rng_for(f"last-wins-{op}-{output}-{dtype}")
    x = np.zeros((4, 3), dtype)
    rows = [2, 0, 2, 3, 0, 2, 2]
    updates = (np.arange(len(rows) * 3).reshape(len(rows), 3) + 1).astype(dtype)
    updates = updates[rng.permutation(len(rows))]
    idx = family_indices(op, rows)
    for _ in range(3):  # and the same every run
        result = run_ok(op, x, idx, updates, output)[0]
        bits_equal(result[2], updates[6])
        bits_equal(result[0], updates[4])
        bits_equal(result[3], updates[3])
        assert not result[1].any()
        bits_equal(result, oracle(op, x, idx, updates))


# ------------------------------------------------------------------ float16 accumulation

def naive_float16(op, x, indices, updates):
    """The same scatter rounding to float16 after every single update (what the policy
    rules out)."""
    _, reduction = split_op(op)
    work = x.copy()
    rows = np.asarray(indices).reshape(-1)
    for k, row in enumerate(rows):
        if reduction == "Add":
            work[row] = work[row] + updates[k]
        else:
            work[row] = work[row] - updates[k]
    return work


@pytest.mark.parametrize("op,output", op_outputs("Add") + op_outputs("Sub"))
def test_float16_accumulates_in_float32(op, output, family_indices, run_ok, rng_for, bits_equal):
    """Many small float16 updates to one row: rounded once (float32 accumulation) they
    add up; rounded at each step every one of them is lost under 1.0's half ulp."""
    rng = rng_for(f"f16-{op}-{output}")
    n = 300
    # Away from zero: |x| grows, so the half ulp stays that of 1.0 for Add (x = 1) and Sub (x = -1).
    x = np.full((3, 4), 1 if op.endswith("Add") else -1, np.float16)
    # Interleave two destinations so that grouping by destination has to keep index order.
    rows = np.where(np.arange(n) % 3 == 0, 2, 0)
    updates = rng.uniform(1e-4, 4.5e-4, size=(n, 4)).astype(np.float16)  # each < half ulp of 1.0 (2**-11)
    idx = family_indices(op, rows.tolist())
    got = run_ok(op, x, idx, updates, output)[0]
    expected = oracle(op, x, idx, updates)
    naive = naive_float16(op, x, idx, updates)
    bits_equal(got, expected)
    assert not np.array_equal(got[0], naive[0]) and not np.array_equal(got[2], naive[2])
    assert np.array_equal(naive, x)  # every per-step rounding lost the update
    bits_equal(got[1], x[1])


@pytest.mark.parametrize("op,output", op_outputs("Add"))
def test_float16_rounded_once_per_slice(op, output, family_indices, run_ok, bits_equal):
    """2048 + 1 + 1 in float16: per-step rounding gives 2048 (ties to even twice), one
    rounding of the float32 sum gives 2050."""
    x = np.full((2, 3), 2048, np.float16)
    updates = np.ones((2, 3), np.float16)
    idx = family_indices(op, [0, 0])
    got = run_ok(op, x, idx, updates, output)[0]
    bits_equal(got, oracle(op, x, idx, updates))
    assert got[0].tolist() == [2050.0] * 3
    assert naive_float16(op, x, idx, updates)[0].tolist() == [2048.0] * 3


def test_float16_elementwise_nd(run_ok, rng_for, bits_equal):
    """Depth == rank (element-wise ScatterNd/TensorScatter) also accumulates in float32."""
    rng = rng_for("f16-elementwise")
    x = np.ones((2, 3), np.float16)
    n = 200
    indices = np.tile(np.array([[1, 2]], np.int64), (n, 1))
    updates = rng.uniform(1e-4, 4.5e-4, size=(n,)).astype(np.float16)
    for op, output in [("ScatterNdAdd", "token"), ("ScatterNdAdd", "return"), ("TensorScatterAdd", "tensor")]:
        got = run_ok(op, x, indices, updates, output)[0]
        bits_equal(got, oracle(op, x, indices, updates))
        assert got[1, 2] > 1.0
        mask = np.ones_like(x, bool)
        mask[1, 2] = False
        assert np.array_equal(got[mask], x[mask])


# ------------------------------------------------------------------ NaN in Max/Min

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op,output", op_outputs("Max") + op_outputs("Min"))
def test_max_min_propagate_nan(op, output, dtype, family_indices, run_ok, bits_equal):
    nan = np.nan
    x = np.array([nan, 1, 2, 3, 4, nan], dtype)
    rows = [0, 0, 1, 2, 2, 3, 3, 3, 4, 4]
    updates = np.array([5, -5, nan, nan, 7, 7, nan, -7, 9, -9], dtype)
    idx = family_indices(op, rows)
    got = run_ok(op, x, idx, updates, output)[0]
    assert np.isnan(got[[0, 1, 2, 3, 5]]).all(), got           # NaN from x (0, 5) or from updates (1, 2, 3)
    assert got[4] == (9 if op.endswith("Max") else -9)
    bits_equal(got, oracle(op, x, idx, updates))
    # a NaN update as the last one, after a normal one
    x2 = np.array([1, 2], dtype)
    idx2 = family_indices(op, [1, 1])
    got2 = run_ok(op, x2, idx2, np.array([0, nan], dtype), output)[0]
    assert np.isnan(got2[1]) and got2[0] == 1


# ------------------------------------------------------------------ integer wrap-around

I8, U8, I16, I32, I64 = (np.iinfo(t) for t in (np.int8, np.uint8, np.int16, np.int32, np.int64))
WRAP_CASES = [  # (dtype, reduction, x value, update values (one destination), result)
    ("int8", "Add", 127, [1], -128),
    ("int8", "Add", 100, [100, 100], 44),
    ("int8", "Sub", -128, [1], 127),
    ("int8", "Mul", 64, [2], -128),
    ("int8", "Mul", -128, [-1], -128),
    ("uint8", "Add", 255, [1], 0),
    ("uint8", "Sub", 0, [1], 255),
    ("uint8", "Mul", 16, [16], 0),
    ("int16", "Add", I16.max, [1], I16.min),
    ("int16", "Sub", I16.min, [1], I16.max),
    ("int16", "Mul", I16.max, [2], -2),
    ("int16", "Mul", -1, [-1], 1),
    ("int16", "Mul", I16.min, [-1], I16.min),
    ("int32", "Add", I32.max, [1], I32.min),
    ("int32", "Sub", I32.min, [1], I32.max),
    ("int32", "Mul", I32.max, [2], -2),
    ("int32", "Mul", I32.min, [-1], I32.min),
    ("int64", "Add", I64.max, [1], I64.min),
    ("int64", "Sub", I64.min, [1], I64.max),
    ("int64", "Mul", I64.max, [2], -2),
    ("int64", "Mul", I64.min, [-1], I64.min),
]


@pytest.mark.parametrize("family", infer.FAMILIES)
@pytest.mark.parametrize("dtype,reduction,x_value,update_values,result", WRAP_CASES,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}-{c[3]}" for c in WRAP_CASES])
def test_integer_wraps(family, dtype, reduction, x_value, update_values, result, family_indices, run_ok,
                       bits_equal):
    op = family + reduction
    x = np.array([x_value, 3], dtype)
    updates = np.array(update_values, dtype)
    idx = family_indices(op, [0] * len(update_values))
    for output in outputs_of(op):
        got = run_ok(op, x, idx, updates, output)[0]
        assert got.tolist() == [result, 3]
        bits_equal(got, oracle(op, x, idx, updates))


# ------------------------------------------------------------------ integer division

DIV_CASES = [  # (x value, update values, result): truncation toward zero
    (-7, [2], -3), (7, [-2], -3), (-7, [-2], 3), (7, [2], 3), (-7, [2, 2], -1), (1, [-3], 0), (-1, [3], 0),
    (6, [-1], -6), (-6, [-1], 6),
]


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("family", infer.FAMILIES)
def test_integer_division(family, dtype, family_indices, run_ok, bits_equal):
    op = family + "Div"
    info = np.iinfo(dtype)
    top = min(int(info.max), 255)  # 255 / 254 == 1 for uint8, 127 / 126 == 1 for the signed ones
    cases = [c for c in DIV_CASES if info.min < 0] + [(7, [2], 3), (top, [top - 1], 1)]
    if info.min < 0:
        cases += [(int(info.min), [-1], int(info.min)), (int(info.min), [1], int(info.min)),
                  (int(info.max), [-1], -int(info.max)), (int(info.min), [2], int(info.min) // 2)]
    for output in outputs_of(op):
        for x_value, update_values, result in cases:
            x = np.array([5, x_value], dtype)
            idx = family_indices(op, [1] * len(update_values))
            updates = np.array(update_values, dtype)
            got = run_ok(op, x, idx, updates, output)[0]
            assert got.tolist() == [5, result], (x_value, update_values)
            bits_equal(got, oracle(op, x, idx, updates))


@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op,output", op_outputs("Div"))
def test_integer_division_by_zero(op, output, dtype, where, family_indices, rng_for):
    rng = rng_for(f"div0-{op}-{output}-{dtype}-{where}")
    x = rng.integers(1, 100, size=(4, 3)).astype(dtype)
    updates = rng.integers(1, 5, size=(3, 3)).astype(dtype)
    row = {"first": 0, "middle": 1, "last": 2}[where]
    col = {"first": 0, "middle": 1, "last": 2}[where]
    updates[row, col] = 0
    idx = family_indices(op, [2, 0, 2])
    with pytest.raises(ZeroDivisionError):
        oracle(op, x, idx, updates)
    before = ms_scatter.last_error()[2]
    rc, x_after, out = call_kernel(op, x, idx, updates, output)
    assert rc == 3
    assert x_after.tobytes() == x.tobytes()  # nothing written, also not the updates before the zero
    code, message, count = ms_scatter.last_error()
    assert code == 3 and count == before + 1
    assert f"For '{op}'" in message and "division by zero" in message
    assert f"at position {(row, col)} of 'updates' (shape (3, 3))" in message


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op,output", op_outputs("Div"))
def test_float_division_by_zero_is_ieee(op, output, dtype, family_indices, run_ok, bits_equal):
    x = np.array([1, -1, 0, np.nan, np.inf, 3], dtype)
    rows = [0, 1, 2, 3, 4, 5]
    updates = np.array([0, 0, 0, 0, -0.0, 2], dtype)
    idx = family_indices(op, rows)
    got = run_ok(op, x, idx, updates, output)[0]
    expected = oracle(op, x, idx, updates)
    assert np.array_equal(got, expected, equal_nan=True)
    bits_equal(got, expected)
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2]) and np.isnan(got[3])
    assert got[4] == -np.inf and got[5] == 1.5


# ------------------------------------------------------------------ out-of-range indices

X_OOB_SHAPE = (5, 4, 3)


def _oob_case(op, where, kind, index_dtype):
    """(indices, updates, bad value, its position, dimension size) with one bad index."""
    family = split_op(op)[0]
    info = np.iinfo(index_dtype)
    if family == "Scatter":
        indices = np.array([1, 3, 2], index_dtype)
        pos = {"first": (0,), "middle": (1,), "last": (2,)}[where]
        dim = 0
        updates_shape = (3,) + X_OOB_SHAPE[1:]
    else:
        indices = np.array([[1, 2], [4, 3], [0, 1]], index_dtype)
        pos = {"first": (0, 0), "middle": (1, 1), "last": (2, 1)}[where]
        dim = pos[1]
        updates_shape = (3,) + X_OOB_SHAPE[2:]
    size = X_OOB_SHAPE[dim]
    bad = {"size": size, "size+1": size + 1, "minus1": -1, "max": int(info.max), "min": int(info.min),
           "2**40": 2 ** 40}[kind]
    indices[pos] = bad
    return indices, updates_shape, bad, pos, size


@pytest.mark.parametrize("kind", ["size", "size+1", "minus1", "max", "min"])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
@pytest.mark.parametrize("op,output", op_outputs())
def test_index_out_of_range(op, output, where, kind, rng_for):
    rng = rng_for(f"oob-{op}-{output}-{where}-{kind}")
    for index_dtype, dtype in [("int32", "float32"), ("int64", "int16")]:
        indices, updates_shape, bad, pos, size = _oob_case(op, where, kind, index_dtype)
        x = random_case(rng, op, X_OOB_SHAPE, 1, dtype, index_dtype)[0]
        updates = random_case(rng, op, updates_shape, 1, dtype, index_dtype)[0]  # (its random x is our updates)
        with pytest.raises(IndexError):
            oracle(op, x, indices, updates)
        before = ms_scatter.last_error()[2]
        rc, x_after, out = call_kernel(op, x, indices, updates, output)
        assert rc == 2, (index_dtype, ms_scatter.last_error())
        assert x_after.tobytes() == x.tobytes(), "input_x changed by a call with a bad index"
        code, message, count = ms_scatter.last_error()
        assert code == 2 and count == before + 1
        assert f"For '{op}'" in message, message
        assert f"[0, {size})" in message, message
        assert f"but got {bad} at position {pos} of 'indices'" in message, message


@pytest.mark.parametrize("op,output", op_outputs("Add"))
def test_index_out_of_range_int64_beyond_int32(op, output):
    """A 64-bit index is not truncated to 32 bits: 2**32 + 1 is reported as itself."""
    indices, updates_shape, bad, pos, size = _oob_case(op, "middle", "2**40", "int64")
    indices[pos] = 2 ** 32 + 1
    x = np.zeros(X_OOB_SHAPE, np.float32)
    rc, x_after, _ = call_kernel(op, x, indices, np.ones(updates_shape, np.float32), output)
    assert rc == 2 and not x_after.any()
    assert f"but got {2 ** 32 + 1} at position {pos}" in ms_scatter.last_error()[1]


@pytest.mark.parametrize("output", ["token", "return"])
@pytest.mark.parametrize("op", ops_of("Scatter"))
def test_index_out_of_range_multi_d_indices(op, output):
    """Scatter* with 2-d indices: the position is reported in indices' own shape."""
    x = np.zeros((5, 2), np.float64)
    indices = np.array([[0, 1, 2], [3, 7, 4]], np.int64)
    rc, x_after, _ = call_kernel(op, x, indices, np.ones((2, 3, 2)), output)
    assert rc == 2 and x_after.tobytes() == x.tobytes()
    message = ms_scatter.last_error()[1]
    assert f"For '{op}'" in message and "[0, 5)" in message
    assert "but got 7 at position (1, 1) of 'indices' (shape (2, 3))" in message


# ------------------------------------------------------------------ empty and 0-d indices

@pytest.mark.parametrize("dtype", infer.VALUE_DTYPES)
@pytest.mark.parametrize("op,output", op_outputs())
def test_empty_indices(op, output, dtype, rng_for, bits_equal):
    family = split_op(op)[0]
    rng = rng_for(f"empty-{op}-{output}-{dtype}")
    x = random_case(rng, op, (4, 3), 1, dtype, "int32")[0]
    if family == "Scatter":
        cases = [(np.zeros((0,), np.int32), np.zeros((0, 3), dtype)),
                 (np.zeros((2, 0), np.int64), np.zeros((2, 0, 3), dtype))]
    else:
        cases = [(np.zeros((0, 1), np.int32), np.zeros((0, 3), dtype)),
                 (np.zeros((0, 2), np.int64), np.zeros((0,), dtype)),
                 (np.zeros((3, 0, 2), np.int64), np.zeros((3, 0), dtype))]
    for indices, updates in cases:
        rc, x_after, out = call_kernel(op, x, indices, updates, output)
        assert rc == 0, ms_scatter.last_error()
        bits_equal(x_after, x)
        if output != "token":
            bits_equal(out, x)  # _return: the (unchanged) x; TensorScatter: a copy of x
        bits_equal(oracle(op, x, indices, updates), x)


@pytest.mark.parametrize("index_dtype", infer.INDEX_DTYPES)
@pytest.mark.parametrize("dtype", infer.VALUE_DTYPES)
@pytest.mark.parametrize("op,output", op_outputs(family="Scatter"))
def test_scatter_0d_indices(op, output, dtype, index_dtype, call_raw, rng_for, bits_equal):
    """Scatter* with indices of shape (): one row, updates of shape x.shape[1:]."""
    rng = rng_for(f"0d-{op}-{output}-{dtype}-{index_dtype}")
    for x_shape in [(5, 3), (5,), (4, 2, 3)]:
        x, _, updates = random_case(rng, op, x_shape, 1, dtype, index_dtype)
        indices = np.array(rng.integers(0, x_shape[0]), index_dtype)
        updates = updates.reshape(x_shape[1:])
        assert indices.ndim == 0
        expected = oracle(op, x, indices, updates)
        rc, x_after, out = call_raw(op, x, indices, updates, output)
        assert rc == 0, ms_scatter.last_error()
        bits_equal(x_after, expected)
        if output == "return":
            bits_equal(out, expected)
    # and a bad 0-d index: position ()
    rc, x_after, _ = call_raw(op, np.zeros((5, 3), dtype), np.array(5, index_dtype), np.ones((3,), dtype), output)
    assert rc == 2 and not x_after.any()
    assert "but got 5 at position () of 'indices' (shape ())" in ms_scatter.last_error()[1]


def test_call_kernel_keeps_0d_indices():
    x = np.zeros((5, 3), np.float32)
    rc, x_after, _ = call_kernel("ScatterAdd", x, np.array(2, np.int32), np.ones((3,), np.float32))
    assert rc == 0
    assert x_after[2].tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("op", ["ScatterNdAdd", "TensorScatterAdd"])
def test_oracle_depth_0(op, run_ok):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    indices, updates = np.zeros((4, 0), np.int32), np.ones((4, 2, 3), np.float32)
    assert infer.scatter_nd_shape(op, x.shape, indices.shape, updates.shape) == x.shape
    got = run_ok(op, x, indices, updates, outputs_of(op)[0])[0]
    assert np.array_equal(got, oracle(op, x, indices, updates))


# ------------------------------------------------------------------ the kernel's own argument checks

@pytest.mark.parametrize("op,output", op_outputs())
def test_kernel_rejects_bad_arguments(op, output, call_raw):
    """Arguments our inference never produces: code 1, input_x untouched, op named."""
    family = split_op(op)[0]
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    if family == "Scatter":
        good_idx, bad_updates = np.array([1, 2], np.int32), np.ones((2, 2), np.float32)
    else:
        good_idx, bad_updates = np.array([[1, 2], [0, 0]], np.int32), np.ones((2, 3), np.float32)
    bad_calls = [
        (x, good_idx, bad_updates),                                   # wrong updates shape
        (x, good_idx, np.ones(bad_updates.shape[:1] + x.shape[2 if family != "Scatter" else 1:], np.float64)),
        (x, good_idx.astype(np.int16), np.ones((2,) + x.shape[1 if family == "Scatter" else 2:], np.float32)),
    ]
    if not op.endswith("Update"):  # Update copies bool (test_update_copies_bool_and_complex)
        bad_calls.append((x.astype(np.bool_), good_idx, np.ones((2,) + x.shape[1 if family == "Scatter" else 2:],
                                                                np.bool_)))
    if family == "Scatter":
        # a 0-d input_x is one element along its first axis: updates must have indices' shape
        bad_calls.append((np.array(1.0, np.float32), np.array([0], np.int32), np.ones((2,), np.float32)))
    else:
        bad_calls.append((x, np.array([[0, 1, 2]], np.int32), np.ones((1,), np.float32)))  # depth > rank
    for x_in, idx, upd in bad_calls:
        before = ms_scatter.last_error()[2]
        rc, x_after, _ = call_raw(op, x_in, idx, upd, output)
        assert rc == 1, (x_in.shape, x_in.dtype, idx.shape, idx.dtype, upd.shape, upd.dtype)
        assert x_after.tobytes() == np.asarray(x_in).tobytes()
        code, message, count = ms_scatter.last_error()
        assert code == 1 and count == before + 1 and message.startswith(f"For '{op}', ")


# ------------------------------------------------------------------ Update's bit-copy dtypes

@pytest.mark.parametrize("dtype", infer.COPY_DTYPES)
@pytest.mark.parametrize("op,output,x_shape,depth", [c for c in _oracle_cases() if c.values[0].endswith("Update")])
def test_update_copies_bool_and_complex(op, output, x_shape, depth, dtype, rng_for, bits_equal):
    """bool, complex64 and complex128 (Update only, MS_SCATTER_COPY_DTYPES): every element's
    bits as the oracle's, duplicates included, both index dtypes."""
    for index_dtype in infer.INDEX_DTYPES:
        for n_index in (1, 5, 30):
            case = f"{op}-{output}-{x_shape}-{depth}-{dtype}-{index_dtype}-{n_index}"
            x, indices, updates = random_case(rng_for(case), op, x_shape, n_index, dtype, index_dtype, True, depth)
            check_call(op, output, x, indices, updates, bits_equal, case)


@pytest.mark.parametrize("dtype", infer.COPY_DTYPES)
@pytest.mark.parametrize("op,output", [(op, out) for op, out in OP_OUTPUTS if not op.endswith("Update")])
def test_arithmetic_refuses_copy_dtypes(op, output, dtype, rng_for):
    """The reductions that compute refuse them at the kernel too (an error, nothing written)."""
    x, indices, updates = random_case(rng_for(f"refuse-{op}-{dtype}"), "ScatterNdUpdate" if op.startswith(
        ("ScatterNd", "TensorScatter")) else "ScatterUpdate", (4, 3), 3, dtype, "int32", True, 1)
    x0 = x.copy()
    rc, x_after, _ = call_kernel(op, x, indices, updates, output)
    assert rc != 0, f"{op} {dtype}: accepted"
    assert x_after.tobytes() == x0.tobytes()


# ------------------------------------------------------------------ the segment entries

@pytest.mark.parametrize("index_dtype", infer.INDEX_DTYPES)
@pytest.mark.parametrize("dtype", infer.VALUE_DTYPES)
@pytest.mark.parametrize("record", tuple(infer.SEGMENT_OPERATORS.values()), ids=lambda r: r.name)
def test_segment_entry_matches_oracle(record, dtype, index_dtype, bits_equal):
    """UnsortedSegment<S> (IndexMode::kSegment): the rows of x into a filled output, negative
    ids dropped, in index order; small and large (threaded) calls; ids of rank 1 and 2."""
    from ms_scatter.reference import segment_fill, segment_oracle  # pylint: disable=import-outside-toplevel
    npdt = np_dtype(dtype)
    rng = np.random.default_rng(zlib.crc32(f"{record.name}/{dtype}/{index_dtype}".encode()))
    for ids_shape, rest, segments in (((9,), (3,), 4), ((4, 3), (2,), 5), ((6000,), (16,), 37), ((5,), (), 3)):
        ids = rng.integers(-2, segments, size=ids_shape).astype(index_dtype)
        if np.issubdtype(npdt, np.integer):
            x = rng.integers(1, 3 if record.reduction == "Mul" else 50, size=ids_shape + rest).astype(npdt)
        else:
            x = (rng.standard_normal(ids_shape + rest) * (0.01 if record.reduction == "Mul" else 3)).astype(
                np.float32).astype(npdt)
        fill = segment_fill(record.fill, npdt)
        init = np.full((segments,) + rest, fill, np.float32 if npdt == np_dtype("bfloat16") else npdt).astype(npdt)
        rc, init_after, out = call_kernel(record.name, init, ids, x, "tensor")
        assert rc == 0, ms_scatter.last_error()[1]
        with np.errstate(over="ignore", under="ignore"):
            expected = segment_oracle(record.reduction, x, ids, segments, fill)
        bits_equal(out, expected, f"{record.name} {dtype} ids {ids_shape}")
        assert init_after.tobytes() == init.tobytes(), "the entry wrote its input"


@pytest.mark.parametrize("record", tuple(infer.SEGMENT_OPERATORS.values()), ids=lambda r: r.name)
def test_segment_entry_refuses_an_id_past_the_segments(record):
    init = np.zeros((3, 2), np.float32)
    ids = np.array([0, -1, 3, 1], np.int32)
    rc, _, out = call_kernel(record.name, init, ids, np.ones((4, 2), np.float32), "tensor")
    assert rc == 2 and not out.any(), "an error before anything is written"
    assert (f"For '{record.name}', each value of 'segment_ids' must be < num_segments (3) (a negative id drops "
            f"its row), but got 3 at position (2,) of 'segment_ids' (shape (4,)).") == ms_scatter.last_error()[1]


@pytest.mark.parametrize("dtype", infer.VALUE_DTYPES)
def test_scatter_nd_entry_matches_oracle(dtype, bits_equal):
    """ScatterNd: TensorScatterAdd under scatter_nd's name (input_x: the zeros of `shape`)."""
    from ms_scatter.reference import oracle  # pylint: disable=import-outside-toplevel
    npdt = np_dtype(dtype)
    rng = np.random.default_rng(zlib.crc32(f"ScatterNd/{dtype}".encode()))
    for shape, depth, rows in (((5, 3), 2, 9), ((6000, 16), 1, 6000)):
        indices = np.stack([rng.integers(0, shape[d], rows) for d in range(depth)], axis=-1).astype(np.int64)
        updates = rng.integers(0, 9, (rows,) + shape[depth:]).astype(npdt)
        zeros = np.zeros(shape, npdt)
        rc, _, out = call_kernel("ScatterNd", zeros, indices, updates, "tensor")
        assert rc == 0, ms_scatter.last_error()[1]
        with np.errstate(over="ignore"):
            bits_equal(out, oracle("TensorScatterAdd", zeros, indices, updates), f"ScatterNd {dtype} {shape}")
    rc, _, out = call_kernel("ScatterNd", np.zeros((3, 2), npdt), np.array([[0], [3]], np.int32),
                             np.ones((2, 2), npdt), "tensor")
    assert rc == 2 and not out.any(), "an error before anything is written"
    assert ms_scatter.last_error()[1].startswith("For 'ScatterNd', each value of 'indices' must be in [0, 3)")
