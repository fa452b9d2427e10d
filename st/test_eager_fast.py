"""PYNATIVE calls on the CPU in one step (ScatterKernel.eager_call): a signature (the inputs'
types, shapes and dtypes) that has passed the full path once is called without its layers,
and every check that can change between calls of one signature still holds on that step:
an uninitialised tensor, a bad index, updates of another dtype, a non-contiguous view.
"""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor
from mindspore.common.initializer import One

import ms_scatter
from ms_scatter.testing import oracle

from .helpers import assert_same

ROWS, COLS = 6, 4


def _case(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    i = rng.integers(0, ROWS, 5).astype(np.int32)
    u = rng.standard_normal((5, COLS)).astype(np.float32)
    return x, i, u


def _callables(op):
    return [getattr(ms_scatter, op)(), getattr(ms_scatter, ms_scatter.infer.function_name(op))]


@pytest.fixture(autouse=True)
def _pynative():
    before = ms.get_context("mode")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=before)


@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterMin", "ScatterNdUpdate", "TensorScatterMax"])
def test_repeated_calls_take_one_step(op):
    """The second call of a signature takes the one-step path (its plan is kept), and each
    call gives the oracle's result; the in-place result shares the Parameter's memory."""
    tensor = op.startswith("TensorScatter")
    nd = op.startswith(("ScatterNd", "TensorScatter"))
    for fn in _callables(op):
        x, i, u = _case(1)
        idx = i.reshape(-1, 1) if nd else i
        p = Parameter(Tensor(x), name="p")
        xt, it, ut = Tensor(x), Tensor(idx), Tensor(u)
        expected = x
        for _ in range(3):
            if tensor:
                out = fn(xt, it, ut)
                assert_same(out.asnumpy(), oracle(op, x, idx, u))
            else:
                out = fn(p, it, ut)
                expected = oracle(op, expected, idx, u)
                assert_same(p.asnumpy(), expected)
                assert_same(out.asnumpy(), expected)
                assert out.data_ptr() == p.data_ptr()
        if tensor and not isinstance(fn, getattr(ms_scatter, op)):
            continue  # (the function's kernel is not reachable from here)
        fast = fn._fast if tensor else getattr(ms_scatter, op)._token_kernel._fast
        assert any(key[3:] == ((ROWS, COLS), idx.shape, (5, COLS)) for key in fast), "no one-step plan kept"


@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdMax", "TensorScatterAdd"])
def test_bad_index_after_a_good_call(op):
    """A bad index on a signature already seen: the kernel's error, input_x untouched."""
    nd = not op.startswith("Scatter") or op.startswith("ScatterNd")
    for fn in _callables(op):
        x, i, u = _case(2)
        idx = i.reshape(-1, 1) if nd else i
        p = Parameter(Tensor(x), name="p")
        fn(p, Tensor(idx), Tensor(u))
        before = p.asnumpy().copy()
        bad = idx.copy()
        bad[3] = ROWS
        with pytest.raises(ms_scatter.ScatterIndexError, match=r"must be in \[0, 6\).*but got 6"):
            fn(p, Tensor(bad), Tensor(u))
        assert_same(p.asnumpy(), before)


@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterUpdate"])
def test_uninitialised_tensor_after_a_good_call(op):
    """An initializer's tensor of a signature already seen is still refused (no data)."""
    for fn in _callables(op):
        x, i, u = _case(3)
        p = Parameter(Tensor(x), name="p")
        fn(p, Tensor(i), Tensor(u))
        lazy = Tensor(shape=(5, COLS), dtype=ms.float32, init=One())
        with pytest.raises(RuntimeError, match="no data yet"):
            fn(p, Tensor(i), lazy)


def test_other_updates_dtype_after_a_good_call():
    """float16 updates onto a float32 Parameter whose float32 signature was seen: converted."""
    for fn in _callables("ScatterAdd"):
        x, i, u = _case(4)
        p = Parameter(Tensor(x), name="p")
        fn(p, Tensor(i), Tensor(u))
        half = u.astype(np.float16)
        fn(p, Tensor(i), Tensor(half))
        assert_same(p.asnumpy(), oracle("ScatterAdd", oracle("ScatterAdd", x, i, u), i, half.astype(np.float32)))


def test_view_after_a_good_call():
    """A transposed view with the shape of a signature already seen: written into its base."""
    for fn in _callables("ScatterAdd"):
        x, i, u = _case(5)
        fn(Parameter(Tensor(x), name="p"), Tensor(i), Tensor(u))
        base = Tensor(np.ascontiguousarray(x.T))
        view = base.transpose(1, 0)
        assert not view.is_contiguous()
        fn(view, Tensor(i), Tensor(u))
        assert_same(base.asnumpy(), oracle("ScatterAdd", x, i, u).T)


def test_large_outputs_reuse_memory_only_when_free():
    """TensorScatter outputs of 32 MiB and more come from a pool (ops/_memory.py): a loop reuses
    the block its previous result frees, and an output still held (as a Tensor, a view of it,
    or its asnumpy() array) keeps its memory and its values while later calls run."""
    from ms_scatter import _kernel  # pylint: disable=import-outside-toplevel
    rows, cols = (32 << 20) // (4 * 64), 64  # a 32 MiB float32 output
    rng = np.random.default_rng(5)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    xt = Tensor(x)
    fn = ms_scatter.tensor_scatter_add
    kept, expected = [], []
    for k in range(6):
        i = rng.integers(0, rows, (64, 1)).astype(np.int32)
        u = rng.standard_normal((64, cols)).astype(np.float32)
        out = fn(xt, Tensor(i), Tensor(u))
        want = oracle("TensorScatterAdd", x, i, u)
        assert_same(out.asnumpy(), want, f"call {k}")
        if k == 1:
            kept.append(out)
        elif k == 2:
            kept.append(out[1:])
            want = want[1:]
        elif k == 3:
            kept.append(out.asnumpy())
        if k in (1, 2, 3):
            expected.append(want)
        del out
    for k, (held, want) in enumerate(zip(kept, expected)):
        assert_same(held if isinstance(held, np.ndarray) else held.asnumpy(), want, f"kept output {k}")
    assert _kernel._OUTPUTS.idle_bytes() <= _kernel._OUTPUTS.idle_limit  # pylint: disable=protected-access
    assert_same(xt.asnumpy(), x, "input_x untouched")
    i, u = Tensor(np.zeros((1, 1), np.int32)), Tensor(np.ones((1, cols), np.float32))
    first = fn(xt, i, u).data_ptr()
    assert fn(xt, i, u).data_ptr() == first, "a freed block is reused"
