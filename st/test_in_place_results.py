"""What an in-place call returns, and the idioms that lost data before (issue 31):

* vmap of every in-place primitive and function whose result is discarded, the Cell returning
  the batched Parameter (MindSpore's own test_scatter_func_indices_vmap pattern): the
  Parameter is written, in PYNATIVE and GRAPH;
* two calls of one op on two Parameters of one shape in one graph, both results used, in
  every dtype, with static and dynamic shapes, the primitive and the function in one graph
  (nn.Adam's sparse path: next_m = scatter_add(m, ...); next_v = scatter_add(v, ...));
* bool, complex64 and complex128 for the Update operators (a bit copy), and Tensor index
  assignment on bool and complex tensors under the patch (MindSpore lowers it to
  TensorScatterUpdate);
* a malformed environment variable: an error that names it.
"""
import os
import subprocess
import sys
import zlib

import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn, ops, vmap

import ms_scatter
from ms_scatter.infer import COPY_DTYPES, VALUE_DTYPES
from ms_scatter.testing import np_dtype, oracle, random_case

from .helpers import OPS, assert_same, call_in_mode, callable_for, in_place, target_for

IN_PLACE_OPS = [op for op in OPS if in_place(op)]
GRAPH = pytest.mark.parametrize("mode", ["GRAPH"], indirect=True)
UPDATE_OPS = [op for op in OPS if op.endswith("Update")]


def _seed(*parts):
    return zlib.crc32("/".join(map(str, parts)).encode())


# ------------------------------------------------------------------ vmap, result discarded

class _Discarding(nn.Cell):
    """MindSpore's VmapScatterNet: the op's result is discarded, input_x returned."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def construct(self, x, indices, updates):
        self.fn(x, indices, updates)
        return x


class _VmapOverParameter(nn.Cell):
    def __init__(self, inner, x):
        super().__init__()
        self.p = Parameter(Tensor(x), name="p")
        self.inner = inner

    def construct(self, indices, updates):
        return vmap(self.inner, (0, 0, None), 0)(self.p, indices, updates)


def _vmap_cases():
    for op in IN_PLACE_OPS:
        yield op, "float32"
    for op in ("ScatterAdd", "ScatterNdMax", "ScatterUpdate"):  # float64 results are the kernel's copy
        yield op, "float64"


@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("op,dtype", list(_vmap_cases()))
def test_vmap_writes_when_the_result_is_discarded(mode, op, dtype, kind):
    rng = np.random.default_rng(_seed("vmap-discard", op, kind, dtype))
    batch = 2
    x, first, updates = random_case(rng, op, (4, 3), 3, dtype, "int32")
    xs = np.stack([x, x * 2])
    indices = np.stack([first] + [random_case(rng, op, (4, 3), 3, dtype, "int32")[1] for _ in range(batch - 1)])
    net = _VmapOverParameter(_Discarding(callable_for(op, kind)), xs)
    out = net(Tensor(indices), Tensor(updates))
    expected = np.stack([oracle(op, xs[b], indices[b], updates) for b in range(batch)])
    assert_same(net.p.asnumpy(), expected, f"{op} {kind}: Parameter")
    if dtype == "float64":
        # The Cell returns the batched Parameter, which MindSpore 2.10 reads through float32 in
        # float64 (its built-in ScatterAdd gives the same rounded result); the Parameter is exact.
        expected = expected.astype(np.float32).astype(np.float64)
    assert_same(out.asnumpy(), expected, f"{op} {kind}: vmapped result")


# ------------------------------------------------------------------ two Parameters of one shape

class _TwoPairs(nn.Cell):
    """The primitive on Parameters a, b and the function on c, d, all of one shape; every
    result used by a later op (the optimizer pattern)."""

    def __init__(self, op, xs):
        super().__init__()
        self.prim = callable_for(op, "primitive")
        self.fn = callable_for(op, "function")
        self.a, self.b, self.c, self.d = (Parameter(Tensor(x), name=n) for x, n in zip(xs, "abcd"))

    def construct(self, i, u, j, v):
        ra = self.prim(self.a, i, u)
        rb = self.prim(self.b, j, v)
        rc = self.fn(self.c, i, u)
        rd = self.fn(self.d, j, v)
        return ops.concat((ra, rb, rc, rd))


def _two_parameter_cases():
    for dtype in VALUE_DTYPES:
        for shapes in ("static", "dynamic"):
            yield pytest.param("ScatterAdd", dtype, shapes, id=f"ScatterAdd-{dtype}-{shapes}")
    for dtype in COPY_DTYPES:
        for shapes in ("static", "dynamic"):
            yield pytest.param("ScatterNdUpdate", dtype, shapes, id=f"ScatterNdUpdate-{dtype}-{shapes}")


@GRAPH
@pytest.mark.parametrize("op,dtype,shapes", list(_two_parameter_cases()))
def test_two_parameters_of_one_shape_every_dtype(mode, op, dtype, shapes):
    rng = np.random.default_rng(_seed("two", op, dtype, shapes))
    x, i, u = random_case(rng, op, (5, 3), 3, dtype, "int32")
    _, j, v = random_case(rng, op, (5, 3), 4, dtype, "int32")
    xs = [random_case(rng, op, (5, 3), 1, dtype, "int32")[0] for _ in range(3)] + [x]
    net = _TwoPairs(op, xs)
    if shapes == "dynamic":  # every dimension of the indices and updates unknown
        net.set_inputs(*(Tensor(shape=[None] * a.ndim, dtype=Tensor(a).dtype) for a in (i, u, j, v)))
    out = net(Tensor(i), Tensor(u), Tensor(j), Tensor(v)).asnumpy()
    expected = [oracle(op, xs[0], i, u), oracle(op, xs[1], j, v), oracle(op, xs[2], i, u), oracle(op, xs[3], j, v)]
    for k, (param, want) in enumerate(zip((net.a, net.b, net.c, net.d), expected)):
        assert_same(param.asnumpy(), want, f"{op} {dtype} {shapes}: Parameter {'abcd'[k]}")
    assert_same(out, np.concatenate(expected), f"{op} {dtype} {shapes}: the four results")


# ------------------------------------------------------------------ Update's bit-copy dtypes

@pytest.mark.parametrize("kind", ["primitive", "function"])
@pytest.mark.parametrize("dtype", COPY_DTYPES)
@pytest.mark.parametrize("op", UPDATE_OPS)
def test_update_copies_bool_and_complex(mode, op, dtype, kind):
    rng = np.random.default_rng(_seed("copy", op, dtype, kind))
    x, indices, updates = random_case(rng, op, (5, 3), 6, dtype, "int64")
    expected = oracle(op, x, indices, updates)
    target = target_for(op, x)
    out = call_in_mode(mode, callable_for(op, kind), op, target, indices, updates)
    if in_place(op):
        assert_same(target.asnumpy(), expected, f"{op} {dtype}: Parameter")
    else:
        assert_same(target.asnumpy(), x, f"{op} {dtype}: input_x untouched")
    assert_same(out.asnumpy(), expected, f"{op} {dtype}: result")


@pytest.mark.parametrize("dtype", COPY_DTYPES)
def test_arithmetic_still_refuses_copy_dtypes(mode, dtype):
    x = np.zeros((3, 2), np_dtype(dtype))
    with pytest.raises(TypeError, match=rf"For 'TensorScatterAdd', the dtype of 'input_x' must be one of .*"
                                        rf"but got {dtype}"):
        call_in_mode(mode, ms_scatter.tensor_scatter_add, "TensorScatterAdd", Tensor(x), np.array([[1]], np.int32),
                     x[:1])


# ------------------------------------------------------------------ index assignment, patched

def _assignments(m, c, i, b):
    """The index assignments MindSpore runs through TensorScatterUpdate, on a bool mask m and a
    complex tensor c (their copies; numpy runs the same code)."""
    out = []
    a = m.copy()
    a[i] = True
    out.append(a)
    a = m.copy()
    a[[0, 2]] = True
    out.append(a)
    a = m.copy()
    a[i, 1] = True
    out.append(a)
    a = m.copy()
    a[i] = b
    out.append(a)
    a = m.copy()
    a[0] = True
    out.append(a)
    a = c + 0  # (MindSpore 2.7.1's Tensor.copy() drops the imaginary part)
    a[i] = c[:2] + 1
    out.append(a)
    return out


class _GraphAssignments(nn.Cell):
    def construct(self, m, c, i, b):
        out = []
        a = (m == m) == m  # a copy of the mask
        a[i] = True
        out.append(a)
        a = (m == m) == m
        a[1] = True
        out.append(a)
        a = (m == m) == m
        a[i] = b
        out.append(a)
        a = c + 0
        a[i] = c[:2] + 1
        out.append(a)
        return out


def _graph_expected(m, c, i, b):
    out = []
    for value in (True, None, b):
        a = m.copy()
        if value is None:
            a[1] = True
        else:
            a[i] = value
        out.append(a)
    a = c.copy()
    a[i] = c[:2] + 1
    out.append(a)
    return out


def test_index_assignment_on_bool_and_complex_under_the_patch(mode):
    m = np.zeros((4, 3), np.bool_)
    c = (np.arange(12).reshape(4, 3) * (1 + 2j)).astype(np.complex64)
    i = np.array([1, 3], np.int32)
    b = np.array([[True, False, True], [False, True, True]])
    before = ms_scatter.call_counts().get("TensorScatterUpdate", 0)
    with ms_scatter.patched():
        if mode == "GRAPH":
            got = _GraphAssignments()(Tensor(m), Tensor(c), Tensor(i), Tensor(b))
            expected = _graph_expected(m, c, i, b)
        else:
            got = _assignments(Tensor(m), Tensor(c), Tensor(i), Tensor(b))
            expected = _assignments(m, c, i, b)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert_same(g.asnumpy(), e, f"assignment {k}")
    assert ms_scatter.call_counts().get("TensorScatterUpdate", 0) > before, "the patched assignments ran our kernel"


# ------------------------------------------------------------------ environment variables

@pytest.mark.parametrize("name", ["MS_SCATTER_OUTPUT_POOL_BYTES", "MS_SCATTER_NUM_THREADS"])
@pytest.mark.parametrize("value", ["\u00b2", "12x", "-1"])
def test_malformed_count_variable_names_itself(name, value, monkeypatch):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=rf"ms_scatter: {name} must be .*but got {value!r}"):
        ms_scatter._lib.env_count(name, "a count", 0)  # pylint: disable=protected-access


def test_malformed_variable_at_import_names_itself():
    env = dict(os.environ, MS_SCATTER_OUTPUT_POOL_BYTES="\u00b2")
    proc = subprocess.run([sys.executable, "-c", "import ms_scatter"], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=300, check=False)
    assert proc.returncode != 0
    assert "ValueError: ms_scatter: MS_SCATTER_OUTPUT_POOL_BYTES must be a number of bytes" in proc.stdout, \
        proc.stdout[-2000:]
