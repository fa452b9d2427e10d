"""ms_scatter.scatter_nd and ScatterNd (MindSpore's drop-ins) against the numpy oracle (the
zeros of `shape` and TensorScatterAdd), in PYNATIVE and GRAPH: every value dtype, int32/int64
indices, index depths 1 and 2, duplicates; gradients; vmap; dynamic shapes; errors before
anything is computed; our kernel ran (call counts); and, while MindSpore still has it,
agreement with its built-in."""
import subprocess
import sys
import zlib

import mindspore as ms
import numpy as np
import pytest
from mindspore import Tensor, nn, ops

import ms_scatter
from ms_scatter.infer import VALUE_DTYPES
from ms_scatter.reference import oracle
from ms_scatter.testing import np_dtype

from .helpers import assert_same


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


class _Call(nn.Cell):
    def __init__(self, fn, shape):
        super().__init__()
        self.fn = fn
        self.shape = shape

    def construct(self, indices, updates):
        return self.fn(indices, updates, self.shape)


def _run(mode, fn, indices, updates, shape):
    if mode == "GRAPH":
        return _Call(fn, shape)(indices, updates)
    return fn(indices, updates, shape)


def _case(rng, dtype, shape, depth, rows):
    npdt = np_dtype(dtype)
    indices = np.stack([rng.integers(0, shape[d], rows) for d in range(depth)], axis=-1)
    indices[-1] = indices[0]  # a duplicate
    upd_shape = (rows,) + tuple(shape[depth:])
    if np.issubdtype(npdt, np.integer):
        updates = rng.integers(-5 if np.issubdtype(npdt, np.signedinteger) else 0, 9, upd_shape).astype(npdt)
    else:
        updates = (rng.standard_normal(upd_shape) * 4).astype(np.float32).astype(npdt)
    return indices, updates


def _expected(indices, updates, shape):
    return oracle("TensorScatterAdd", np.zeros(shape, updates.dtype), indices, updates)


@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
@pytest.mark.parametrize("dtype", VALUE_DTYPES)
def test_matches_the_oracle(mode, dtype, index_dtype):
    rng = np.random.default_rng(_seed(dtype, index_dtype, mode))
    for shape, depth, rows in (((4, 3), 1, 6), ((4, 3), 2, 7), ((3, 2, 2), 1, 5)):
        indices, updates = _case(rng, dtype, shape, depth, rows)
        indices = indices.astype(index_dtype)
        before = ms_scatter.call_counts().get("ScatterNd", 0)
        out = _run(mode, ms_scatter.scatter_nd, Tensor(indices), Tensor(updates), shape)
        assert_same(out.asnumpy(), _expected(indices, updates, shape), f"scatter_nd {dtype} {shape} depth {depth}")
        assert ms_scatter.call_counts().get("ScatterNd", 0) == before + 1


def test_primitive_and_its_inference(mode):
    rng = np.random.default_rng(_seed("prim", mode))
    indices, updates = _case(rng, "float32", (5, 2), 1, 4)
    prim = ms_scatter.ScatterNd()
    assert prim.infer_shape([4, 1], [4, 2], (5, 2)) == [5, 2]
    assert prim.infer_dtype(ms.int32, ms.float32) == ms.float32
    out = _run(mode, prim, Tensor(indices), Tensor(updates), (5, 2))
    assert_same(out.asnumpy(), _expected(indices, updates, (5, 2)))


def test_mindspore_example(mode):
    """The example of MindSpore's own ops.scatter_nd page."""
    indices = Tensor(np.array([[0], [2]], np.int32))
    updates = Tensor(np.tile(np.array([1, 2, 3, 4], np.float32)[:, None], (2, 1, 4)))
    out = _run(mode, ms_scatter.scatter_nd, indices, updates, (4, 4, 4)).asnumpy()
    assert (out[0] == out[2]).all() and (out[1] == 0).all() and (out[3] == 0).all()
    assert out[0, :, 0].tolist() == [1, 2, 3, 4]


def test_float16_accumulates_in_float32(mode):
    updates = np.array([2048.0] + [1.0] * 8, np.float16)  # float16 adds of 1 to 2048 are lost one by one
    out = _run(mode, ms_scatter.scatter_nd, Tensor(np.zeros((9, 1), np.int32)), Tensor(updates), (1,))
    assert out.asnumpy()[0] == np.float16(2056.0)


def test_an_index_out_of_range_is_an_error(mode):
    indices = Tensor(np.array([[0], [3]], np.int32))
    updates = Tensor(np.ones((2, 2), np.float32))
    if mode == "PYNATIVE":
        with pytest.raises(ms_scatter.ScatterIndexError, match=r"For 'ScatterNd', each value of 'indices' must be in "
                                                               r"\[0, 3\).*but got 3 at position \(1, 0\)"):
            ms_scatter.scatter_nd(indices, updates, (3, 2))
    else:
        with pytest.raises(RuntimeError):
            _run(mode, ms_scatter.scatter_nd, indices, updates, (3, 2))
        assert "For 'ScatterNd', each value of 'indices' must be in [0, 3)" in ms_scatter.last_error()[1]


@pytest.mark.parametrize("args,error,match", [
    ((np.zeros((2, 1), np.int32), np.ones(2, np.float32), (3, 0)), ValueError, "non-empty tuple of positive ints"),
    ((np.zeros((2, 1), np.int32), np.ones(2, np.float32), ()), ValueError, "non-empty tuple of positive ints"),
    ((np.zeros((2, 1), np.int32), np.ones(2, np.float32), (3, 2.0)), TypeError, "'shape' must be a tuple of ints"),
    ((np.zeros((2, 3), np.int32), np.ones(2, np.float32), (3, 2)), ValueError, r"must be <= the rank of 'shape' \(2\)"),
    ((np.zeros((2, 1), np.int32), np.ones((2, 3), np.float32), (3, 2)), ValueError,
     r"'updates' must be indices.shape\[:-1\] \+ shape\[indices.shape\[-1\]:\] = \(2, 2\)"),
    ((np.zeros(2, np.int32), np.ones(2, np.float32), (3,)), ValueError, "rank of 'indices' must be >= 2"),
    ((np.zeros((2, 1), np.float32), np.ones(2, np.float32), (3,)), TypeError, "'indices' must be int32 or int64"),
    ((np.zeros((2, 1), np.int32), np.ones(2, np.bool_), (3,)), TypeError, "the dtype of 'updates' must be one of"),
])
def test_bad_arguments(mode, args, error, match):
    indices, updates, shape = args
    with pytest.raises(error, match=f"For 'ScatterNd', .*{match}"):
        _run(mode, ms_scatter.scatter_nd, Tensor(indices), Tensor(updates), shape)


class _Loss(nn.Cell):
    def __init__(self, indices, weights):
        super().__init__()
        self.indices = Tensor(indices)
        self.weights = Tensor(weights)

    def construct(self, updates):
        return (ms_scatter.scatter_nd(self.indices, updates, (4, 3)) * self.weights).sum()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_gradient_gathers_the_output_gradient(mode, dtype):
    """d updates[k] = d out[indices[k]]: each of duplicate indices gets the whole gradient."""
    rng = np.random.default_rng(_seed("grad", dtype, mode))
    indices, updates = _case(rng, dtype, (4, 3), 1, 6)
    weights = rng.standard_normal((4, 3)).astype(np_dtype(dtype))
    net = _Loss(indices.astype(np.int32), weights)
    grad = (ms.jit(ms.grad(net)) if mode == "GRAPH" else ms.grad(net))(Tensor(updates))
    assert_same(grad.asnumpy(), weights[indices[:, 0]])


def test_vmap_loops_over_the_batch(mode):
    rng = np.random.default_rng(_seed("vmap", mode))
    cases = [_case(rng, "float32", (4, 3), 2, 5) for _ in range(3)]
    indices = np.stack([c[0] for c in cases]).astype(np.int32)
    updates = np.stack([c[1] for c in cases])

    def per_batch(i, u):
        return ms_scatter.scatter_nd(i, u, (4, 3))

    run = ms.vmap(per_batch, (0, 0), 0)
    out = (ms.jit(run) if mode == "GRAPH" else run)(Tensor(indices), Tensor(updates))
    assert_same(out.asnumpy(), np.stack([_expected(indices[b], updates[b], (4, 3)) for b in range(3)]))


@pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
def test_dynamic_number_of_updates(mode):
    """A graph compiled once for any number of index vectors (the output shape is a constant)."""
    net = _Call(ms_scatter.scatter_nd, (5, 3))
    net.set_inputs(Tensor(shape=[None, 1], dtype=ms.int32), Tensor(shape=[None, 3], dtype=ms.float32))
    for rows in (4, 9, 0):
        rng = np.random.default_rng(_seed("dynamic", rows))
        indices, updates = _case(rng, "float32", (5, 3), 1, max(rows, 1))
        indices, updates = indices[:rows], updates[:rows]
        out = net(Tensor(indices.astype(np.int32)), Tensor(updates))
        assert_same(out.asnumpy(), _expected(indices, updates, (5, 3)), f"{rows} updates")


def test_on_the_ascend_path_a_call_says_there_is_no_kernel():
    code = ("import os; os.environ['MS_SCATTER_ASCEND_EMULATION'] = '/nonexistent.so'\n"
            "import numpy as np; from mindspore import Tensor; import ms_scatter\n"
            "try:\n"
            "    ms_scatter.scatter_nd(Tensor(np.zeros((1, 1), np.int32)), Tensor(np.ones(1, np.float32)), (2,))\n"
            "except ValueError as e:\n"
            "    print('REFUSED', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "REFUSED For 'ScatterNd', ScatterNd has no Ascend kernel yet" in proc.stdout, \
        proc.stdout + proc.stderr[-3000:]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_agrees_with_mindspore_builtin(dtype):
    builtin = getattr(ops, "scatter_nd", None)
    if builtin is None:
        pytest.skip("this MindSpore has no ops.scatter_nd")
    rng = np.random.default_rng(_seed("builtin", dtype))
    indices, updates = _case(rng, dtype, (6, 4), 2, 9)
    ours = ms_scatter.scatter_nd(Tensor(indices.astype(np.int32)), Tensor(updates), (6, 4))
    theirs = builtin(Tensor(indices.astype(np.int32)), Tensor(updates), (6, 4))
    assert_same(ours.asnumpy(), theirs.asnumpy())
