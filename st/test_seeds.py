"""Every printed example of the four seed pages, with ms_scatter in place of MindSpore's
operator: the output prints exactly as the page shows, in PYNATIVE and in GRAPH mode
(GRAPH: the call inside an nn.Cell that holds the Parameter)."""
import mindspore
import numpy as np
import pytest
from mindspore import Parameter, Tensor

import ms_scatter

from .helpers import InPlaceCell, OutOfPlaceCell, assert_unchanged, function_name
from ms_scatter.seed_examples import SEED_EXAMPLES


def _ids():
    seen = {}
    out = []
    for ex in SEED_EXAMPLES:
        seen[ex["page"]] = seen.get(ex["page"], 0) + 1
        out.append(f"{ex['page']}-{seen[ex['page']]}")
    return out


EXAMPLES = pytest.mark.parametrize("example", SEED_EXAMPLES, ids=_ids())


def _inputs(ex):
    dtype = getattr(mindspore, ex["dtype"])
    x = np.array(ex["input_x"])
    indices = Tensor(np.array(ex["indices"]), getattr(mindspore, ex["indices_dtype"]))
    updates = Tensor(np.array(ex["updates"]), dtype)
    return x, dtype, indices, updates


def _other_form(ex):
    """The same operator through the other form: primitive <-> function."""
    if ex["kind"] == "primitive":
        return getattr(ms_scatter, function_name(ex["op"]))
    primitive_name = "".join(part.capitalize() for part in ex["op"].split("_"))
    return getattr(ms_scatter, primitive_name)()


def _run(ex, mode, call):
    """Run `call` on the example's inputs as the page does; returns (output, x object)."""
    x, dtype, indices, updates = _inputs(ex)
    in_place = not ex["op"].lower().startswith("tensor")  # Scatter*/scatter_*: on a Parameter
    if in_place:
        if mode == "GRAPH":
            cell = InPlaceCell(Tensor(x, dtype), call, name="x")
            return cell(indices, updates), cell.p
        input_x = Parameter(Tensor(x, dtype), name="x")
        return call(input_x, indices, updates), input_x
    input_x = Tensor(x, dtype)
    if mode == "GRAPH":
        return OutOfPlaceCell(call)(input_x, indices, updates), input_x
    return call(input_x, indices, updates), input_x


def _check_printed(ex, output, input_x, capsys):
    assert str(output) == ex["expected"]
    capsys.readouterr()
    print(output)
    assert capsys.readouterr().out == ex["expected"] + "\n"
    x, dtype, _, _ = _inputs(ex)
    if isinstance(input_x, Parameter):
        # in place: the Parameter holds the printed result afterwards
        assert str(Tensor(input_x.asnumpy())) == ex["expected"]
        np.testing.assert_array_equal(input_x.asnumpy(), output.asnumpy())
    else:
        assert_unchanged(input_x, x.astype(mindspore.dtype_to_nptype(dtype)))


@EXAMPLES
def test_seed_example_prints_as_on_page(example, mode, capsys):
    if example["kind"] == "primitive":
        call = getattr(ms_scatter, example["op"])()
    else:
        call = getattr(ms_scatter, example["op"])
    output, input_x = _run(example, mode, call)
    assert output.dtype == mindspore.float32 and output.shape == input_x.shape
    _check_printed(example, output, input_x, capsys)


@EXAMPLES
def test_seed_example_other_form_prints_the_same(example, mode, capsys):
    output, input_x = _run(example, mode, _other_form(example))
    _check_printed(example, output, input_x, capsys)


def test_seed_examples_cover_the_four_pages():
    pages = [ex["page"] for ex in SEED_EXAMPLES]
    assert sorted(set(pages)) == ["ScatterAdd", "ScatterMin", "ScatterSub", "tensor_scatter_max"]
    assert pages.count("ScatterSub") == 4 and pages.count("ScatterAdd") == 4
    assert pages.count("ScatterMin") == 1 and pages.count("tensor_scatter_max") == 1
    for ex in SEED_EXAMPLES:
        assert hasattr(ms_scatter, ex["op"])
        assert set(ex) >= {"page", "op", "kind", "input_x", "indices", "updates", "dtype", "expected"}
