"""A small training-style loop: an embedding-like Parameter (50 x 8, float32) pulled
towards fixed target rows by sparse updates through ScatterAdd, 30 steps of seeded
random ids (with duplicates), in GRAPH mode and in PYNATIVE, primitive and function.

Checked against numpy running the same loop (np.add.at for the sparse update) within
float32 tolerance, and exactly, step by step, against the oracle applied to the updates
the Cell computed."""
import mindspore as ms
import numpy as np
import pytest
from mindspore import Parameter, Tensor, nn, ops

from ms_scatter.testing import oracle

from .helpers import assert_same, callable_for

ROWS, DIM, BATCH, STEPS, LR = 50, 8, 16, 30, 0.1


class EmbeddingStep(nn.Cell):
    """One step: gather the rows of `ids`, move them towards `targets` by a scatter-add of
    -LR * (rows - targets). Returns the loss and the updates it applied."""

    def __init__(self, table, fn):
        super().__init__()
        self.embedding = Parameter(Tensor(table), name="embedding")
        self.fn = fn
        self.scale = Tensor(np.float32(-LR))

    def construct(self, ids, targets):
        rows = ops.gather(self.embedding, ids, 0)
        grad = rows - targets
        updates = grad * self.scale
        self.fn(self.embedding, ids, updates)
        loss = (grad * grad).sum()
        return loss, updates


def _data():
    rng = np.random.default_rng(20240601)
    table = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    goal = rng.standard_normal((ROWS, DIM)).astype(np.float32)
    steps = []
    for _ in range(STEPS):
        ids = rng.integers(0, ROWS, size=BATCH).astype(np.int32)
        ids[1] = ids[0]  # at least one duplicate per step
        steps.append(ids)
    return table, goal, steps


def _numpy_loop(table, goal, steps):
    emb = table.copy()
    losses = []
    for ids in steps:
        grad = emb[ids] - goal[ids]
        losses.append(float((grad.astype(np.float64) ** 2).sum()))
        np.add.at(emb, ids, grad * np.float32(-LR))
    return emb, losses


@pytest.mark.parametrize("kind", ["primitive", "function"])
def test_embedding_training_loop(mode, kind):
    table, goal, steps = _data()
    cell = EmbeddingStep(table, callable_for("ScatterAdd", kind))
    before = table.copy()
    losses = []
    for ids in steps:
        loss, updates = cell(Tensor(ids), Tensor(goal[ids]))
        after = cell.embedding.asnumpy()
        # exactly the oracle applied to this step's updates, on the previous value
        assert_same(after, oracle("ScatterAdd", before, ids, updates.asnumpy()), "embedding after a step")
        before = after.copy()
        losses.append(float(loss.asnumpy()))
    expected, expected_losses = _numpy_loop(table, goal, steps)
    np.testing.assert_allclose(cell.embedding.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])  # it learns
    assert cell.embedding.dtype == ms.float32 and cell.embedding.shape == (ROWS, DIM)
