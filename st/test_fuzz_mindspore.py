"""Property-based tests through MindSpore (PYNATIVE): the kernel-level strategy of
tests/test_reliability.py (random shapes incl. zero-size dimensions, all value and index
dtypes, duplicates, NaN/inf/-0.0/extremes), run through every primitive and function,
compared with the numpy loop oracle. Errors the oracle raises must be raised by
ms_scatter too, with the target unchanged."""
import importlib.util
import os

import numpy as np
import pytest
from hypothesis import given, settings

import mindspore as ms
from mindspore import Parameter, Tensor

import ms_scatter
from ms_scatter.testing import OracleIndexError, OracleZeroDivisionError, oracle, split_op

_spec = importlib.util.spec_from_file_location(
    "ms_scatter_reliability_strategies", os.path.join(os.path.dirname(__file__), "..", "tests", "test_reliability.py"))
_rel = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_rel)

EXAMPLES = int(os.environ.get("MS_SCATTER_MS_FUZZ_EXAMPLES", "12"))
ALL_OPS = [f + r for f in ms_scatter.infer.FAMILIES for r in ms_scatter.infer.REDUCTIONS]


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got, want, equal_nan=True)
    if want.dtype.kind == "f":
        assert np.array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("form", ["primitive", "function"])
@pytest.mark.parametrize("op", ALL_OPS)
def test_fuzz_through_mindspore(op, form):
    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    family, _ = split_op(op)
    call = getattr(ms_scatter, op)() if form == "primitive" else ms_scatter.primitives.FUNCTIONS[
        ms_scatter.infer.function_name(op)]

    ran = []

    @settings(_rel.FUZZ, max_examples=EXAMPLES)
    @given(_rel.scatter_cases(op, max_dim=3))
    def check(case):
        _, x, indices, updates = case
        if 0 in x.shape or 0 in updates.shape or 0 in indices.shape:
            return  # zero-size tensors: covered at kernel level (MindSpore's Tensor handles them apart)
        ran.append(1)
        try:
            want = oracle(op, x, indices, updates)
        except (OracleIndexError, OracleZeroDivisionError) as err:
            want = err
        target = Tensor(x) if family == "TensorScatter" else Parameter(Tensor(x), name="p")
        if isinstance(want, Exception):
            expected = ms_scatter.ScatterIndexError if isinstance(want, IndexError) else \
                ms_scatter.ScatterZeroDivisionError
            with pytest.raises(expected):
                call(target, Tensor(indices), Tensor(updates))
            _same(target.asnumpy(), x)
            return
        out = call(target, Tensor(indices), Tensor(updates))
        _same(out.asnumpy(), want)
        _same(target.asnumpy(), x if family == "TensorScatter" else want)

    check()
    print(f"{op} {form}: {len(ran)} examples through MindSpore")
    assert len(ran) >= EXAMPLES // 3, f"only {len(ran)} of the examples reached MindSpore"
