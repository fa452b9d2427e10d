"""The row-shard entry points of the CPU kernel library (Scatter<R>_shard_token,
ScatterNd<R>_shard_token, TensorScatter<R>_shard), called directly (ctypes, no MindSpore):
input_x is a block of rows of a larger table, the 4th input the int64 (row_begin,
global_rows), indices name global rows.

* every reduction x family x dtype: the blocks of a table, each updated by the whole batch
  through its own shard entry, put together equal the oracle on the whole table, bit for
  bit (the vectors outside a block are skipped, never applied, so Update/Max/Min too);
* every index is checked against the global row count (and the other dimensions) by every
  shard, before anything is written, also one no shard would apply; an integer zero
  divisor anywhere fails every shard; the message names the global shape and the block;
* a 'shard' input that does not place the block inside the table, of the wrong dtype or
  shape, and index vectors of depth 0 are refused (code 1) without writing;
* the multi-thread paths (sorted indices, float16 blocks) on the kept positions equal the
  whole-table kernel.
"""
import numpy as np
import pytest

import ms_scatter
from ms_scatter import infer
from ms_scatter.distributed import split_rows
from ms_scatter.testing import call_kernel, oracle, random_case, split_op

ROWS = 10
BLOCKS = split_rows(ROWS, 3)  # [(0, 4), (4, 3), (7, 3)]
ALL_OPS = tuple(f + r for f in infer.FAMILIES for r in infer.REDUCTIONS)


def _output(op):
    return "tensor" if split_op(op)[0] == "TensorScatter" else "token"


def run_shards(op, x, indices, updates, blocks=BLOCKS, rows=None):
    """[(code, block after the call or the output)] of each block's shard entry."""
    rows = x.shape[0] if rows is None else rows
    out = []
    for begin, count in blocks:
        block = np.ascontiguousarray(x[begin:begin + count])
        rc, after, result = call_kernel(op, block, indices, updates, _output(op), shard=(begin, rows))
        if _output(op) == "tensor":
            assert after.tobytes() == block.tobytes(), f"{op}: the shard entry modified input_x"
        out.append((rc, result if _output(op) == "tensor" else after, block))
    return out


def _cases():
    for op in ALL_OPS:
        family, reduction = split_op(op)
        dtypes = infer.VALUE_DTYPES if family == "Scatter" else ("float32", "float16", "int32")
        depths = (1,) if family == "Scatter" else (1, 2)
        for dtype in dtypes:
            for depth in depths:
                for index_dtype in ("int32", "int64"):
                    yield pytest.param(op, dtype, depth, index_dtype, id=f"{op}-{dtype}-d{depth}-{index_dtype}")


@pytest.mark.parametrize("op, dtype, depth, index_dtype", list(_cases()))
def test_blocks_equal_the_whole_table(op, dtype, depth, index_dtype, rng_for, bits_equal):
    rng = rng_for((op, dtype, depth, index_dtype))
    x, indices, updates = random_case(rng, op, (ROWS, 3), 12, dtype, index_dtype, depth=depth)
    with np.errstate(over="ignore"):
        expected = oracle(op, x, indices, updates)
    results = run_shards(op, x, indices, updates)
    for (rc, _, _), (begin, _) in zip(results, BLOCKS):
        assert rc == 0, f"block at {begin}: code {rc}: {ms_scatter.last_error()[1]}"
    bits_equal(np.concatenate([r for _, r, _ in results]), expected, op)


@pytest.mark.parametrize("reduction", infer.REDUCTIONS)
def test_vectors_outside_the_block_are_never_applied(reduction, bits_equal):
    """A block none of whose rows is indexed is left exactly as it was (Update, Max and Min
    included: nothing is written there, not even the same value)."""
    op = "Scatter" + reduction
    x = np.arange(ROWS * 2, dtype=np.float32).reshape(ROWS, 2)
    x[8, 0] = np.float32(-0.0)
    indices = np.array([0, 1, 5, 1], np.int64)
    updates = np.full((4, 2), 2.0, np.float32)
    rc, after, _ = run_shards(op, x, indices, updates, blocks=[(7, 3)])[0]
    assert rc == 0
    bits_equal(after, x[7:], op)


@pytest.mark.parametrize("bad, at", [(ROWS, 2), (-1, 0), (ROWS + 1000, 3)])
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdUpdate", "TensorScatterMax"])
def test_every_block_checks_the_global_rows(op, bad, at):
    family, _ = split_op(op)
    x = np.ones((ROWS, 3), np.float32)
    if family == "Scatter":
        indices = np.array([1, 5, 8, 2], np.int64)
        indices[at] = bad
        updates = np.ones((4, 3), np.float32)
        position = f"({at},)"
    else:
        indices = np.array([[1, 0], [5, 1], [8, 2], [2, 2]], np.int64)
        indices[at, 0] = bad
        updates = np.ones((4,), np.float32)
        position = f"({at}, 0)"
    for rc, after, block in run_shards(op, x, indices, updates):
        assert rc == 2
        if _output(op) == "token":
            assert after.tobytes() == block.tobytes(), "written before the error"
        message = ms_scatter.last_error()[1]
        assert message.startswith(f"For '{op}', each value of 'indices' must be in [0, {ROWS}) (dimension 0 of "
                                  f"'input_x', rows [7, 10) of a table sharded by rows with global shape "
                                  f"({ROWS}, 3)), but got {bad} at position {position} of 'indices'"), message


def test_a_bad_component_of_a_row_outside_the_block_fails_every_block():
    indices = np.array([[1, 0], [8, 3]], np.int32)  # column 3 of a 3-column table, row 8 (last block)
    x = np.zeros((ROWS, 3), np.float32)
    for rc, after, block in run_shards("ScatterNdAdd", x, indices, np.ones(2, np.float32)):
        assert rc == 2 and after.tobytes() == block.tobytes()
        assert "must be in [0, 3) (dimension 1 of 'input_x' with shape" in ms_scatter.last_error()[1]


def test_an_integer_zero_divisor_anywhere_fails_every_block():
    x = np.full((ROWS, 2), 12, np.int32)
    indices = np.array([1, 8], np.int64)
    updates = np.array([[2, 0], [3, 3]], np.int32)  # the zero divides row 1 (first block)
    for rc, after, block in run_shards("ScatterDiv", x, indices, updates):
        assert rc == 3 and after.tobytes() == block.tobytes()


@pytest.mark.parametrize("info, message", [
    ((-1, ROWS), "must place the 3 rows of 'input_x' inside the table, but got (-1, 10)"),
    ((8, ROWS), "must place the 3 rows of 'input_x' inside the table, but got (8, 10)"),
    ((0, 2), "must place the 3 rows of 'input_x' inside the table, but got (0, 2)"),
])
def test_a_shard_outside_the_table_is_refused(info, message):
    block = np.ones((3, 2), np.float32)
    rc, after, _ = call_kernel("ScatterMax", block, np.array([0], np.int64), np.zeros((1, 2), np.float32),
                               shard=info)
    assert rc == 1 and after.tobytes() == block.tobytes()
    assert message in ms_scatter.last_error()[1]


def test_shard_input_of_the_wrong_dtype_shape_or_depth_is_refused():
    from ms_scatter.testing import KernelCall
    block = np.ones((3, 2), np.float32)
    idx, upd = np.array([0], np.int64), np.zeros((1, 2), np.float32)
    call = KernelCall("ScatterAdd", block, idx, upd, shard=np.array([0, 3], np.int32))
    assert call.run() == 1 and "'shard' must be int64, but got int32" in ms_scatter.last_error()[1]
    call = KernelCall("ScatterAdd", block, idx, upd, shard=np.array([0, 3, 3], np.int64))
    assert call.run() == 1 and "'shard' must have shape (2,)" in ms_scatter.last_error()[1]
    call = KernelCall("ScatterNdAdd", block, np.zeros((1, 0), np.int64), np.zeros((1, 3, 2), np.float32),
                      shard=np.array([0, 3], np.int64))
    rc = call.run()
    assert rc == 1 and "needs index vectors of depth >= 1" in ms_scatter.last_error()[1]
    call = KernelCall("ScatterAdd", block, idx, upd, shard=np.array([0, 3], np.int64))
    assert call.fn(4, call.params, call.ndims, call.shapes, call.dtypes, None, None) == 1  # 4 arguments
    assert "expects 4 inputs and 1 output, but got 4 arguments" in ms_scatter.last_error()[1]
    assert block.tobytes() == np.ones((3, 2), np.float32).tobytes()


@pytest.mark.parametrize("dtype, sort", [("float32", True), ("float16", False), ("float16", True),
                                         ("float32", False)])
def test_multi_thread_paths_equal_the_whole_table_kernel(dtype, sort, bits_equal):
    """Large calls (the pool's sorted-run and partition paths, float16 blocks) on the kept
    positions of two shards equal the whole-table kernel on every thread count."""
    rng = np.random.default_rng(5)
    rows, width, n = 40000, 64, 70000
    x = rng.standard_normal((rows, width)).astype(dtype)
    indices = rng.integers(0, rows, size=n).astype(np.int64)
    if sort:
        indices.sort()
    updates = rng.standard_normal((n, width)).astype(dtype)
    rc, whole, _ = call_kernel("ScatterAdd", x, indices, updates)
    assert rc == 0
    blocks = split_rows(rows, 2)
    before = ms_scatter.get_num_threads()
    try:
        for threads in (1, 2):
            ms_scatter.set_num_threads(threads)
            results = run_shards("ScatterAdd", x, indices, updates, blocks=blocks)
            assert all(rc == 0 for rc, _, _ in results)
            bits_equal(np.concatenate([r for _, r, _ in results]), whole, f"{threads} threads")
    finally:
        ms_scatter.set_num_threads(before)
