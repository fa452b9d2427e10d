"""Soak: a long run of mixed ms_scatter calls in one PYNATIVE process.

Eight kinds of call in rotation (functions and primitives, in place on Parameters of
float32 / float16 / int32 and TensorScatter on a float64 Tensor, int32 and int64 indices,
fresh index / update Tensors every call) plus the two error paths (an out-of-range index,
an integer division by zero, each caught). Every result is checked: the Parameters
against a numpy mirror kept with the oracle, each TensorScatter output against the
oracle, the failing calls for their error type and an unchanged Parameter.

Memory: VmRSS (/proc/self/status) after a warm-up and after the loop; the growth must stay
under MS_SCATTER_SOAK_RSS_MB (default 50 MB). The figures are printed.

Default 2000 calls (a few seconds); with MS_SCATTER_SOAK=1 also 10,000 calls (marker
`slow`).
"""
import gc
import os
import time

import numpy as np
import pytest
from mindspore import Parameter, Tensor

import ms_scatter
from ms_scatter.testing import oracle, rss_mb


def _register_markers():
    config = getattr(pytest.mark, "_config", None)
    if config is not None and "slow" not in {line.split(":")[0].strip() for line in config.getini("markers")}:
        config.addinivalue_line("markers", "slow: long runs, enabled by an environment variable")


_register_markers()

RSS_BOUND_MB = float(os.environ.get("MS_SCATTER_SOAK_RSS_MB", "50"))


class Soak:
    def __init__(self, seed=2024):
        self.rng = np.random.default_rng(seed)
        rng = self.rng
        self.state = {  # numpy mirrors of the Parameters
            "f32": rng.standard_normal((512, 32)).astype(np.float32),
            "f16": rng.standard_normal((256, 16)).astype(np.float16),
            "i32": rng.integers(-50, 50, (128, 8, 4)).astype(np.int32),
        }
        self.params = {k: Parameter(Tensor(v.copy()), name=f"soak_{k}") for k, v in self.state.items()}
        self.x64 = rng.standard_normal((64, 32))
        self.x64_tensor = Tensor(self.x64)
        self.prims = {"ScatterMax": ms_scatter.ScatterMax(), "ScatterNdMul": ms_scatter.ScatterNdMul(use_locking=True),
                      "TensorScatterDiv": ms_scatter.TensorScatterDiv()}
        self.calls = 0
        self.errors_raised = 0

    def _in_place(self, key, op, fn, idx, upd):
        fn(self.params[key], Tensor(idx), Tensor(upd))
        self.state[key] = oracle(op, self.state[key], idx, upd)

    def _out_of_place(self, op, fn, idx, upd):
        out = fn(self.x64_tensor, Tensor(idx), Tensor(upd)).asnumpy()
        want = oracle(op, self.x64, idx, upd)
        assert np.array_equal(out, want, equal_nan=True), f"{op} differs from the oracle at call {self.calls}"

    def _failing(self, key, fn, idx, upd, exc_type):
        before = self.params[key].asnumpy().tobytes()
        with pytest.raises(exc_type):
            fn(self.params[key], Tensor(idx), Tensor(upd))
        assert self.params[key].asnumpy().tobytes() == before, "a failing call wrote its Parameter"
        self.errors_raised += 1

    def step(self):
        rng = self.rng
        kind = self.calls % 10
        self.calls += 1
        if kind == 0:
            self._in_place("f32", "ScatterAdd", ms_scatter.scatter_add, rng.integers(0, 512, 64).astype(np.int32),
                           rng.integers(-3, 4, (64, 32)).astype(np.float32))
        elif kind == 1:
            self._in_place("f16", "ScatterMax", self.prims["ScatterMax"], rng.integers(0, 256, (4, 8)),
                           rng.standard_normal((4, 8, 16)).astype(np.float16))
        elif kind == 2:
            self._in_place("i32", "ScatterNdUpdate", ms_scatter.scatter_nd_update,
                           np.stack([rng.integers(0, 128, 16), rng.integers(0, 8, 16)], -1).astype(np.int32),
                           rng.integers(-50, 50, (16, 4)).astype(np.int32))
        elif kind == 3:
            self._out_of_place("TensorScatterMin", ms_scatter.tensor_scatter_min, rng.integers(0, 64, (32, 1)),
                               rng.standard_normal((32, 32)))
        elif kind == 4:
            self._in_place("i32", "ScatterNdMul", self.prims["ScatterNdMul"],
                           np.array([[int(rng.integers(0, 128)), int(rng.integers(0, 8))]], np.int32),
                           rng.choice(np.array([-1, 1, 3], np.int32), (1, 4)))
        elif kind == 5:
            self._out_of_place("TensorScatterDiv", self.prims["TensorScatterDiv"],
                               rng.integers(0, 64, (2, 3, 1)).astype(np.int32), np.full((2, 3, 32), 2.0))
        elif kind == 6:
            self._in_place("f32", "ScatterSub", ms_scatter.ScatterSub(), rng.integers(0, 512, (8, 2)),
                           np.ones((8, 2, 32), np.float32))
        elif kind == 7:
            self._in_place("i32", "ScatterAdd", ms_scatter.scatter_add, np.array(int(rng.integers(0, 128)), np.int64),
                           np.ones((8, 4), np.int32))  # a 0-d index
        elif kind == 8:
            self._failing("f32", ms_scatter.scatter_sub, np.array([1, 512], np.int32), np.ones((2, 32), np.float32),
                          IndexError)
        else:
            self._failing("i32", ms_scatter.scatter_div, np.array([3], np.int32), np.zeros((1, 8, 4), np.int32),
                          ZeroDivisionError)

    def check_parameters(self):
        for key, param in self.params.items():
            assert np.array_equal(param.asnumpy(), self.state[key], equal_nan=True), f"Parameter {key} drifted"


def _soak(count, capsys):
    soak = Soak()
    warm = max(300, count // 10)
    t0 = time.time()
    for _ in range(warm):
        soak.step()
    gc.collect()
    rss_start = rss_mb()
    t1 = time.time()
    for k in range(count):
        soak.step()
        if k == count // 2:
            gc.collect()
            rss_mid = rss_mb()
    gc.collect()
    rss_end = rss_mb()
    t2 = time.time()
    soak.check_parameters()
    growth = rss_end - rss_start
    with capsys.disabled():
        print(f"\n[soak] {count} calls after {warm} warm-up calls ({soak.errors_raised} failing on purpose): "
              f"VmRSS {rss_start:.1f} MB -> {rss_mid:.1f} MB (half way) -> {rss_end:.1f} MB, growth {growth:+.1f} MB "
              f"(bound {RSS_BOUND_MB:.0f} MB); {(t2 - t1) / count * 1e3:.2f} ms per call, warm-up {t1 - t0:.1f} s",
              flush=True)
    assert growth < RSS_BOUND_MB, f"VmRSS grew by {growth:.1f} MB over {count} calls (bound {RSS_BOUND_MB} MB)"


@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_soak(mode, monkeypatch, capsys):
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")
    _soak(2000, capsys)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("MS_SCATTER_SOAK") != "1", reason="long soak: set MS_SCATTER_SOAK=1")
@pytest.mark.parametrize("mode", ["PYNATIVE"], indirect=True)
def test_soak_long(mode, monkeypatch, capsys):
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")
    _soak(10000, capsys)
