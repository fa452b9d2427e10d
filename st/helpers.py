"""Shared helpers of the system tests: how an operator is called in each mode.

Modes (see conftest.py): "PYNATIVE" (the call as written), "GRAPH" (the call inside an
nn.Cell; for in-place operators the Cell holds the Parameter), "JIT" (the call inside
an @mindspore.jit function that takes the Parameter / Tensor as an argument).
"""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn

import ms_scatter
from ms_scatter.infer import function_name  # noqa: F401 (used by the tests)
from ms_scatter.testing import split_op

# The 21 operators in table order (family x reduction), e.g. "ScatterNdMax".
OPS = list(ms_scatter.primitives.PRIMITIVES)
VALUE_DTYPES = ms_scatter.infer.VALUE_DTYPES
INDEX_DTYPES = ("int32", "int64")


# GRAPH mode compiles a graph per case (about a second each on 2 cores). The segment
# operators' oracle tests run every dtype in PYNATIVE, through the same kernels, and these in
# GRAPH (each kind and width; int64 ids with float32); tests/test_kernels.py calls their entries
# on every dtype directly.
GRAPH_DTYPES = ("float16", "float32", "float64", "bfloat16", "int8", "uint64")


def graph_covers(mode, dtype, index_dtype="int32"):
    """Skip a GRAPH case outside GRAPH_DTYPES (every dtype still runs in PYNATIVE)."""
    if mode == "GRAPH" and not (dtype in GRAPH_DTYPES and index_dtype == "int32" or dtype == "float32"):
        pytest.skip("in GRAPH mode the oracle runs GRAPH_DTYPES (st/helpers.py); PYNATIVE runs this dtype")


def in_place(op):
    return split_op(op)[0] != "TensorScatter"


def callable_for(op, kind, **kwargs):
    """The primitive instance (kind 'primitive') or the function (kind 'function')."""
    if kind == "primitive":
        return getattr(ms_scatter, op)(**kwargs)
    if kind == "function":
        return getattr(ms_scatter, function_name(op))
    raise ValueError(kind)


class InPlaceCell(nn.Cell):
    """Holds the Parameter (made from `x`, or `x` itself if it is one) and applies `fn`
    to it (GRAPH mode)."""

    def __init__(self, x, fn, name="p"):
        super().__init__()
        self.p = x if isinstance(x, Parameter) else Parameter(Tensor(x), name=name)
        self.fn = fn

    def construct(self, indices, updates):
        return self.fn(self.p, indices, updates)


class OutOfPlaceCell(nn.Cell):
    """Applies `fn` to its inputs (GRAPH mode)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, x, indices, updates):
        return self.fn(x, indices, updates)


class InPlaceLoss(nn.Cell):
    """sum(fn(p, indices, updates) * w) over a Parameter p made from x (gradient tests)."""

    def __init__(self, fn, x, w):
        super().__init__()
        self.p = Parameter(Tensor(x), name="p")
        self.fn = fn
        self.w = Tensor(w)

    def construct(self, indices, updates):
        return (self.fn(self.p, indices, updates) * self.w).sum()


class OutOfPlaceLoss(nn.Cell):
    """sum(fn(x, indices, updates) * w) (gradient tests)."""

    def __init__(self, fn, w):
        super().__init__()
        self.fn = fn
        self.w = Tensor(w)

    def construct(self, x, indices, updates):
        return (self.fn(x, indices, updates) * self.w).sum()


def jit_of(fn):
    """`fn` compiled with @mindspore.jit (a fresh function, hence a fresh graph)."""
    @ms.jit
    def call(x, indices, updates):
        return fn(x, indices, updates)
    return call


class Runner:
    """Runs one operator form in one mode on numpy inputs, repeatedly on the same target.

    For in-place operators the target is one Parameter made from `x`; for TensorScatter*
    the target is the Tensor made from `x` (which must stay unchanged). `run(i, u)`
    returns the output as numpy; `target()` returns the Parameter / Tensor as numpy."""

    def __init__(self, mode, op, kind, x, **kwargs):
        self.mode, self.op, self.kind = mode, op, kind
        fn = callable_for(op, kind, **kwargs)
        self.in_place = in_place(op)
        if mode == "GRAPH":
            if self.in_place:
                self.cell = InPlaceCell(x, fn)
                self.target_obj = self.cell.p
                self._call = self.cell
            else:
                self.cell = OutOfPlaceCell(fn)
                self.target_obj = Tensor(x)
                self._call = lambda i, u: self.cell(self.target_obj, i, u)
        else:
            self.target_obj = Parameter(Tensor(x), name="p") if self.in_place else Tensor(x)
            f = jit_of(fn) if mode == "JIT" else fn
            self._call = lambda i, u: f(self.target_obj, i, u)

    def run(self, indices, updates):
        out = self._call(Tensor(indices), Tensor(updates))
        return out.asnumpy()

    def target(self):
        return self.target_obj.asnumpy()


def assert_same(actual, expected, what="result"):
    """Same shape, same dtype, equal values (NaN equal to NaN)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    if actual.dtype.name == "bfloat16":  # exact in float32
        actual, expected = actual.astype(np.float32), expected.astype(np.float32)
    if actual.dtype.kind == "f":
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
    else:
        same = actual == expected
    if not same.all():
        first = tuple(int(k) for k in np.argwhere(~same)[0])
        raise AssertionError(f"{what}: {int((~same).sum())} element(s) differ, first at {first}: "
                             f"{actual[first]!r} != {expected[first]!r}\n"
                             f"actual:\n{actual}\nexpected:\n{expected}")


def assert_unchanged(obj, original, what="input_x"):
    """The Parameter / Tensor holds exactly the bytes of `original` (and its dtype, shape)."""
    now = obj.asnumpy() if hasattr(obj, "asnumpy") else np.asarray(obj)
    assert now.dtype == original.dtype and now.shape == original.shape, what
    assert now.tobytes() == original.tobytes(), f"{what} changed:\n{now}\nwas:\n{original}"


def settle_pynative_signature(in_place_kind=True):
    """Work around a package bug, so that a test does not depend on the tests before it.

    In PYNATIVE, MindSpore keeps the implicit-conversion signature of the first successful
    ms_scatter call (every ms_scatter primitive is a MindSpore 'Custom' primitive) after
    start-up or after a failed call, and applies it to every later ms_scatter call: the
    in-place operators' signature (updates converted to input_x's dtype) or the
    TensorScatter operators' (none). See test_errors.py::test_conversion_*_call_history.

    This makes a failed call, then a successful one of the wanted kind, which leaves the
    state a fresh process has for that kind. Only meaningful in PYNATIVE."""
    x = np.zeros((2, 3), np.float32)
    try:
        ms_scatter.tensor_scatter_add(Tensor(x), Tensor(np.zeros((1, 1), np.float32)), Tensor(x[:1]))
    except TypeError:
        pass
    else:
        raise AssertionError("float32 indices were accepted")
    if in_place_kind:
        ms_scatter.scatter_update(Parameter(Tensor(x), name="settle"), Tensor(np.zeros((1,), np.int32)),
                                  Tensor(x[:1]))
    else:
        ms_scatter.tensor_scatter_update(Tensor(x), Tensor(np.zeros((1, 1), np.int32)), Tensor(x[:1]))


def target_for(op, x):
    """input_x of a call: a Parameter for the in-place families, else a Tensor."""
    return Parameter(Tensor(x), name="p") if in_place(op) else Tensor(x)


def call_in_mode(mode, fn, op, target, indices, updates):
    """One call of `fn` on `target` in `mode` (GRAPH: a fresh Cell holding it; JIT: a fresh
    jit function)."""
    i = indices if isinstance(indices, Tensor) else Tensor(indices)
    u = updates if isinstance(updates, Tensor) else Tensor(updates)
    if mode == "GRAPH":
        if in_place(op):
            return InPlaceCell(target, fn)(i, u)
        return OutOfPlaceCell(fn)(target, i, u)
    if mode == "JIT":
        return jit_of(fn)(target, i, u)
    return fn(target, i, u)


def numeric_gradient(loss, x, eps=1e-6):
    """Central finite differences of the float `loss(x)` at every element of float64 `x`."""
    grad = np.zeros_like(x)
    for k in range(x.size):
        plus, minus = x.copy(), x.copy()
        plus.reshape(-1)[k] += eps
        minus.reshape(-1)[k] -= eps
        grad.reshape(-1)[k] = (loss(plus) - loss(minus)) / (2 * eps)
    return grad
