"""Shape and dtype inference for the whole scatter family.

Pure functions: no MindSpore import, no device look-up. Every primitive calls these, and
the unit tests exercise them alone (tests/test_infer.py). Errors use MindSpore's types
and one wording: ``For 'ScatterAdd', ... but got ...``.

Shapes are tuples of ints; -1 marks an unknown dimension and a shape containing -2 an
unknown rank (MindSpore's dynamic shapes); unknown parts are not checked here (the
kernel checks them again at launch). Dtypes may be MindSpore dtypes, tensor types,
numpy dtypes or names.
"""
from typing import NamedTuple

VALUE_DTYPES = ("float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "uint16",
                "uint32", "uint64")
# Update alone (no arithmetic) also takes these, as bit copies (kernels/include/ms_scatter/dtypes.h:
# MS_SCATTER_COPY_DTYPES); MindSpore's Tensor index assignment (mask[i] = True) is TensorScatterUpdate.
COPY_DTYPES = ("bool", "complex64", "complex128")
INDEX_DTYPES = ("int32", "int64")
MAX_RANK = 64  # of any argument (kernels/include/ms_scatter/plan.h: kMaxRank)

# The families: reduction x index mode. Scatter* index the first axis of a Parameter,
# ScatterNd* take the last axis of `indices` as an index vector into a Parameter,
# TensorScatter* do the same out of place.
REDUCTIONS = ("Add", "Sub", "Mul", "Div", "Max", "Min", "Update")
FAMILIES = ("Scatter", "ScatterNd", "TensorScatter")


class Family(NamedTuple):
    """What a family is: in place on a Parameter or not; ``depth_one``: each index names a
    row of axis 0 (Scatter*), else the last axis of `indices` is an index vector;
    ``min_indices_rank`` of the vector families."""
    name: str
    in_place: bool
    depth_one: bool
    min_indices_rank: int


class Reduction(NamedTuple):
    """What a reduction is: ``copies``: no arithmetic, every dtype moves as bits (Update);
    ``needs_input``: its gradient needs input_x's slots before the write (Mul, Max, Min)."""
    name: str
    copies: bool
    needs_input: bool


FAMILY = {f.name: f for f in (Family("Scatter", True, True, 1), Family("ScatterNd", True, False, 1),
                              Family("TensorScatter", False, False, 2))}
REDUCTION = {r: Reduction(r, r == "Update", r in ("Mul", "Max", "Min")) for r in REDUCTIONS}


class Operator(NamedTuple):
    """One operator's record: every module asks this table what an operator is, instead of
    parsing its name or testing its family's name."""
    family: str
    reduction: str
    name: str
    function: str  # the functional form: scatter_nd_add
    in_place: bool
    depth_one: bool
    min_indices_rank: int
    copies: bool
    needs_input: bool
    nd: str  # ScatterNd<R>: the in-place operator at depth d + 1 (vmap batches through it)
    tensor: str  # TensorScatter<R>: the out-of-place operator of the same reduction


def function_name(op):
    """The functional form's name: ScatterNdAdd -> scatter_nd_add."""
    return "".join("_" + ch.lower() if ch.isupper() else ch for ch in op).lstrip("_")


def _record(family, reduction):
    fam, red = FAMILY[family], REDUCTION[reduction]
    name = family + reduction
    return Operator(family, reduction, name, function_name(name), fam.in_place, fam.depth_one,
                    fam.min_indices_rank, red.copies, red.needs_input, "ScatterNd" + reduction,
                    "TensorScatter" + reduction)


# Every operator by name.
OPERATORS = {family + reduction: _record(family, reduction) for family in FAMILIES for reduction in REDUCTIONS}


def operator(op):
    """The record of operator `op` ('ScatterAdd'); ValueError for any other name."""
    record = OPERATORS.get(op)
    if record is None:
        raise ValueError(f"unknown scatter operator {op!r}")
    return record


# The segment operators (MindSpore's unsorted_segment_*): each is the engine's first-axis
# scatter of input_x's rows, out of place, into num_segments rows filled with the reduction's
# identity, a negative id dropping its row (kernels: UnsortedSegment<S>, IndexMode::kSegment).
# Their engine family: out of place, depth one (the kernel's inputs: the filled output,
# segment_ids, input_x).
FAMILY["UnsortedSegment"] = Family("UnsortedSegment", False, True, 0)


class SegmentOperator(NamedTuple):
    """One segment operator's record: its engine reduction and the fill of an empty segment
    (the reduction's identity: "zero", "one", or the dtype's "lowest" / "highest" value)."""
    name: str
    function: str
    reduction: str
    fill: str


SEGMENT_OPERATORS = {r.name: r for r in (
    SegmentOperator("UnsortedSegmentSum", "unsorted_segment_sum", "Add", "zero"),
    SegmentOperator("UnsortedSegmentProd", "unsorted_segment_prod", "Mul", "one"),
    SegmentOperator("UnsortedSegmentMax", "unsorted_segment_max", "Max", "lowest"),
    SegmentOperator("UnsortedSegmentMin", "unsorted_segment_min", "Min", "highest"))}


# MindSpore's scatter_nd: TensorScatterAdd into the zeros of `shape`, under its own name
# (kernels: entry ScatterNd).
SCATTER_ND = "ScatterNd"

# The operators whose kernel is one out-of-place entry point of their own name.
OWN_ENTRY_OPERATORS = tuple(SEGMENT_OPERATORS) + (SCATTER_ND,)


def segment_shape(op, x_shape, ids_shape, num_segments):
    """unsorted_segment_*: segment_ids.shape is a prefix of input_x.shape; the output is
    (num_segments,) + input_x.shape[segment_ids.ndim:]. num_segments: an int > 0, or None in a
    graph where it is known only at run time (the output's first dimension is then -1)."""
    x_shape, ids_shape = tuple(x_shape), tuple(ids_shape)
    if num_segments is None:
        num_segments = -1
    elif isinstance(num_segments, bool) or not isinstance(num_segments, int):
        raise op_error(TypeError, op, f"'num_segments' must be an int (or a 0-d integer Tensor whose value is "
                                      f"known), but got {type(num_segments).__name__}.")
    elif num_segments <= 0:
        raise op_error(ValueError, op, f"'num_segments' must be greater than 0, but got {num_segments}.")
    for name, shape in (("input_x", x_shape), ("segment_ids", ids_shape)):
        check_rank(op, name, shape)
    if not (_rank_known(x_shape) and _rank_known(ids_shape)):
        return (-2,)
    if len(ids_shape) > len(x_shape) or not _same_shape(x_shape[:len(ids_shape)], ids_shape):
        raise op_error(ValueError, op, f"the shape of 'segment_ids' must be a prefix of the shape of 'input_x' "
                                       f"{_fmt(x_shape)}, but got {_fmt(ids_shape)}.")
    return (num_segments,) + x_shape[len(ids_shape):]


SEGMENT_REDUCES = ("sum", "mean", "max", "min", "prod")


def check_segment_reduce(op, reduce):
    """segment_reduce / segment_csr: `reduce` one of SEGMENT_REDUCES."""
    if reduce not in SEGMENT_REDUCES:
        raise op_error(ValueError, op, f"'reduce' must be one of {', '.join(SEGMENT_REDUCES)}, but got {reduce!r}.")


def segment_rows_shape(op, src_shape, ids_shape, num_segments):
    """segment_reduce, segment_argmax/argmin, segment_softmax: `segment_ids` 1-D, one id per row
    of `src` (rank >= 1); returns the reduced shape (num_segments,) + src.shape[1:]."""
    src_shape, ids_shape = tuple(src_shape), tuple(ids_shape)
    if _rank_known(ids_shape) and len(ids_shape) != 1:
        raise op_error(ValueError, op, f"'segment_ids' must be 1-D (one id per row of 'src'), but got shape "
                                       f"{_fmt(ids_shape)}.")
    if _rank_known(src_shape) and not src_shape:
        raise op_error(ValueError, op, "'src' must have rank >= 1 (rows), but got shape ().")
    return segment_shape(op, src_shape, ids_shape, num_segments)


def segment_dtype(op, x_dtype, ids_dtype, names=("input_x", "segment_ids")):
    """input_x one of VALUE_DTYPES, segment_ids int32/int64; the output has input_x's dtype.
    `names`: what the messages call the two (segment_csr: src and indptr)."""
    x_name, i_name = dtype_name(x_dtype), dtype_name(ids_dtype)
    if i_name not in INDEX_DTYPES:
        raise op_error(TypeError, op, f"the dtype of '{names[1]}' must be int32 or int64, but got {i_name}.")
    if x_name not in VALUE_DTYPES:
        raise op_error(TypeError, op,
                       f"the dtype of '{names[0]}' must be one of {', '.join(VALUE_DTYPES)}, but got {x_name}.")
    return x_name


def segment_csr_shape(op, src_shape, indptr_shape):
    """segment_csr: `indptr` 1-D of a length K + 1 >= 1 known when a graph compiles, `src` of
    rank >= 1; returns (K,) + src.shape[1:] (segment k: rows indptr[k]:indptr[k + 1])."""
    src_shape, indptr_shape = tuple(src_shape), tuple(indptr_shape)
    check_rank(op, "src", src_shape)
    if not _rank_known(indptr_shape) or len(indptr_shape) != 1 or indptr_shape[0] < 1:
        raise op_error(ValueError, op, f"'indptr' must be 1-D with at least one element (K + 1 for K segments), "
                                       f"its length known when a graph compiles, but got shape {_fmt(indptr_shape)}.")
    if not _rank_known(src_shape):
        return (-2,)
    if not src_shape:
        raise op_error(ValueError, op, "'src' must have rank >= 1 (rows), but got shape ().")
    return (indptr_shape[0] - 1,) + src_shape[1:]


def check_indptr(op, indptr, rows):
    """segment_csr's `indptr` values (a numpy array): start at 0, never decrease, end at the
    number of rows of `src`."""
    bad = indptr[0] != 0 or indptr[-1] != rows or (indptr[1:] < indptr[:-1]).any()
    if bad:
        shown = indptr.tolist() if indptr.size <= 12 else indptr[:6].tolist() + ["..."] + indptr[-6:].tolist()
        raise op_error(ValueError, op, f"'indptr' must start at 0, never decrease and end at src.shape[0] ({rows}), "
                                       f"but got {shown}.")


def value_dtypes(op):
    """The dtypes an operator's input_x and updates may have."""
    record = OPERATORS.get(op)
    return VALUE_DTYPES + COPY_DTYPES if record is not None and record.copies else VALUE_DTYPES


def op_error(exc_type, op, message):
    """The one error wording: ``For '<op>', <message>``."""
    return exc_type(f"For '{op}', {message}")


class ScatterTypeError(TypeError, RuntimeError):
    """An implicit dtype conversion the call would need but cannot have (the Parameter of an
    in-place op would have to change dtype). MindSpore 2.10 raises TypeError here, its
    documentation says RuntimeError: this is both."""
    __module__ = "ms_scatter"  # shown as ms_scatter.ScatterTypeError in tracebacks


def dtype_name(dtype):
    """'float32' for mindspore.float32, TensorType(Float32), numpy.float32 or 'float32'."""
    if hasattr(dtype, "element_type"):
        dtype = dtype.element_type()
    if isinstance(dtype, type):  # numpy scalar types: numpy.float32
        dtype = dtype.__name__
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if not isinstance(name, str):
        name = str(dtype)
    name = name.lower()
    return {"float": "float32", "double": "float64", "half": "float16", "bool_": "bool"}.get(name, name)


def check_use_locking(op, use_locking):
    if not isinstance(use_locking, bool):
        raise op_error(TypeError, op, f"'use_locking' must be a bool, but got {type(use_locking).__name__}.")
    return use_locking


def check_rank(op, name, shape):
    """Any rank up to MAX_RANK; above it a ValueError that states the limit."""
    if len(shape) > MAX_RANK:
        raise op_error(ValueError, op, f"the rank of '{name}' must be <= {MAX_RANK}, but got {len(shape)}.")


def _rank_known(shape):
    return all(d != -2 for d in shape)


def _fmt(shape):
    return str(tuple(shape))


def _same_shape(expected, got):
    if len(expected) != len(got):
        return False
    return all(e < 0 or g < 0 or e == g for e, g in zip(expected, got))


def scatter_shape(op, x_shape, indices_shape, updates_shape):
    """Scatter* (first axis): updates.shape == indices.shape + x.shape[1:]. Returns x.shape."""
    x_shape, indices_shape, updates_shape = tuple(x_shape), tuple(indices_shape), tuple(updates_shape)
    if not (_rank_known(x_shape) and _rank_known(indices_shape) and _rank_known(updates_shape)):
        return x_shape
    for name, shape in (("input_x", x_shape), ("indices", indices_shape), ("updates", updates_shape)):
        check_rank(op, name, shape)
    expected = indices_shape + x_shape[1:]  # a 0-d input_x is one element along its first axis
    if not _same_shape(expected, updates_shape):
        raise op_error(ValueError, op,
                       f"the shape of 'updates' must be indices.shape + input_x.shape[1:] = {_fmt(expected)} "
                       f"(indices {_fmt(indices_shape)}, input_x {_fmt(x_shape)}), but got {_fmt(updates_shape)}.")
    return x_shape


# The hint of a shape error for 1-D indices that reshape(-1, 1) would make valid (indices of
# shape (N,) read as N one-element index vectors, as the Scatter* family reads them).
ROWS_HINT = "To index rows with a 1-D tensor, pass indices.reshape(-1, 1)."


def _scatter_nd_error(x_shape, indices_shape, updates_shape, min_indices_rank, x_name="input_x"):
    """scatter_nd_shape's rule on ranks that are known: None, or (error type, message).
    x_name: what the message calls the shape written into (scatter_nd: 'shape')."""
    if len(indices_shape) < min_indices_rank:
        return ValueError, (f"the rank of 'indices' must be >= {min_indices_rank}, but got {len(indices_shape)} "
                            f"(shape {_fmt(indices_shape)}).")
    depth = indices_shape[-1]
    if depth < 0:
        return None
    if depth > len(x_shape):
        return ValueError, (f"the last dimension of 'indices' must be <= the rank of '{x_name}' ({len(x_shape)}), "
                            f"but got {depth} (indices {_fmt(indices_shape)}, {x_name} {_fmt(x_shape)}).")
    expected = indices_shape[:-1] + x_shape[depth:]
    if not _same_shape(expected, updates_shape):
        where = "input_x.shape" if x_name == "input_x" else x_name
        return ValueError, (f"the shape of 'updates' must be indices.shape[:-1] + {where}[indices.shape[-1]:] = "
                            f"{_fmt(expected)} (indices {_fmt(indices_shape)}, {x_name} {_fmt(x_shape)}), "
                            f"but got {_fmt(updates_shape)}.")
    return None


def scatter_nd_shape(op, x_shape, indices_shape, updates_shape, min_indices_rank=1, x_name="input_x"):
    """ScatterNd*/TensorScatter*: indices[..., :depth] index x's first `depth` axes;
    updates.shape == indices.shape[:-1] + x.shape[depth:]. Returns x.shape. A failure with
    1-D indices that indices.reshape(-1, 1) would make valid ends with ROWS_HINT."""
    x_shape, indices_shape, updates_shape = tuple(x_shape), tuple(indices_shape), tuple(updates_shape)
    if not (_rank_known(x_shape) and _rank_known(indices_shape) and _rank_known(updates_shape)):
        return x_shape
    for name, shape in ((x_name, x_shape), ("indices", indices_shape), ("updates", updates_shape)):
        check_rank(op, name, shape)
    error = _scatter_nd_error(x_shape, indices_shape, updates_shape, min_indices_rank, x_name)
    if error is None:
        return x_shape
    exc_type, message = error
    if len(indices_shape) == 1 and _scatter_nd_error(x_shape, indices_shape + (1,), updates_shape,
                                                     min_indices_rank, x_name) is None:
        message = f"{message} {ROWS_HINT}"
    raise op_error(exc_type, op, message)


def scatter_nd_output_shape(op, indices_shape, updates_shape, shape):
    """scatter_nd: `shape` a non-empty tuple of positive ints, then TensorScatter*'s rule for
    an input_x of that shape. Returns the shape."""
    if isinstance(shape, list):
        shape = tuple(shape)
    if shape is None or isinstance(shape, (int, float)) and not isinstance(shape, bool):
        raise op_error(ValueError if shape is None else TypeError, op,
                       f"'shape' must be a tuple of ints known when the graph compiles, but got {shape!r}.")
    if not isinstance(shape, tuple) or any(isinstance(d, bool) or not isinstance(d, int) for d in shape):
        raise op_error(TypeError, op, f"'shape' must be a tuple of ints, but got {shape!r}.")
    if not shape or any(d <= 0 for d in shape):
        raise op_error(ValueError, op, f"'shape' must be a non-empty tuple of positive ints, but got {shape}.")
    return scatter_nd_shape(op, shape, indices_shape, updates_shape,
                            min_indices_rank=FAMILY["TensorScatter"].min_indices_rank, x_name="shape")


def scatter_nd_dtype(op, indices_dtype, updates_dtype):
    """scatter_nd: indices int32/int64, updates one of VALUE_DTYPES; the output has updates' dtype."""
    i_name, u_name = dtype_name(indices_dtype), dtype_name(updates_dtype)
    if i_name not in INDEX_DTYPES:
        raise op_error(TypeError, op, f"the dtype of 'indices' must be int32 or int64, but got {i_name}.")
    if u_name not in VALUE_DTYPES:
        raise op_error(TypeError, op,
                       f"the dtype of 'updates' must be one of {', '.join(VALUE_DTYPES)}, but got {u_name}.")
    return u_name


def scatter_dtype(op, x_dtype, indices_dtype, updates_dtype):
    """indices int32/int64; input_x one of value_dtypes(op); updates of input_x's dtype
    (MindSpore's signature has already converted a lower-priority updates dtype)."""
    x_name, i_name, u_name = dtype_name(x_dtype), dtype_name(indices_dtype), dtype_name(updates_dtype)
    if i_name not in INDEX_DTYPES:
        raise op_error(TypeError, op, f"the dtype of 'indices' must be int32 or int64, but got {i_name}.")
    allowed = value_dtypes(op)
    if x_name not in allowed:
        raise op_error(TypeError, op,
                       f"the dtype of 'input_x' must be one of {', '.join(allowed)}, but got {x_name}.")
    if u_name != x_name:
        raise op_error(TypeError, op,
                       f"the dtype of 'updates' must be the dtype of 'input_x' ({x_name}), but got {u_name}.")
    return x_dtype


_INT_ORDER = ("bool", "uint8", "int8", "int16", "int32", "int64")
_WIDE_UNSIGNED = ("uint16", "uint32", "uint64")
_FLOAT_ORDER = ("float16", "float32", "float64")
_FLOATS = _FLOAT_ORDER + ("bfloat16",)


def promote(a, b):
    """The dtype MindSpore's implicit conversion gives two tensors of dtypes a and b, or None
    where it has none: the wider of two floats or two integers (uint8 with int8 gives int16),
    the float when one is a float and one an integer (or bool); bfloat16 with float16 gives
    float32; uint16/uint32/uint64 convert only from bool (MindSpore: "Type implicit
    conversion between UInt64 and Int32 is not supported")."""
    a, b = dtype_name(a), dtype_name(b)
    if a == b:
        return a
    if "bool" in (a, b):
        return b if a == "bool" else a
    fa, fb = a in _FLOATS, b in _FLOATS
    if fa and fb:
        if "bfloat16" in (a, b):
            other = b if a == "bfloat16" else a
            return "float32" if other == "float16" else other
        return max(a, b, key=_FLOAT_ORDER.index)
    if fa or fb:
        return a if fa else b
    if a in _WIDE_UNSIGNED or b in _WIDE_UNSIGNED:
        return None
    if {a, b} == {"uint8", "int8"}:
        return "int16"
    if a in _INT_ORDER and b in _INT_ORDER:
        return max(a, b, key=_INT_ORDER.index)
    return None


def cast_hint(x_name):
    """The hint of a refused float conversion: cast the updates to the Parameter's dtype."""
    return f"Cast the updates: ops.cast(updates, mindspore.{x_name})."


def _ms_name(n):
    return "BFloat16" if n == "bfloat16" else "UInt" + n[4:] if n.startswith("uint") else n.capitalize()


def in_place_updates_dtype(op, x_dtype, updates_dtype):
    """In-place ops: updates are converted to input_x's dtype when input_x's is the
    higher one; a conversion that would need input_x (a Parameter) converted, or that
    MindSpore has none for, is refused (ScatterTypeError: a TypeError and a RuntimeError)."""
    x_name, u_name = dtype_name(x_dtype), dtype_name(updates_dtype)
    target = promote(x_name, u_name)
    if target is None:
        raise op_error(ScatterTypeError, op,
                       f"the dtype of 'updates' must be convertible to the dtype of 'input_x' ({x_name}), but got "
                       f"{u_name}: type implicit conversion between {_ms_name(x_name)} and {_ms_name(u_name)} is "
                       f"not supported.")
    if target != x_name:
        message = (f"Data type conversion is not supported for a 'Parameter', nor for the input tensor of an "
                   f"in-place operator, the argument[input_x]'s data type of primitive[{op}] is "
                   f"{_ms_name(x_name)}, which cannot be converted to data type {_ms_name(target)} automatically.")
        if x_name in _FLOATS and u_name in _FLOATS:  # a float into a float: the cast loses only precision
            message += f" {cast_hint(x_name)}"
        raise op_error(ScatterTypeError, op, message)
    return x_name


def family_shape_rule(family):
    """(shape function, extra kwargs) for a family name."""
    fam = FAMILY.get(family)
    if fam is None:
        raise ValueError(f"unknown scatter family {family!r}")
    if fam.depth_one:
        return scatter_shape, {}
    return scatter_nd_shape, {"min_indices_rank": fam.min_indices_rank}


def infer(op, family, x_shape, indices_shape, updates_shape, x_dtype, indices_dtype, updates_dtype):
    """Full inference of one call: returns (output shape, output dtype) = (x.shape, x.dtype)."""
    rule, kwargs = family_shape_rule(family)
    dtype = scatter_dtype(op, x_dtype, indices_dtype, updates_dtype)
    shape = rule(op, x_shape, indices_shape, updates_shape, **kwargs)
    return shape, dtype
