r"""The docstrings of the 42 callables, in MindSpore's layout, generated from the operator
records (infer.OPERATORS): summary, formula, Args/Inputs/Outputs (Returns for
the functions), Raises, Supported Platforms, Examples.

The examples' printed outputs are computed by the numpy loop oracle
(ms_scatter.reference.oracle), never by our kernels, and kept in ops/_doc_outputs.py so that
the oracle does not run at import (`python -m ms_scatter._docs [PATH]` rewrites that file;
tests/test_doc_outputs.py checks it is current); st/test_docs.py runs every example as a
doctest against our ops. The four seed operators (ScatterAdd, ScatterSub, ScatterMin,
tensor_scatter_max) show the examples of MindSpore's reference pages with the outputs
printed there (ms_scatter.seed_examples).
"""
import os
import sys

import numpy as np

from . import infer
from ._doc_outputs import OUTPUTS
from .reference import oracle, reduce_step
from .seed_examples import SEED_EXAMPLES

_NOUN = {"Add": "addition", "Sub": "subtraction", "Mul": "multiplication", "Div": "division",
         "Max": "maximum", "Min": "minimum", "Update": "update"}
_INFIX = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}
_MATH_FN = {"Max": r"\max", "Min": r"\min"}
_MATH_OP = {"Add": r"\mathrel{+}=", "Sub": r"\mathrel{-}=", "Mul": r"\mathrel{*}=", "Div": r"\mathrel{/}="}
_SLOT = {"Scatter": (r"\text{input_x}[\text{indices}[i, ..., j], :]", r"\text{updates}[i, ..., j, :]"),
         "ScatterNd": (r"\text{input_x}[\text{indices}[i, ..., j]]", r"\text{updates}[i, ..., j]"),
         "TensorScatter": (r"\text{output}[\text{indices}[i, ..., j]]", r"\text{updates}[i, ..., j]")}


# What ran where, in MindSpore's platform slot: only the CPU kernels are tested.
PLATFORMS = "``CPU`` (tested) ``GPU`` (compiled, not run) ``Ascend`` (not compiled)"


def _value_dtypes(r):
    return ", ".join(infer.value_dtypes(r.name))
_SHAPE = {"Scatter": "indices.shape + input_x.shape[1:]",
          "ScatterNd": "indices.shape[:-1] + input_x.shape[indices.shape[-1]:]",
          "TensorScatter": "indices.shape[:-1] + input_x.shape[indices.shape[-1]:]"}


def _formula(r):
    slot, upd = _SLOT[r.family]
    if r.reduction in _MATH_OP:
        return f"{slot} {_MATH_OP[r.reduction]} {upd}"
    if r.copies:
        return f"{slot} = {upd}"
    return f"{slot} = {_MATH_FN[r.reduction]}({slot}, {upd})"


# MindSpore's one-line summaries, per family: (Update, the arithmetic reductions).
_SUMMARY = {
    "Scatter": ("Updates the value of the input tensor, along with the input indices.",
                "Updates the value of the input tensor through the {noun} operation."),
    "ScatterNd": ("Updates tensor values by using input indices and value.",
                  "Applies sparse {noun} to individual values or slices in a tensor."),
    "TensorScatter": ("Creates a new tensor by updating the positions in `input_x` indicated by `indices`.",
                      "Creates a new tensor by the {noun} of the positions in `input_x` indicated by `indices` "
                      "with `updates`."),
}


def _summary(r):
    """MindSpore's one-line summary of the operator."""
    return _SUMMARY[r.family][0 if r.copies else 1].format(noun=_NOUN[r.reduction])


def _description(r):
    lines = []
    if r.depth_one:
        lines.append("Using given values to update the rows of `input_x` selected by `indices` (each value of "
                     "`indices` is a row of `input_x`), through the " + _NOUN[r.reduction] + " operation. This "
                     "operation outputs the `input_x` after the update is done, which makes it convenient to use "
                     "the updated value.")
    else:
        lines.append("The last axis of `indices` is the depth `d` of each index vector: `indices[..., :d]` "
                     "selects an element (d = rank of `input_x`) or a slice `input_x[i0, ..., i(d-1)]` "
                     "(d < rank) for each vector, and `updates` holds one such element or slice per vector.")
        if r.in_place:
            lines.append("This operation outputs the `input_x` after the update is done.")
        else:
            lines.append("`input_x` is not changed: the result is a new tensor (a copy of `input_x`, then updated).")
    return lines


# Notes of one reduction's arithmetic.
_ARITHMETIC_NOTES = {
    "Div": "Floats follow IEEE 754 (a zero divisor gives inf or nan). Integer division truncates toward zero "
           "(``MIN / -1`` wraps to ``MIN``); an integer zero divisor is an error raised before anything is "
           "written.",
    "Max": "A NaN on either side propagates (as numpy.maximum / numpy.minimum and PyTorch do).",
    "Min": "A NaN on either side propagates (as numpy.maximum / numpy.minimum and PyTorch do).",
    "Add": "Integer overflow wraps as the dtype does (as numpy does).",
    "Sub": "Integer overflow wraps as the dtype does (as numpy does).",
    "Mul": "Integer overflow wraps as the dtype does (as numpy does).",
}


def _notes(r):
    notes = []
    if r.in_place:
        notes.append("This is an in-place update operator: the Parameter `input_x` holds the new value once the "
                     "call is done (cost O(updates), no copy of `input_x`). `use_locking` is kept for "
                     "compatibility: calls on the same Parameter are serialised inside the kernel whatever its "
                     "value.")
    else:
        notes.append("The result is a copy of `input_x` updated by `updates`: cost O(input_x) + O(updates).")
    if r.copies:
        notes.append("Duplicate index vectors are applied in index order: the last occurrence wins, the same on "
                     "every run and every backend (MindSpore leaves this order undefined).")
    else:
        notes.append("Duplicate index vectors are applied in index order, the same on every run and every "
                     "backend.")
    notes.append("An index out of range or negative is an error raised before anything is written: "
                 "`input_x` is left exactly as it was (see Raises). The message names the operator, the bad "
                 "value, its position in `indices` and the valid range.")
    if r.reduction in _ARITHMETIC_NOTES:
        notes.append(_ARITHMETIC_NOTES[r.reduction])
    if not r.copies:
        notes.append("float16 accumulates in float32: each destination slice takes all of its updates in "
                     "float32 and is rounded to float16 once.")
    notes.append("Differentiable with respect to `input_x` and `updates` (`indices` get none), in PYNATIVE, "
                 "GRAPH and under jit; works under `mindspore.vmap`.")
    return notes


def _inputs(r):
    if not r.in_place:
        x = ("input_x (Tensor)", "The input tensor, of dtype " + _value_dtypes(r)
             + ". Its rank must be at least "
             "`indices.shape[-1]`.")
        i = ("indices (Tensor)", "The index vectors, of dtype int32 or int64, rank at least 2; the last axis "
             "is the depth of each index vector.")
        u = ("updates (Tensor)", "The values, of the dtype of `input_x`, of shape "
             f"`{_SHAPE[r.family]}`.")
    else:
        x = ("input_x (Parameter)", "The target tensor, a Parameter (updated in place), of dtype "
             + _value_dtypes(r) + "."
             + (" Its shape is :math:`(N, *)` where :math:`*` means any number of additional dimensions."
                if r.depth_one else " Its rank must be at least `indices.shape[-1]`."))
        if r.depth_one:
            i = ("indices (Tensor)", "The rows of `input_x` to update, of dtype mindspore.int32 or "
                 "mindspore.int64, any shape.")
        else:
            i = ("indices (Tensor)", "The index vectors, of dtype int32 or int64, rank at least 1; the last "
                 "axis is the depth of each index vector.")
        u = ("updates (Tensor)", "The values, of the dtype of `input_x` (a lower-priority dtype is converted "
             f"to it), of shape `{_SHAPE[r.family]}`.")
    return [x, i, u]


def _raises(r, primitive):
    out = []
    if r.in_place and primitive:
        out.append(("TypeError", "If `use_locking` is not a bool."))
    if r.in_place and not r.depth_one and not primitive:
        out.append(("TypeError", "If `use_locking` is not a bool (MindSpore's ``scatter_nd_*`` take it; "
                                 "under ``ms_scatter.patch()`` they accept it)."))
    out.append(("TypeError", "If `input_x` or `indices` is not a Tensor, or `updates` is neither a Tensor nor a "
                             "number."))
    out.append(("TypeError", "If the dtype of `indices` is not int32 or int64."))
    out.append(("TypeError", f"If the dtype of `input_x` is not one of {_value_dtypes(r)}."))
    if not r.in_place:
        out.append(("TypeError", "If the dtype of `updates` is not the dtype of `input_x`."))
    else:
        out.append(("TypeError", "If `updates` has a dtype that `input_x` would have to be converted to (a "
                                 "Parameter is never converted; MindSpore's built-in raises RuntimeError here)."))
    out.append(("ValueError", f"If the shape of `updates` is not `{_SHAPE[r.family]}`."))
    if r.depth_one:
        out.append(("ValueError", "If `input_x` has rank 0."))
    else:
        out.append(("ValueError", f"If the rank of `indices` is less than {r.min_indices_rank}."))
        out.append(("ValueError", "If `indices.shape[-1]` is greater than the rank of `input_x`."))
    out.append(("ms_scatter.ScatterIndexError", "In PYNATIVE mode, if a value of `indices` is out of range or "
                                                "negative; a subclass of IndexError and RuntimeError. Nothing is "
                                                "written."))
    if r.reduction == "Div":
        out.append(("ms_scatter.ScatterZeroDivisionError", "In PYNATIVE mode, if `input_x` has an integer dtype "
                                                           "and `updates` contains 0; a subclass of "
                                                           "ZeroDivisionError and RuntimeError. Nothing is "
                                                           "written."))
    out.append(("RuntimeError", "In GRAPH mode, under jit or vmap, for the same invalid "
                + ("indices or integer zero divisors" if r.reduction == "Div" else "indices")
                + " (MindSpore's generic kernel error; `ms_scatter.last_error()` returns the message). "
                  "Nothing is written."))
    return out


# --------------------------------------------------------------------------- examples

_HEADER = [">>> import mindspore", ">>> import numpy as np", ">>> from mindspore import Tensor, Parameter",
           ">>> import ms_scatter"]


def _literal(array):
    """The numpy expression of an example's array: np.ones([2, 2, 3]) or np.array([...])."""
    array = np.asarray(array)
    if array.ndim and np.all(array == 1) and array.dtype.kind == "f":
        return f"np.ones({list(array.shape)})"
    return f"np.array({array.tolist()!r})"


def _wrap(prefix, expr, suffix):
    """A statement over 112 characters split after its first ``]], ``, the continuation
    aligned under the array's second bracket (as the seed pages write it)."""
    line = f">>> {prefix}{expr}{suffix}"
    if len(line) <= 112 or "]], " not in expr or not expr.startswith("np.array(["):
        return [line]
    cut = expr.index("]], ") + 4
    column = 4 + len(prefix) + len("np.array([")
    return [f">>> {prefix}{expr[:cut].rstrip()}", "..." + " " * (column - 3) + expr[cut:] + suffix]


def _tensor_lines(name, array, dtype, parameter=False):
    expr = _literal(array)
    ms_dtype = f"mindspore.{np.dtype(dtype).name}"
    if parameter:
        return _wrap(f"{name} = Parameter(Tensor(", expr, f", {ms_dtype}), name=\"x\")")
    return _wrap(f"{name} = Tensor(", expr, f", {ms_dtype})")


def _fmt(value):
    """A value as the seed pages write it in comments: 1.0, [1.0, 1.0, 1.0]."""
    value = np.asarray(value)
    if value.ndim:
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return str(value.astype(value.dtype).item()) if value.dtype.kind in "iu" else str(value[()])


def _trace(op, x, indices, updates):
    """Comment lines walking through a Scatter* example step by step (one step per row of
    `indices`), as MindSpore's ScatterAdd / ScatterSub pages do."""
    r = infer.operator(op)
    x = np.array(x, copy=True)
    indices = np.asarray(indices)
    rows = indices.reshape(-1, indices.shape[-1]) if indices.ndim > 1 else indices.reshape(1, -1)
    upd = np.asarray(updates, x.dtype).reshape(rows.shape + x.shape[1:])
    lines = [f">>> # for indices = {indices.tolist()}"]
    for s, row in enumerate(rows):
        lines.append(f">>> # step {s + 1}: {row.tolist()}")
        for k, i in enumerate(row):
            old, v = x[i].copy(), upd[s, k]
            x[i] = reduce_step(r.reduction, x[i], v)
            if r.reduction in _INFIX:
                lines.append(f">>> # input_x[{i}] = {_fmt(old)} {_INFIX[r.reduction]} {_fmt(v)} = {_fmt(x[i])}")
            elif r.copies:
                lines.append(f">>> # input_x[{i}] = {_fmt(v)}")
            else:
                lines.append(f">>> # input_x[{i}] = {r.reduction.lower()}({_fmt(old)}, {_fmt(v)}) = {_fmt(x[i])}")
    return lines


# The generated examples: per family, (input_x, indices, updates) of float32 values whose
# results are exact and show duplicates applied in index order.
_CASES = {
    "Scatter": [([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[0, 1], [1, 1]],
                 [[[2.0, 2.0, 2.0], [3.0, 3.0, 3.0]], [[0.5, 0.5, 0.5], [4.0, 4.0, 4.0]]])],
    "ScatterNd": [([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [[2], [4], [1], [7]], [6.0, 7.0, 8.0, 9.0]),
                  ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[0, 1], [1, 2], [0, 1]], [2.0, 0.5, 4.0])],
    "TensorScatter": [([[-0.1, 0.3, 3.6], [0.4, 0.5, -3.2]], [[0, 0], [0, 0]], [1.0, 2.2]),
                      ([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], [[1], [0], [1]],
                       [[2.0, 2.0, 2.0], [0.5, 0.5, 0.5], [4.0, 4.0, 4.0]])],
}


def example_outputs(op):
    """The printed output of each of op's family's _CASES, computed by the numpy oracle: what
    ops/_doc_outputs.py keeps."""
    return [str(oracle(op, np.array(x, np.float32), np.array(i, np.int32), np.array(u, np.float32)))
            for x, i, u in _CASES[infer.operator(op).family]]


def outputs_text():
    """The text of ops/_doc_outputs.py."""
    lines = ['"""The printed outputs of the generated docstring examples (ops/_docs.py _CASES), computed by',
             "the numpy oracle. Generated by `python -m ms_scatter._docs ops/_doc_outputs.py`; do not edit",
             '(tests/test_doc_outputs.py checks it)."""', "OUTPUTS = {"]
    for op in infer.OPERATORS:
        lines.append(f"    {op!r}: {example_outputs(op)!r},")
    return "\n".join(lines + ["}", ""])


def _examples_of(op, callable_name, primitive):
    """[(input_x, indices, updates, expected, from_seed)] for one callable."""
    seeds = [e for e in SEED_EXAMPLES if e["op"] == callable_name and (e["kind"] == "primitive") == primitive]
    if seeds:
        return [(e["input_x"], e["indices"], e["updates"], e["expected"], True) for e in seeds]
    # (computed here only while ops/_doc_outputs.py lacks the operator, as when it is regenerated)
    outputs = OUTPUTS.get(op) or example_outputs(op)
    return [(x, i, u, expected, False) for (x, i, u), expected in zip(_CASES[infer.operator(op).family], outputs)]


def _example_lines(op, primitive):
    r = infer.operator(op)
    in_place = r.in_place
    fname = r.function
    lines = list(_HEADER)
    for n, (x, i, u, expected, seed) in enumerate(_examples_of(op, op if primitive else fname, primitive)):
        if n and in_place:
            lines.append(">>> # for input_x will be updated after the operation is completed. "
                         "input_x need to be re-initialized.")
        lines += _tensor_lines("input_x", x, np.float32, parameter=in_place)
        if n and r.depth_one and np.asarray(i).ndim == 2:
            lines += _trace(op, np.array(x, np.float32), np.array(i), np.array(u, np.float32))
        lines += _tensor_lines("indices", i, np.int32)
        lines += _tensor_lines("updates", u, np.float32)
        if primitive:
            lines.append(f">>> {fname} = ms_scatter.{op}()")
            lines.append(f">>> output = {fname}(input_x, indices, updates)")
        else:
            lines.append(f">>> output = ms_scatter.{fname}(input_x, indices, updates)")
        lines.append(">>> print(output)")
        lines += expected.split("\n")
    if primitive:
        lines += _error_example(r)
    return lines


def _error_example(r):
    """An out-of-range index: the error, and input_x unchanged."""
    op = r.name
    x = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    if r.depth_one:
        i, u, pos, shape = [1, 5], [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]], "(1,)", "(2,)"
        valid = "[0, 2) (dimension 0 of 'input_x' with shape (2, 3))"
    else:
        i, u, pos, shape = [[1, 0], [1, 3]], [1.0, 1.0], "(1, 1)", "(2, 2)"
        valid = "[0, 3) (dimension 1 of 'input_x' with shape (2, 3))"
    lines = [">>> # an index out of range: an error before anything is written"]
    lines += _tensor_lines("input_x", x, np.float32, parameter=r.in_place)
    lines += _tensor_lines("indices", i, np.int32)
    lines += _tensor_lines("updates", u, np.float32)
    lines += [f">>> output = ms_scatter.{op}()(input_x, indices, updates)",
              "Traceback (most recent call last):",
              "    ...",
              f"ms_scatter.ScatterIndexError: For '{op}', each value of 'indices' must be in {valid}, "
              f"but got {5 if r.depth_one else 3} at position {pos} of 'indices' (shape {shape}).",
              ">>> print(input_x.asnumpy())" if r.in_place else ">>> print(input_x)",
              "[[1. 2. 3.]", " [4. 5. 6.]]"]
    return lines


# --------------------------------------------------------------------------- assembly

def _section(title, lines):
    return [f"{title}:"] + [("    " + line) if line else "" for line in lines] + [""]


def _bullets(items):
    out = []
    for item in items:
        out += _hang(f"- {item}", "  ")
    return out


def _hang(text, indent, width=100):
    """Wraps text at `width`, continuation lines indented by `indent`."""
    words, lines, line = text.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = indent + word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return lines


def _doc(r, primitive):
    op, fname, in_place = r.name, r.function, r.in_place
    out = [_summary(r), ""]
    for paragraph in _description(r):
        out += _hang(paragraph, "") + [""]
    out += [("for each `i, ..., j` in `indices.shape`:" if r.depth_one else
             "for each index vector `indices[i, ..., j]`:"), "", ".. math::", "",
            "    " + _formula(r), ""]
    if not in_place:
        out += ["where :math:`\\text{output}` starts as a copy of `input_x`.", ""]
    if in_place:
        out += _hang("Inputs of `input_x` and `updates` comply with the implicit type conversion rules to make the "
                     "data types consistent: `updates` of a lower-priority dtype is converted to the dtype of "
                     "`input_x`; a conversion that would need the Parameter `input_x` converted is refused.", "")
        out += [""]
    out += _section("Note", _bullets(_notes(r)))
    if primitive:
        if in_place:
            out += _section("Args", _hang("use_locking (bool, optional): Whether to protect the assignment by a "
                                          "lock. Default: ``False``. Kept for compatibility (see Note).", "    "))
        out += _section("Inputs", [line for name, text in _inputs(r)
                                   for line in _hang(f"- **{name.split()[0]}** {name[len(name.split()[0]) + 1:]} "
                                                     f"- {text}", "  ")])
        out += _section("Outputs", ["Tensor, the updated `input_x`, has the same shape and type as `input_x`."
                                    if in_place else "Tensor, has the same shape and type as `input_x`."])
    else:
        out += _section("Args", [line for name, text in _inputs(r)
                                 for line in _hang(f"{name}: {text}", "    ")])
        out += _section("Returns", _hang("Tensor, the updated `input_x` (the Parameter itself, updated in place), "
                                         "has the same shape and type as `input_x`." if in_place else
                                         "Tensor, a new tensor with the same shape and type as `input_x`.", ""))
    out += _section("Raises", [line for kind, text in _raises(r, primitive)
                               for line in _hang(f"{kind}: {text}", "    ")])
    out += _section("Supported Platforms", [
        PLATFORMS, "",
        *_hang("CPU: ms_scatter's C++ kernels, tested. GPU: its CUDA kernels, compiled but not yet run on a GPU. "
               "Ascend: its Ascend C kernels (a CANN custom-op package): never on an Ascend chip, never compiled by "
               "CANN; their engine and the Python path run on the CPU (see Backends in the documentation).", "")])
    see = (f"The functional form is :func:`ms_scatter.{fname}`." if primitive else
           f"The primitive is :class:`ms_scatter.{op}`.")
    out += _hang(see + f" Under ``ms_scatter.patch()``, ``mindspore.ops.{op if primitive else fname}`` "
                       "(and MindSpore's other names for it) is this one.", "") + [""]
    out += _section("Examples", _example_lines(op, primitive))
    return "\n".join(("    " + line) if line else "" for line in out).rstrip() + "\n"


def primitive_doc(op):
    """The docstring of primitive `op` (e.g. ScatterAdd)."""
    return "\n" + _doc(infer.operator(op), primitive=True)


def function_doc(op):
    """The docstring of its functional form (e.g. scatter_add)."""
    return "\n" + _doc(infer.operator(op), primitive=False)


if __name__ == "__main__":
    _path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                 "_doc_outputs.py")
    with open(_path, "w", encoding="utf-8") as _f:
        _f.write(outputs_text())
    print(f"wrote {_path}")
