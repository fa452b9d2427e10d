"""The docstring examples' printed outputs (ops/_doc_outputs.py) are what the numpy oracle
computes for them now: the package reads them at import instead of running the oracle."""
import os

from ms_scatter import _docs, infer

COMMITTED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "ops", "_doc_outputs.py")


def test_committed_outputs_are_the_oracles():
    with open(COMMITTED, encoding="utf-8") as f:
        committed = f.read()
    assert committed == _docs.outputs_text(), \
        "ops/_doc_outputs.py is stale: run python -m ms_scatter._docs ops/_doc_outputs.py"


def test_every_operator_has_its_outputs():
    assert set(_docs.OUTPUTS) == set(infer.OPERATORS)
    for op, outputs in _docs.OUTPUTS.items():
        assert outputs == _docs.example_outputs(op)
