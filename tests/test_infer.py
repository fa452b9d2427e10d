"""Shape and dtype inference alone (ms_scatter.infer): no kernel is called.

Table-driven: every good case returns input_x's shape (and dtype); every bad case raises
the documented error type with the one wording ``For '<op>', ... but got ...``.
"""
import re

import mindspore
import numpy as np
import pytest
from mindspore.common import dtype as mstype

from ms_scatter import infer

ALL_OPS = tuple(f + r for f in infer.FAMILIES for r in infer.REDUCTIONS)
FAMILY_OPS = {f: tuple(f + r for r in infer.REDUCTIONS) for f in infer.FAMILIES}


def shape_of(family, op, x_shape, indices_shape, updates_shape):
    rule, kwargs = infer.family_shape_rule(family)
    return rule(op, x_shape, indices_shape, updates_shape, **kwargs)


# ------------------------------------------------------------------ tables of constants

def test_tables():
    assert infer.VALUE_DTYPES == ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8",
                                  "uint16", "uint32", "uint64")
    assert infer.INDEX_DTYPES == ("int32", "int64")
    assert infer.REDUCTIONS == ("Add", "Sub", "Mul", "Div", "Max", "Min", "Update")
    assert infer.FAMILIES == ("Scatter", "ScatterNd", "TensorScatter")


def test_family_shape_rule():
    assert infer.family_shape_rule("Scatter") == (infer.scatter_shape, {})
    assert infer.family_shape_rule("ScatterNd") == (infer.scatter_nd_shape, {"min_indices_rank": 1})
    assert infer.family_shape_rule("TensorScatter") == (infer.scatter_nd_shape, {"min_indices_rank": 2})
    with pytest.raises(ValueError, match="unknown scatter family 'Gather'"):
        infer.family_shape_rule("Gather")


# ------------------------------------------------------------------ good shapes

# (x shape, indices shape, updates shape); all must infer to x shape.
GOOD_SCATTER = [
    ((5, 3), (4,), (4, 3)),
    ((5, 3), (2, 2), (2, 2, 3)),             # any indices shape
    ((5, 3), (2, 1, 2), (2, 1, 2, 3)),
    ((5, 3), (), (3,)),                      # 0-d indices
    ((5,), (), ()),                          # 0-d indices on a 1-d x: 0-d updates
    ((5,), (4,), (4,)),
    ((5, 3, 2), (6,), (6, 3, 2)),
    ((5, 3), (0,), (0, 3)),                  # empty indices
    ((1, 1, 1, 1), (3,), (3, 1, 1, 1)),
    # dynamic dimensions (-1) are not checked
    ((-1, 3), (4,), (4, 3)),
    ((5, -1), (4,), (4, -1)),
    ((5, 3), (-1,), (-1, 3)),
    ((5, 3), (-1,), (4, 3)),
    ((5, 3), (4,), (-1, -1)),
    ((-1, -1), (-1, -1), (-1, -1, -1)),
    # unknown rank (-2) anywhere: nothing is checked
    ((-2,), (4,), (4, 3)),
    ((5, 3), (-2,), (4, 3)),
    ((5, 3), (4,), (-2,)),
    ((-2,), (-2,), (-2,)),
    ((-2,), (), ()),
]

GOOD_ND = [  # valid for ScatterNd and TensorScatter (indices rank >= 2)
    ((5, 3), (4, 2), (4,)),                  # depth == rank: element-wise
    ((5, 3), (4, 1), (4, 3)),
    ((5, 3), (2, 3, 2), (2, 3)),
    ((5, 3), (2, 3, 1), (2, 3, 3)),
    ((4, 3, 2), (5, 1), (5, 3, 2)),
    ((4, 3, 2), (5, 2), (5, 2)),
    ((4, 3, 2), (5, 3), (5,)),               # depth == rank 3
    ((7,), (5, 1), (5,)),                    # 1-d x, depth 1 == rank
    ((5, 3), (0, 2), (0,)),                  # empty indices
    ((5, 3), (0, 1), (0, 3)),
    # dynamic dimensions
    ((-1, 3), (4, 2), (4,)),
    ((5, -1), (4, 1), (4, -1)),
    ((5, 3), (-1, 2), (-1,)),
    ((5, 3), (-1, 1), (7, 3)),
    ((5, 3), (4, -1), (4, 3)),               # unknown depth: nothing more is checked
    ((5, 3), (4, -1), (9, 9, 9)),
    # unknown rank
    ((-2,), (4, 2), (4,)),
    ((5, 3), (-2,), (4,)),
    ((5, 3), (4, 2), (-2,)),
    ((-2,), (-2,), (-2,)),
]

GOOD_ND_ONLY = [  # indices rank 1 (one index vector): ScatterNd only
    ((5, 3), (2,), ()),
    ((5, 3), (1,), (3,)),
    ((4, 3, 2), (3,), ()),
    ((4, 3, 2), (1,), (3, 2)),
    ((7,), (1,), ()),
]


def _good_cases():
    for family in infer.FAMILIES:
        table = GOOD_SCATTER if family == "Scatter" else GOOD_ND + (GOOD_ND_ONLY if family == "ScatterNd" else [])
        for case in table:
            yield pytest.param(family, *case, id=f"{family}-x{case[0]}-i{case[1]}-u{case[2]}")


@pytest.mark.parametrize("family,x_shape,indices_shape,updates_shape", list(_good_cases()))
def test_good_shapes(family, x_shape, indices_shape, updates_shape):
    for op in FAMILY_OPS[family]:
        got = shape_of(family, op, x_shape, indices_shape, updates_shape)
        assert got == tuple(x_shape) and isinstance(got, tuple)
        # lists are accepted as well as tuples
        assert shape_of(family, op, list(x_shape), list(indices_shape), list(updates_shape)) == tuple(x_shape)


@pytest.mark.parametrize("op", ALL_OPS)
@pytest.mark.parametrize("dtype", infer.VALUE_DTYPES)
@pytest.mark.parametrize("index_dtype", infer.INDEX_DTYPES)
def test_infer_good(op, dtype, index_dtype):
    family = op[:-len(next(r for r in infer.REDUCTIONS if op.endswith(r)))]
    x_shape, indices_shape, updates_shape = ((5, 3), (4,), (4, 3)) if family == "Scatter" else ((5, 3), (4, 2), (4,))
    for x_dtype in (dtype, getattr(mindspore, dtype), np.dtype(dtype), mstype.TensorType(getattr(mindspore, dtype))):
        shape, out_dtype = infer.infer(op, family, x_shape, indices_shape, updates_shape,
                                       x_dtype, index_dtype, dtype)
        assert shape == x_shape
        assert out_dtype is x_dtype  # input_x's dtype object, passed through
    assert infer.scatter_dtype(op, getattr(mindspore, dtype), getattr(mindspore, index_dtype),
                               getattr(mindspore, dtype)) == getattr(mindspore, dtype)


# ------------------------------------------------------------------ dtype names

@pytest.mark.parametrize("name", infer.VALUE_DTYPES + ("bool", "complex64"))
def test_dtype_name(name):
    ms_name = "bool_" if name == "bool" else name
    ms_dtype = getattr(mindspore, ms_name)
    assert infer.dtype_name(ms_dtype) == name                        # mindspore.float32
    assert infer.dtype_name(mstype.TensorType(ms_dtype)) == name     # TensorType(Float32)
    assert infer.dtype_name(np.dtype(name)) == name                  # numpy dtype
    assert infer.dtype_name(name) == name                            # string
    assert infer.dtype_name(name.capitalize()) == name               # 'Float32'


def test_dtype_name_of_tensor_dtype():
    tensor = mindspore.Tensor(np.zeros((2,), np.float16))
    assert infer.dtype_name(tensor.dtype) == "float16"


@pytest.mark.parametrize("name", ["float32", "int32"])
def test_dtype_name_numpy_scalar_type(name):
    assert infer.dtype_name(getattr(np, name)) == name


# ------------------------------------------------------------------ use_locking

@pytest.mark.parametrize("op", ALL_OPS)
def test_use_locking_bool(op):
    assert infer.check_use_locking(op, True) is True
    assert infer.check_use_locking(op, False) is False


@pytest.mark.parametrize("value,type_name", [(1, "int"), (0, "int"), (None, "NoneType"), ("True", "str"),
                                             (1.0, "float"), (np.bool_(True), "bool_"),
                                             (mindspore.Tensor(True), "Tensor")])
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdUpdate", "TensorScatterMin"])
def test_use_locking_not_bool(op, value, type_name):
    with pytest.raises(TypeError, match=rf"^For '{op}', 'use_locking' must be a bool, but got {type_name}\.$"):
        infer.check_use_locking(op, value)


# ------------------------------------------------------------------ dtype errors

@pytest.mark.parametrize("op", ALL_OPS)
@pytest.mark.parametrize("bad", ["float32", "int16", "bool", "uint8", "float64", "int8"])
def test_indices_dtype_error(op, bad):
    ms_bad = getattr(mindspore, "bool_" if bad == "bool" else bad)
    for given in (bad, ms_bad, np.dtype(bad)):
        with pytest.raises(TypeError, match=rf"^For '{op}', the dtype of 'indices' must be int32 or int64, "
                                            rf"but got {bad}\.$"):
            infer.scatter_dtype(op, "float32", given, "float32")


@pytest.mark.parametrize("op", ALL_OPS)
@pytest.mark.parametrize("bad", ["bool", "complex64", "complex128", "float8_e4m3fn", "int4"])
def test_x_dtype_error(op, bad):
    """Update also copies bool and the complex types (infer.COPY_DTYPES); nothing takes the rest."""
    if op.endswith("Update") and bad in infer.COPY_DTYPES:
        assert infer.scatter_dtype(op, bad, "int32", bad) == bad
        return
    allowed = re.escape(", ".join(infer.value_dtypes(op)))
    with pytest.raises(TypeError, match=rf"^For '{op}', the dtype of 'input_x' must be one of {allowed}, "
                                        rf"but got {bad}\.$"):
        infer.scatter_dtype(op, bad, "int32", bad)


def test_value_dtypes_by_operator():
    for op, record in infer.OPERATORS.items():
        assert op == record.name == record.family + record.reduction
        expected = infer.VALUE_DTYPES + (infer.COPY_DTYPES if record.reduction == "Update" else ())
        assert infer.value_dtypes(op) == expected, op
    assert len(infer.OPERATORS) == len(infer.FAMILIES) * len(infer.REDUCTIONS)


# What each family is, written out once more by hand: the table must say the same.
_FAMILY_FACTS = {"Scatter": (True, True), "ScatterNd": (True, False), "TensorScatter": (False, False)}


@pytest.mark.parametrize("op", sorted(infer.OPERATORS))
def test_operator_record(op):
    record = infer.operator(op)
    assert (record.in_place, record.depth_one) == _FAMILY_FACTS[record.family]
    assert record.function == infer.function_name(op)
    assert record.copies == (record.reduction == "Update")
    assert record.needs_input == (record.reduction in ("Mul", "Max", "Min"))
    assert infer.operator(record.nd).family == "ScatterNd" and infer.operator(record.nd).reduction == record.reduction
    assert not infer.operator(record.tensor).in_place and infer.operator(record.tensor).reduction == record.reduction
    assert record.min_indices_rank == (2 if not record.in_place else 1)


def test_unknown_operator_is_a_value_error():
    with pytest.raises(ValueError, match="unknown scatter operator 'ScatterFoo'"):
        infer.operator("ScatterFoo")


@pytest.mark.parametrize("ms_name,name", [("bool_", "bool"), ("complex64", "complex64"), ("complex128", "complex128")])
def test_x_dtype_error_mindspore(ms_name, name):
    ms_dtype = getattr(mindspore, ms_name)
    with pytest.raises(TypeError, match=rf"^For 'ScatterMax', the dtype of 'input_x' must be one of .*, "
                                        rf"but got {name}\.$"):
        infer.scatter_dtype("ScatterMax", ms_dtype, mindspore.int64, ms_dtype)


@pytest.mark.parametrize("op", ALL_OPS)
@pytest.mark.parametrize("x_dtype", infer.VALUE_DTYPES)
def test_updates_dtype_error(op, x_dtype):
    for u_dtype in infer.VALUE_DTYPES + ("bool",):
        if u_dtype == x_dtype:
            continue
        with pytest.raises(TypeError, match=rf"^For '{op}', the dtype of 'updates' must be the dtype of "
                                            rf"'input_x' \({x_dtype}\), but got {u_dtype}\.$"):
            infer.scatter_dtype(op, x_dtype, "int64", u_dtype)


# ------------------------------------------------------------------ in-place implicit conversion

# (input_x, updates) float pairs the in-place ops refuse (input_x would need converting).
WIDER_FLOAT_UPDATES = [("float32", "float64"), ("float16", "float32"), ("float16", "float64"),
                       ("bfloat16", "float32"), ("bfloat16", "float64"), ("bfloat16", "float16"),
                       ("float16", "bfloat16")]


@pytest.mark.parametrize("x_dtype,u_dtype", WIDER_FLOAT_UPDATES)
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterNdUpdate"])
def test_wider_float_updates_hint(op, x_dtype, u_dtype):
    """The refusal names the cast that fixes the call, to the Parameter's own dtype."""
    target = infer.promote(x_dtype, u_dtype)
    ms_name = {"bfloat16": "BFloat16"}.get
    for x_given, u_given in ((x_dtype, u_dtype), (getattr(mindspore, x_dtype), getattr(mindspore, u_dtype))):
        with pytest.raises(infer.ScatterTypeError) as info:
            infer.in_place_updates_dtype(op, x_given, u_given)
        assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)
        assert str(info.value) == (
            f"For '{op}', Data type conversion is not supported for a 'Parameter', nor for the input tensor of an "
            f"in-place operator, the argument[input_x]'s data type of primitive[{op}] is "
            f"{ms_name(x_dtype, x_dtype.capitalize())}, which cannot be converted to data type "
            f"{ms_name(target, target.capitalize())} automatically. "
            f"Cast the updates: ops.cast(updates, mindspore.{x_dtype}).")
        assert hasattr(mindspore, x_dtype)  # the hint names a real MindSpore dtype
        assert infer.in_place_updates_dtype(op, x_dtype, x_dtype) == x_dtype  # what the cast gives: accepted


@pytest.mark.parametrize("x_dtype,u_dtype", [("int32", "float32"), ("int8", "int32"), ("int32", "int64"),
                                             ("uint8", "int8"), ("int16", "float16")])
def test_other_refused_conversions_no_cast_hint(x_dtype, u_dtype):
    """Only a float into a float gets the cast hint (a cast of floats into an integer Parameter
    would drop their fractions)."""
    with pytest.raises(infer.ScatterTypeError,
                       match=r"^For 'ScatterSub', Data type conversion is not supported for a 'Parameter'.* "
                             r"automatically\.$"):
        infer.in_place_updates_dtype("ScatterSub", x_dtype, u_dtype)


@pytest.mark.parametrize("x_dtype,u_dtype", [("float32", "float16"), ("float64", "float32"), ("float32", "int64"),
                                             ("float32", "bfloat16"), ("float16", "float16")])
def test_narrower_updates_converted(x_dtype, u_dtype):
    assert infer.in_place_updates_dtype("ScatterNdAdd", x_dtype, u_dtype) == x_dtype


def test_dtype_checks_order():
    # indices first, then input_x, then updates
    with pytest.raises(TypeError, match="'indices'"):
        infer.scatter_dtype("ScatterAdd", "bool", "float32", "int8")
    with pytest.raises(TypeError, match="'input_x'"):
        infer.scatter_dtype("ScatterAdd", "bool", "int32", "int8")
    with pytest.raises(TypeError, match="'updates'"):
        infer.scatter_dtype("ScatterAdd", "int8", "int32", "bool")


def test_infer_checks_dtype_before_shape():
    with pytest.raises(TypeError, match="^For 'ScatterNdAdd', the dtype of 'indices'"):
        infer.infer("ScatterNdAdd", "ScatterNd", (5, 3), (4, 9), (1,), "float32", "float32", "float32")
    with pytest.raises(ValueError, match="^For 'ScatterNdAdd', the last dimension of 'indices'"):
        infer.infer("ScatterNdAdd", "ScatterNd", (5, 3), (4, 9), (1,), "float32", "int32", "float32")


# ------------------------------------------------------------------ shape errors

# (x shape, indices shape, updates shape, expected updates shape as printed)
BAD_UPDATES_SCATTER = [
    ((5, 3), (4,), (4, 2), "(4, 3)"),
    ((5, 3), (4,), (3, 3), "(4, 3)"),
    ((5, 3), (4,), (4,), "(4, 3)"),
    ((5, 3), (4,), (4, 3, 1), "(4, 3)"),
    ((5, 3), (2, 2), (4, 3), "(2, 2, 3)"),
    ((5, 3), (), (1, 3), "(3,)"),
    ((5,), (), (1,), "()"),
    ((5,), (4,), (), "(4,)"),
    ((5, 3, 2), (6,), (6, 2, 3), "(6, 3, 2)"),
    ((-1, 3), (4,), (4, 2), "(4, 3)"),       # known parts are still checked
    ((5, 3), (-1,), (4, 3, 1), r"(-1, 3)"),
]

BAD_UPDATES_ND = [
    ((5, 3), (4, 2), (4, 3), "(4,)"),
    ((5, 3), (4, 2), (3,), "(4,)"),
    ((5, 3), (4, 1), (4,), "(4, 3)"),
    ((5, 3), (4, 1), (4, 2), "(4, 3)"),
    ((5, 3), (2, 3, 2), (6,), "(2, 3)"),
    ((4, 3, 2), (5, 2), (5, 3), "(5, 2)"),
    ((4, 3, 2), (5, 3), (5, 1), "(5,)"),
    ((7,), (5, 1), (5, 1), "(5,)"),
    ((-1, 3), (4, 1), (4, 2), "(4, 3)"),
]

BAD_UPDATES_ND_RANK1 = [  # (1-D indices that reshape(-1, 1) would not make valid: no hint)
    ((5, 3), (2,), (1,), "()"),
    ((5, 3), (2,), (3, 3), "()"),
]


def _bad_update_cases():
    for family in infer.FAMILIES:
        table = BAD_UPDATES_SCATTER if family == "Scatter" else \
            BAD_UPDATES_ND + (BAD_UPDATES_ND_RANK1 if family == "ScatterNd" else [])
        for case in table:
            yield pytest.param(family, *case, id=f"{family}-x{case[0]}-i{case[1]}-u{case[2]}")


@pytest.mark.parametrize("family,x_shape,indices_shape,updates_shape,expected", list(_bad_update_cases()))
def test_updates_shape_error(family, x_shape, indices_shape, updates_shape, expected):
    rule = "indices.shape + input_x.shape[1:]" if family == "Scatter" else \
        "indices.shape[:-1] + input_x.shape[indices.shape[-1]:]"
    for op in FAMILY_OPS[family]:
        pattern = (rf"^For '{op}', the shape of 'updates' must be {re.escape(rule)} = {re.escape(expected)} "
                   rf"\(indices {re.escape(str(tuple(indices_shape)))}, input_x {re.escape(str(tuple(x_shape)))}\), "
                   rf"but got {re.escape(str(tuple(updates_shape)))}\.$")
        with pytest.raises(ValueError, match=pattern):
            shape_of(family, op, x_shape, indices_shape, updates_shape)


@pytest.mark.parametrize("indices_shape", [(2,), (1,), (0,), ()])
@pytest.mark.parametrize("op", FAMILY_OPS["TensorScatter"])
def test_tensor_scatter_indices_rank(op, indices_shape):
    updates_shape = () if indices_shape == (2,) else (3,)
    with pytest.raises(ValueError, match=rf"^For '{op}', the rank of 'indices' must be >= 2, but got "
                                         rf"{len(indices_shape)} \(shape {re.escape(str(indices_shape))}\)\.$"):
        shape_of("TensorScatter", op, (5, 3), indices_shape, updates_shape)


@pytest.mark.parametrize("op", FAMILY_OPS["ScatterNd"])
def test_scatter_nd_indices_rank(op):
    with pytest.raises(ValueError,
                       match=rf"^For '{op}', the rank of 'indices' must be >= 1, but got 0 \(shape \(\)\)\.$"):
        shape_of("ScatterNd", op, (5, 3), (), (3,))


@pytest.mark.parametrize("x_shape,indices_shape,updates_shape", [
    ((5, 3), (4, 3), (4,)),
    ((5,), (4, 2), (4,)),
    ((4, 3, 2), (2, 4), (2,)),
    ((4, 3, 2), (2, 2, 7), (2, 2)),
    ((-1, -1), (4, 3), (4,)),
])
@pytest.mark.parametrize("family", ["ScatterNd", "TensorScatter"])
def test_depth_greater_than_rank(family, x_shape, indices_shape, updates_shape):
    for op in FAMILY_OPS[family]:
        pattern = (rf"^For '{op}', the last dimension of 'indices' must be <= the rank of 'input_x' "
                   rf"\({len(x_shape)}\), but got {indices_shape[-1]} \(indices {re.escape(str(indices_shape))}, "
                   rf"input_x {re.escape(str(x_shape))}\)\.$")
        with pytest.raises(ValueError, match=pattern):
            shape_of(family, op, x_shape, indices_shape, updates_shape)


def test_scatter_nd_rank1_depth_too_large():
    with pytest.raises(ValueError, match=r"^For 'ScatterNdMax', the last dimension of 'indices' must be <= "
                                         r"the rank of 'input_x' \(2\), but got 3 "):
        shape_of("ScatterNd", "ScatterNdMax", (5, 3), (3,), ())


# 1-D indices given to ScatterNd*/TensorScatter* where indices.reshape(-1, 1) would make the
# call valid: the error ends with infer.ROWS_HINT. (family, x shape, indices shape, updates
# shape, the error's own text before the hint)
ROWS_HINT_CASES = [
    ("TensorScatter", (5, 3), (2,), (2, 3), "the rank of 'indices' must be >= 2, but got 1 (shape (2,))."),
    ("TensorScatter", (7,), (4,), (4,), "the rank of 'indices' must be >= 2, but got 1 (shape (4,))."),
    ("TensorScatter", (5, 3), (0,), (0, 3), "the rank of 'indices' must be >= 2, but got 1 (shape (0,))."),
    ("TensorScatter", (5, 3), (-1,), (4, 3), "the rank of 'indices' must be >= 2, but got 1 (shape (-1,))."),
    ("ScatterNd", (5, 3), (2,), (2, 3),
     "the shape of 'updates' must be indices.shape[:-1] + input_x.shape[indices.shape[-1]:] = () "
     "(indices (2,), input_x (5, 3)), but got (2, 3)."),
    ("ScatterNd", (5, 3), (1,), (1, 3),
     "the shape of 'updates' must be indices.shape[:-1] + input_x.shape[indices.shape[-1]:] = (3,) "
     "(indices (1,), input_x (5, 3)), but got (1, 3)."),
    ("ScatterNd", (7,), (1,), (1,),
     "the shape of 'updates' must be indices.shape[:-1] + input_x.shape[indices.shape[-1]:] = () "
     "(indices (1,), input_x (7,)), but got (1,)."),
    ("ScatterNd", (5, 3), (3,), (3, 3),
     "the last dimension of 'indices' must be <= the rank of 'input_x' (2), but got 3 (indices (3,), "
     "input_x (5, 3))."),
    ("ScatterNd", (4, 3, 2), (5,), (5, 3, 2),
     "the last dimension of 'indices' must be <= the rank of 'input_x' (3), but got 5 (indices (5,), "
     "input_x (4, 3, 2))."),
]


@pytest.mark.parametrize("family,x_shape,indices_shape,updates_shape,text", ROWS_HINT_CASES,
                         ids=[f"{c[0]}-x{c[1]}-i{c[2]}-u{c[3]}" for c in ROWS_HINT_CASES])
def test_one_dimensional_indices_hint(family, x_shape, indices_shape, updates_shape, text):
    assert infer.ROWS_HINT == "To index rows with a 1-D tensor, pass indices.reshape(-1, 1)."
    for op in FAMILY_OPS[family]:
        with pytest.raises(ValueError, match=rf"^For '{op}', {re.escape(text)} {re.escape(infer.ROWS_HINT)}$"):
            shape_of(family, op, x_shape, indices_shape, updates_shape)
        # the hint is right: the reshaped indices make the call valid
        assert shape_of(family, op, x_shape, (indices_shape[0], 1), updates_shape) == x_shape


@pytest.mark.parametrize("family,x_shape,indices_shape,updates_shape", [
    ("TensorScatter", (5, 3), (2,), (3, 3)),      # reshaped: updates must be (2, 3)
    ("TensorScatter", (5, 3), (2,), ()),
    ("TensorScatter", (5, 3), (), (3,)),          # 0-d indices
    ("ScatterNd", (5, 3), (3,), ()),              # reshaped: updates must be (3, 3)
    ("ScatterNd", (5, 3), (2,), (1,)),
    ("ScatterNd", (5, 3), (), (3,)),
    ("ScatterNd", (5, 3), (2, 1), (2,)),          # 2-D indices: never the hint
    ("TensorScatter", (5, 3), (2, 1), (3, 3)),
    ("TensorScatter", (5,), (2, 3), (2,)),
])
def test_no_hint_where_reshape_would_not_help(family, x_shape, indices_shape, updates_shape):
    for op in FAMILY_OPS[family]:
        with pytest.raises(ValueError) as info:
            shape_of(family, op, x_shape, indices_shape, updates_shape)
        assert "reshape" not in str(info.value) and str(info.value).endswith(".")


@pytest.mark.parametrize("op", FAMILY_OPS["Scatter"])
def test_scatter_first_axis_never_hints(op):
    """Scatter* take 1-D indices as row numbers already: none of their errors carries the hint."""
    with pytest.raises(ValueError) as info:
        shape_of("Scatter", op, (5, 3), (2,), (3, 3))
    assert "reshape" not in str(info.value)


@pytest.mark.parametrize("op", FAMILY_OPS["Scatter"])
@pytest.mark.parametrize("indices_shape,updates_shape", [((), ()), ((2,), (2,)), ((0,), (0,))])
def test_scatter_0d_x(op, indices_shape, updates_shape):
    """A 0-d input_x is one element along its first axis (as MindSpore's built-ins):
    updates take the shape of indices."""
    assert shape_of("Scatter", op, (), indices_shape, updates_shape) == ()
    with pytest.raises(ValueError, match=rf"^For '{op}', the shape of 'updates' must be"):
        shape_of("Scatter", op, (), indices_shape, updates_shape + (1,))


@pytest.mark.parametrize("family", infer.FAMILIES)
def test_rank_limit(family):
    """Any rank up to infer.MAX_RANK; above it a ValueError that states the limit."""
    op = family + "Add"
    r = infer.MAX_RANK
    x = (1,) * r
    idx = (2, r) if family != "Scatter" else (2,)
    upd = (2,) if family != "Scatter" else (2,) + x[1:]
    assert shape_of(family, op, x, idx, upd) == x
    with pytest.raises(ValueError, match=rf"^For '{op}', the rank of 'input_x' must be <= {r}, but got {r + 1}\.$"):
        shape_of(family, op, (1,) * (r + 1), idx, upd)


@pytest.mark.parametrize("op", ALL_OPS)
def test_infer_errors_name_the_op(op):
    """infer() with each op's own family: every error carries that op's name."""
    family = next(f for f in sorted(infer.FAMILIES, key=len, reverse=True) if op.startswith(f))
    x_shape, good_i, good_u = ((5, 3), (4,), (4, 3)) if family == "Scatter" else ((5, 3), (4, 2), (4,))
    assert infer.infer(op, family, x_shape, good_i, good_u, "int8", "int32", "int8") == (x_shape, "int8")
    prefix = rf"^For '{op}', "
    with pytest.raises(TypeError, match=prefix + "the dtype of 'indices'"):
        infer.infer(op, family, x_shape, good_i, good_u, "int8", "bool", "int8")
    with pytest.raises(TypeError, match=prefix + "the dtype of 'input_x'"):
        infer.infer(op, family, x_shape, good_i, good_u, "int4", "int64", "int4")
    with pytest.raises(TypeError, match=prefix + "the dtype of 'updates'"):
        infer.infer(op, family, x_shape, good_i, good_u, "float32", "int64", "float16")
    with pytest.raises(ValueError, match=prefix + "the shape of 'updates'"):
        infer.infer(op, family, x_shape, good_i, (9,), "float32", "int64", "float32")
