"""The docstrings of the 42 callables (ops/_docs.py): every example runs as a doctest and
prints exactly what the docstring shows; each docstring has MindSpore's sections, names
every error our ops raise with its type, our policies, and what the built-in's page
tells its user (its error types and sections).

The examples' outputs were computed by the numpy loop oracle (the four seed operators:
printed on MindSpore's reference pages), so a doctest compares our kernels with them.
"""
import doctest
import re

import mindspore as ms
import pytest
from mindspore import ops

import ms_scatter
from ms_scatter import infer
from ms_scatter.seed_examples import SEED_EXAMPLES

OPS = [f + r for f in infer.FAMILIES for r in infer.REDUCTIONS]
CALLABLES = OPS + [infer.function_name(op) for op in OPS]
SECTIONS_PRIMITIVE = ["Note:", "Inputs:", "Outputs:", "Raises:", "Supported Platforms:", "Examples:"]
SECTIONS_FUNCTION = ["Note:", "Args:", "Returns:", "Raises:", "Supported Platforms:", "Examples:"]


@pytest.fixture(autouse=True)
def _pynative_quiet(monkeypatch):
    monkeypatch.setenv("MS_SCATTER_QUIET", "1")  # the error examples' kernel message on stderr
    previous = ms.get_context("mode")
    ms.set_context(mode=ms.PYNATIVE_MODE)
    yield
    ms.set_context(mode=previous)


@pytest.mark.parametrize("name", CALLABLES)
def test_every_example_prints_what_it_shows(name):
    obj = getattr(ms_scatter, name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, name, globs={})
    assert len(tests) == 1 and len(tests[0].examples) >= 8, f"{name}: no examples found"
    out = []
    runner = doctest.DocTestRunner(optionflags=0)  # exact output, no normalisation
    result = runner.run(tests[0], out=out.append)
    assert result.failed == 0, "".join(out)
    assert sum("print(output)" in e.source for e in tests[0].examples) >= 1
    if name[0].isupper():  # the primitives also show the out-of-range error, input_x unchanged
        assert any(e.exc_msg and "ScatterIndexError: For '" + name + "'" in e.exc_msg for e in tests[0].examples)


def test_a_doctest_fails_when_an_output_is_wrong():
    """The runner really compares: a docstring with one printed value changed fails."""
    doc = ms_scatter.scatter_add.__doc__.replace("[11.5 12.5 13.5]]", "[11.5 12.5 13.25]]", 1)
    assert doc != ms_scatter.scatter_add.__doc__
    test = doctest.DocTestParser().get_doctest(doc, {}, "scatter_add (altered)", None, 0)
    result = doctest.DocTestRunner(optionflags=0).run(test, out=lambda s: None)
    assert result.failed == 1


@pytest.mark.parametrize("name", CALLABLES)
def test_mindspore_layout_and_our_policies(name):
    doc = getattr(ms_scatter, name).__doc__
    primitive = name[0].isupper()
    family = next(f for f in sorted(infer.FAMILIES, key=len, reverse=True)
                  if (name if primitive else name.title().replace("_", "")).startswith(f))
    sections = SECTIONS_PRIMITIVE if primitive else SECTIONS_FUNCTION
    positions = [doc.find("\n    " + s + "\n") for s in sections]
    assert all(p > 0 for p in positions) and positions == sorted(positions), (name, sections, positions)
    assert ".. math::" in doc
    if primitive and family != "TensorScatter":
        assert "\n    Args:\n        use_locking (bool, optional)" in doc
    raises = doc[doc.index("\n    Raises:\n"):doc.index("\n    Supported Platforms:\n")]
    for error in ("TypeError", "ValueError", "ms_scatter.ScatterIndexError", "RuntimeError"):
        assert f"\n        {error}: " in raises, (name, error)
    assert ("ms_scatter.ScatterZeroDivisionError" in raises) == name.lower().endswith("div")
    assert ("use_locking" in raises) == (family == "ScatterNd" or (primitive and family == "Scatter"))
    for policy in ("index order", "before anything is written", "Differentiable", "vmap"):
        assert policy in doc, (name, policy)
    if family != "TensorScatter":
        assert "in-place" in doc and "Parameter" in doc
    assert "``CPU`` (tested) ``GPU`` (compiled, not run) ``Ascend`` (not compiled)" in doc
    assert "not yet run on a GPU" in doc and "never on an Ascend chip" in doc


@pytest.mark.parametrize("name", [n for n in CALLABLES if getattr(ops, n, None) is not None])
def test_tells_what_mindspores_page_tells(name):
    """Every error type and section of the built-in's docstring appears in ours."""
    ours, theirs = getattr(ms_scatter, name).__doc__, getattr(ops, name).__doc__ or ""
    for section in ("Args:", "Inputs:", "Outputs:", "Returns:", "Raises:", "Supported Platforms:", "Examples:"):
        if f"\n    {section}\n" in theirs and section not in ("Args:", "Returns:", "Inputs:", "Outputs:"):
            assert f"\n    {section}\n" in ours, (name, section)
    if "\n    Inputs:\n" in theirs or "\n    Args:\n" in theirs:
        assert "\n    Inputs:\n" in ours or "\n    Args:\n" in ours
    their_errors = set(re.findall(r"^\s{8}(\w+Error):", theirs, re.M))
    our_errors = set(re.findall(r"^\s{8}([\w.]+Error):", ours, re.M))
    assert their_errors <= our_errors, (name, their_errors - our_errors)


def test_seed_operators_show_the_reference_pages_examples():
    """The four seed ops print exactly the outputs of MindSpore's pages, example by example."""
    for example in SEED_EXAMPLES:
        doc = getattr(ms_scatter, example["op"]).__doc__
        block = "\n".join("        " + line for line in example["expected"].split("\n"))
        assert ">>> print(output)\n" + block + "\n" in doc, example["op"]
        shown = doc.count(">>> print(output)")
        assert shown == sum(e["op"] == example["op"] for e in SEED_EXAMPLES), example["op"]


def test_help_tells_the_policies():
    import pydoc
    text = pydoc.render_doc(ms_scatter.ScatterAdd, renderer=pydoc.plaintext)
    for phrase in ("Updates the value of the input tensor through the addition operation",
                   "use_locking (bool, optional)", "ScatterIndexError", "float16 accumulates in float32",
                   "Integer overflow wraps", "Supported Platforms", ">>> print(output)"):
        assert phrase in text, phrase
