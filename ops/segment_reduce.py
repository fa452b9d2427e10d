"""The segment reductions of the segment contract (shared/SEGMENT_API.md, section 2):
``segment_reduce`` (sum, mean, max, min, prod; ``fill_value``), ``segment_csr`` (the same over
the row ranges of an ``indptr``), ``segment_argmax`` / ``segment_argmin`` and
``segment_softmax``, with their primitives ``SegmentReduce``, ``SegmentCsr``,
``SegmentArgmax``, ``SegmentArgmin``, ``SegmentSoftmax``.

On the CPU each function is one fused kernel (kernels/cpu/message.h: SegmentReduce<R>, the
fill value and mean's count inside; SegmentArgMax/Min then SegmentArgValues; SegmentSoftmax and
its gradient SegmentSoftmaxGrad), the rows grouped by id, each segment's in index order.
Elsewhere each is a few calls of the engine's segment kernels (ops/segment.py: one first-axis
scatter each, negative ids dropped) and elementwise MindSpore ops: a count pass where an empty
segment needs ``fill_value`` (mean's finalize step), a max pass and a min pass of row numbers
for the arg outputs, a max pass and a sum pass for the softmax. An id >= num_segments is an
error before anything is computed. Gradients are the engine's rules (sum, prod with zeros,
max/min ties split evenly): mean's is the sum's divided by the count; softmax's is
``y * (dy - segment_sum(y * dy))``. float16 and bfloat16 are computed in float32.
"""
import numpy as np
from mindspore import Tensor, ops
from mindspore.common import dtype as mstype
from mindspore.ops import constexpr

from . import infer
from ._docs import PLATFORMS
from ._eager import numpy_dtype
from ._graph import GRAPH_METHOD
from ._memo import Memo
from ._kernel import FusedKernel, _known_or_unknown, fused_path, row_count
from .primitives import FUNCTIONS
from .segment import (SEGMENT_FUNCTIONS, FunctionPrimitive, _num_segments_in_graph, _segment_bprop, gather_rows,
                      segment_max_from_inf, segment_min_from_inf)

_SUM = SEGMENT_FUNCTIONS["unsorted_segment_sum"]
_PROD = SEGMENT_FUNCTIONS["unsorted_segment_prod"]
_MAX = segment_max_from_inf  # (a segment of -inf rows has max -inf; MindSpore's gives its lowest value)
_MIN = segment_min_from_inf
_DIV = FUNCTIONS["tensor_scatter_div"]
_HALF = (mstype.float16, mstype.bfloat16)


@constexpr
def _row_vectors(num_segments):
    """The index vectors [[0], [1], ..., [num_segments - 1]]: every row of an (N, ...) tensor."""
    return Tensor(np.arange(num_segments, dtype=np.int32).reshape(-1, 1))


@constexpr
def _check(op, src_shape, ids_shape, num_segments, reduce):
    if reduce is not None:
        infer.check_segment_reduce(op, reduce)
    shape = tuple(-1 if d is None else d for d in src_shape)
    ids = tuple(-1 if d is None else d for d in ids_shape)
    return infer.segment_rows_shape(op, shape, ids, num_segments)


def _check_fill(value, dtype, op="segment_reduce"):
    """An integer dtype's fill_value must be finite and fit the dtype (converting 1000 to int8
    would give -24 without a word); a fraction is truncated toward zero, as a cast does."""
    name = infer.dtype_name(dtype)
    if name.startswith(("int", "uint")):
        info = np.iinfo(name)
        if isinstance(value, bool) or not np.isfinite(value) or not info.min <= int(value) <= info.max:
            raise infer.op_error(ValueError, op, f"'fill_value' must be a number in [{info.min}, {info.max}] for "
                                                 f"src of dtype {name}, but got {value!r}.")


@constexpr
def _scalar(value, dtype):
    """`value` as a 0-d Tensor of `dtype` (bfloat16: float32): exact in a graph, where a Python
    float would pass through float32."""
    _check_fill(value, dtype)
    return Tensor(value, mstype.float32 if dtype == mstype.bfloat16 else dtype)


@constexpr
def _is_float(dtype):
    return dtype in (mstype.float16, mstype.float32, mstype.float64, mstype.bfloat16)


def _per_segment(values, like):
    """An (N,) tensor broadcast against `like` of shape (N,) + trailing dims."""
    return ops.reshape(values, values.shape + (1,) * (like.ndim - 1))


def _kept_rows(segment_ids):
    """(ids with the dropped rows at 0, the bool mask of kept rows)."""
    kept = segment_ids >= 0
    return ops.select(kept, segment_ids, ops.zeros_like(segment_ids)), kept


def _counts(segment_ids, num_segments):
    return _SUM(ops.ones_like(segment_ids).astype(mstype.int32), segment_ids, num_segments)  # (exact)


@constexpr
def _mean_dtype(dtype):
    """A mean's sum: float32 for the 16-bit floats, 64 bits for the integers (their mean always
    fits the dtype, their sum need not)."""
    if dtype in _HALF:
        return mstype.float32
    if dtype in (mstype.int8, mstype.int16, mstype.int32):
        return mstype.int64
    if dtype in (mstype.uint8, mstype.uint16, mstype.uint32):
        return mstype.uint64
    return dtype


def _filled_where_empty(out, counts, fill_value):
    dtype = out.dtype
    work = ops.cast(out, mstype.float32) if dtype == mstype.bfloat16 else out  # no bfloat16 Select on the CPU
    fill = ops.broadcast_to(ops.cast(_scalar(fill_value, dtype), work.dtype), work.shape)
    return ops.cast(ops.select(ops.broadcast_to(_per_segment(counts == 0, work), work.shape), fill, work), dtype)


def _segments_shape(shapes):
    """(N,) + src.shape[1:] from (src, segment_ids, rows, ...): a fused kernel's output shape."""
    return shapes[2][:1] + shapes[0][1:]


def _reduction_gradient(rule, mean, src, segment_ids, counts, out, dout):
    """d src of a fused reduction: the engine's rule of the reduction (ops/segment.py; mean:
    the sum's, of dout divided by each segment's count)."""
    if mean:
        compute = mstype.float32 if dout.dtype in _HALF else dout.dtype
        scale = ops.cast(_per_segment(ops.maximum(counts, ops.ones_like(counts)), dout), compute)
        dout = ops.cast(ops.cast(dout, compute) / scale, dout.dtype)
    return rule(out, segment_ids, src, out, dout)[2]


def _reduce_bprop(reduction, mean):
    rule = _segment_bprop(reduction)

    def bprop(src, segment_ids, rows, fill, out, dout):
        counts = _counts(segment_ids, rows.shape[0]) if mean else None
        return (_reduction_gradient(rule, mean, src, segment_ids, counts, out, dout), ops.zeros_like(segment_ids),
                ops.zeros_like(rows), ops.zeros_like(fill))
    return bprop


def _csr_bprop(reduction, mean):
    """segment_csr's: the segment ids of the rows from indptr (a search pass), then as above."""
    rule = _segment_bprop(reduction)

    def bprop(src, indptr, fill, out, dout):
        ids = ops.searchsorted(indptr[1:], ops.arange(src.shape[0], dtype=indptr.dtype), right=True)
        counts = ops.cast(indptr[1:] - indptr[:-1], mstype.int32) if mean else None
        return (_reduction_gradient(rule, mean, src, ids, counts, out, dout), ops.zeros_like(indptr),
                ops.zeros_like(fill))
    return bprop


def _csr_shape(shapes):
    return (shapes[1][0] - 1,) + shapes[0][1:]


# The fused CPU kernels (kernels/cpu/message.h SegmentReduce<R>): one pass over the rows grouped
# by id, the fill value and mean's count included.
_REDUCE_SUM = FusedKernel("SegmentReduceSum", _reduce_bprop("Add", False), _segments_shape)
_REDUCE_MEAN = FusedKernel("SegmentReduceMean", _reduce_bprop("Add", True), _segments_shape)
_REDUCE_MAX = FusedKernel("SegmentReduceMax", _reduce_bprop("Max", False), _segments_shape)
_REDUCE_MIN = FusedKernel("SegmentReduceMin", _reduce_bprop("Min", False), _segments_shape)
_REDUCE_PROD = FusedKernel("SegmentReduceProd", _reduce_bprop("Mul", False), _segments_shape)
_CSR_SUM = FusedKernel("SegmentCsrSum", _csr_bprop("Add", False), _csr_shape)
_CSR_MEAN = FusedKernel("SegmentCsrMean", _csr_bprop("Add", True), _csr_shape)
_CSR_MAX = FusedKernel("SegmentCsrMax", _csr_bprop("Max", False), _csr_shape)
_CSR_MIN = FusedKernel("SegmentCsrMin", _csr_bprop("Min", False), _csr_shape)
_CSR_PROD = FusedKernel("SegmentCsrProd", _csr_bprop("Mul", False), _csr_shape)


_FILLS = Memo(64)


@constexpr
def _fill_vector(fill_value, dtype, op):
    """fill_value as a (1,) tensor of `dtype` (as numpy converts it: integers truncated toward
    zero), kept per value and dtype: made without launching an op."""
    key = (type(fill_value), fill_value, dtype)
    hit = _FILLS.get(key)
    if hit is None:
        _check_fill(fill_value, dtype, op)
        name = infer.dtype_name(dtype)
        hit = _FILLS.put(key, Tensor(np.array([fill_value], np.float32 if name == "bfloat16" else None)
                                     .astype(numpy_dtype(name))))
    return hit


def _segment_reduce(src, segment_ids, num_segments, reduce, fill_value):
    """segment_reduce's work in both modes (segment_csr's composite calls it with the ids it
    made)."""
    n = _num_segments_in_graph("segment_reduce", num_segments)
    _check("segment_reduce", src.shape, segment_ids.shape, n, reduce)
    dtype = src.dtype
    if fused_path():
        rows, fill = row_count(n), _fill_vector(fill_value, dtype, "segment_reduce")
        if reduce == "sum":
            return _REDUCE_SUM(src, segment_ids, rows, fill)
        if reduce == "mean":
            return _REDUCE_MEAN(src, segment_ids, rows, fill)
        if reduce == "max":
            return _REDUCE_MAX(src, segment_ids, rows, fill)
        if reduce == "min":
            return _REDUCE_MIN(src, segment_ids, rows, fill)
        return _REDUCE_PROD(src, segment_ids, rows, fill)
    work = ops.cast(src, _mean_dtype(dtype)) if reduce == "mean" else src
    if reduce == "sum":
        out = _SUM(work, segment_ids, n)
    elif reduce == "prod":
        out = _PROD(work, segment_ids, n)
    elif reduce == "max":
        out = _MAX(work, segment_ids, n)
    elif reduce == "min":
        out = _MIN(work, segment_ids, n)
    else:
        out = _SUM(work, segment_ids, n)
    if reduce == "sum" and _is_zero(fill_value):
        return out  # the kernel's fill is the identity, 0
    if reduce == "prod" and _is_one(fill_value):
        return out
    counts = _counts(segment_ids, n)
    if reduce == "mean":
        denominator = ops.cast(_per_segment(ops.maximum(counts, ops.ones_like(counts)), out), out.dtype)
        if _is_float(out.dtype):
            out = out / denominator
        else:  # integers: toward zero, by the family's own Div kernel (every integer dtype, exact)
            out = _DIV(out, _row_vectors(n), ops.broadcast_to(denominator, out.shape))
        out = ops.cast(out, dtype)
    return _filled_where_empty(out, counts, fill_value)


def segment_reduce(src, segment_ids, num_segments, reduce="sum", *, fill_value=0,
                   indices_are_sorted=False):  # pylint: disable=unused-argument
    """The rows of `src` reduced per segment id (sum, mean, max, min, prod); see the module
    docstring and docs/api/segment.md."""
    return _REDUCE_PATH(src, segment_ids, num_segments, reduce, fill_value)


@constexpr
def _is_zero(value):
    return not isinstance(value, bool) and value == 0


@constexpr
def _is_one(value):
    return not isinstance(value, bool) and value == 1


def _arg_values_bprop(src, segment_ids, arg, out, dout):  # pylint: disable=unused-argument
    """The values' gradient: the segment max's (ties split evenly), not only the arg row's."""
    return _segment_bprop("Max")(out, segment_ids, src, out, dout)[2], ops.zeros_like(segment_ids), ops.zeros_like(arg)


def _no_gradient(src, segment_ids, rows, out, dout):  # pylint: disable=unused-argument
    return ops.zeros_like(src), ops.zeros_like(segment_ids), ops.zeros_like(rows)


# The fused CPU kernels (kernels/cpu/message.h): the arg in one pass over the rows grouped by
# id, then the values it names.
_ARG_VALUES = FusedKernel("SegmentArgValues", _arg_values_bprop, lambda s: s[2])


def _arg(src, segment_ids, num_segments, reduce, fill_value, op, best, fused):  # pylint: disable=unused-argument
    n = _num_segments_in_graph(op, num_segments)
    _check(op, src.shape, segment_ids.shape, n, None)
    if fused_path():
        arg = fused(src, segment_ids, row_count(n))
        if isinstance(arg, tuple):  # a direct call: the kernel wrote the values in the same pass
            return arg[1], arg[0]
        return _ARG_VALUES(src, segment_ids, arg), arg
    # elsewhere: the segment max (min), then the first row holding it (a min pass of row numbers)
    rows, kept = _kept_rows(segment_ids)
    dtype = src.dtype
    values = best(src, segment_ids, n)
    if dtype == mstype.bfloat16:  # no bfloat16 Gather or Select on the CPU: compared in float32 (exact)
        src, values = ops.cast(src, mstype.float32), ops.cast(values, mstype.float32)
    at_row = ops.gather(values, rows, 0)
    won = src == at_row
    if _is_float(src.dtype):
        won = ops.logical_or(won, ops.logical_and(ops.isnan(src), ops.isnan(at_row)))  # a NaN wins
    won = ops.logical_and(won, ops.broadcast_to(_per_segment(kept, src), src.shape))
    length = src.shape[0]
    number = ops.broadcast_to(_per_segment(ops.arange(length, dtype=mstype.int64), src), src.shape)
    candidates = ops.select(won, number, ops.full_like(number, length))
    arg = ops.minimum(_MIN(candidates, segment_ids, n), ops.full_like(values, length, dtype=mstype.int64))
    values = ops.select(arg == length, ops.zeros_like(values), values)  # an empty segment: 0
    return ops.cast(values, dtype), arg


class _SegmentFunctionPath:
    """A segment function's two paths: a Python call checks that its inputs are Tensors (the
    fused kernel checks the ids: an id >= num_segments is ms_scatter.ScatterIndexError with the
    kernel's message); a graph compiles _ms_graph_method. `function(src, segment_ids,
    num_segments, reduce, fill_value, *extra)` does the work on both."""
    __ms_class__ = True
    __parse_method__ = GRAPH_METHOD

    def __init__(self, op, function, *extra):
        self.op, self.function, self.extra = op, function, extra

    def __call__(self, src, segment_ids, num_segments, reduce=None, fill_value=0):
        for name, value in (("src", src), ("segment_ids", segment_ids)):
            if not isinstance(value, Tensor):
                raise infer.op_error(TypeError, self.op, f"'{name}' must be a Tensor, but got {type(value).__name__}.")
        return self.function(src, segment_ids, num_segments, reduce, fill_value, *self.extra)

    def _ms_graph_method(self, src, segment_ids, num_segments, reduce=None, fill_value=0):
        return self.function(src, segment_ids, num_segments, reduce, fill_value, *self.extra)


_ARGMAX_PATH = _SegmentFunctionPath("segment_argmax", _arg, "segment_argmax", _MAX,
                                    FusedKernel("SegmentArgMax", _no_gradient, _segments_shape, "int64",
                                                also=_segments_shape))
_ARGMIN_PATH = _SegmentFunctionPath("segment_argmin", _arg, "segment_argmin", _MIN,
                                    FusedKernel("SegmentArgMin", _no_gradient, _segments_shape, "int64",
                                                also=_segments_shape))


def segment_argmax(src, segment_ids, num_segments):
    """(values, arg): the max of each segment and the row of `src` that won (the first in index
    order among ties, a NaN winning; an empty segment: value 0, arg E = src.shape[0])."""
    return _ARGMAX_PATH(src, segment_ids, num_segments)


def segment_argmin(src, segment_ids, num_segments):
    """(values, arg): as segment_argmax, for the min."""
    return _ARGMIN_PATH(src, segment_ids, num_segments)


def _softmax_bprop(src, segment_ids, rows, out, dout):  # pylint: disable=unused-argument
    return _SOFTMAX_GRAD(out, dout, segment_ids, rows), ops.zeros_like(segment_ids), ops.zeros_like(rows)


_SOFTMAX = FusedKernel("SegmentSoftmax", _softmax_bprop, lambda s: s[0])
_SOFTMAX_GRAD = FusedKernel("SegmentSoftmaxGrad", None, lambda s: s[0])


@constexpr
def _check_float(op, dtype):
    if not _is_float(dtype):
        raise infer.op_error(TypeError, op, f"the dtype of 'src' must be float16, float32, float64 or bfloat16, but "
                                            f"got {infer.dtype_name(dtype)}.")


def _softmax(src, segment_ids, num_segments, reduce=None, fill_value=0):  # pylint: disable=unused-argument
    """The softmax of the rows of each segment, per trailing element, shifted by the segment's
    max (no overflow for large logits); a row with a negative id gives 0."""
    n = _num_segments_in_graph("segment_softmax", num_segments)
    _check("segment_softmax", src.shape, segment_ids.shape, n, None)
    _check_float("segment_softmax", src.dtype)
    if fused_path():  # one kernel (kernels/cpu/message.h), its gradient another
        return _SOFTMAX(src, segment_ids, row_count(n))
    dtype = src.dtype
    x = ops.cast(src, mstype.float32) if dtype in _HALF else src
    rows, kept = _kept_rows(segment_ids)
    keep = ops.broadcast_to(_per_segment(kept, x), x.shape)
    shift = ops.gather(_MAX(ops.stop_gradient(x), segment_ids, n), rows, 0)
    e = ops.select(keep, ops.exp(ops.select(keep, x - shift, ops.zeros_like(x))), ops.zeros_like(x))
    total = gather_rows(_SUM(e, segment_ids, n), rows)  # (its gradient: our segment sum)
    y = e / ops.select(keep, total, ops.ones_like(total))
    return ops.cast(y, dtype)


_SOFTMAX_PATH = _SegmentFunctionPath("segment_softmax", _softmax)
_REDUCE_PATH = _SegmentFunctionPath("segment_reduce", _segment_reduce)


def segment_softmax(src, segment_ids, num_segments):
    """The softmax of the rows of each segment, per trailing element, shifted by the segment's
    max (no overflow for large logits); a row with a negative id gives 0."""
    return _SOFTMAX_PATH(src, segment_ids, num_segments)


# ------------------------------------------------------------------ segment_csr

_CSR = "segment_csr"


@constexpr
def _csr_plan(src_shape, indptr_shape, src_dtype, indptr_dtype, reduce):
    """The output shape of segment_csr, after its rules (at compile time in a graph)."""
    infer.check_segment_reduce(_CSR, reduce)
    infer.segment_dtype(_CSR, src_dtype, indptr_dtype, names=("src", "indptr"))
    return infer.segment_csr_shape(_CSR, _known_or_unknown(src_shape), _known_or_unknown(indptr_shape))


@constexpr
def _no_rows_check(segments, rows):
    """K = 0 segments: `indptr` is [0], so `src` must have no rows."""
    if rows > 0:
        raise infer.op_error(ValueError, _CSR, f"'indptr' must end at src.shape[0] ({rows}), but it has no "
                                               f"segments (shape (1,)).")


def _csr(src, indptr, reduce, fill_value, graph_check):
    """segment_csr: on the CPU one fused kernel that reads indptr (and checks it); elsewhere the
    segment id of each row (the number of indptr[1:] <= its row number), then segment_reduce.
    graph_check: there, in a graph, where a Python check of indptr's values cannot run, a
    1-element call of the segment kernel raises (before anything is computed) when indptr is
    not valid."""
    shape = _csr_plan(src.shape, indptr.shape, src.dtype, indptr.dtype, reduce)
    segments = shape[0]
    if segments == 0:
        _no_rows_check(segments, src.shape[0])
        return ops.zeros(shape, src.dtype)
    if fused_path():  # one kernel that reads indptr itself (and checks it: a graph fails on a bad one)
        fill = _fill_vector(fill_value, src.dtype, _CSR)
        if reduce == "sum":
            return _CSR_SUM(src, indptr, fill)
        if reduce == "mean":
            return _CSR_MEAN(src, indptr, fill)
        if reduce == "max":
            return _CSR_MAX(src, indptr, fill)
        if reduce == "min":
            return _CSR_MIN(src, indptr, fill)
        return _CSR_PROD(src, indptr, fill)
    rows = src.shape[0]
    ids = ops.searchsorted(indptr[1:], ops.arange(rows, dtype=indptr.dtype), right=True)
    if graph_check:
        bad = ops.logical_or(ops.logical_or(indptr[0] != 0, indptr[-1] != rows),
                             ops.any(indptr[1:] < indptr[:-1]))
        check = _SUM(ops.ones((1,), mstype.float32), ops.reshape(ops.cast(bad, mstype.int32), (1,)), 1)
        ids = ops.depend(ids, check)
    return _segment_reduce(src, ids, segments, reduce, fill_value)


class _CsrPath:
    """segment_csr's two paths: a Python call checks indptr's values (numpy, O(K)) and raises
    a ValueError naming them; a graph compiles _ms_graph_method (ops/_graph.py)."""
    __ms_class__ = True
    __parse_method__ = GRAPH_METHOD

    def __call__(self, src, indptr, reduce, fill_value):
        for name, value in (("src", src), ("indptr", indptr)):
            if not isinstance(value, Tensor):
                raise infer.op_error(TypeError, _CSR, f"'{name}' must be a Tensor, but got {type(value).__name__}.")
        _csr_plan(src.shape, indptr.shape, src.dtype, indptr.dtype, reduce)  # the rules first
        if src.ndim:
            infer.check_indptr(_CSR, indptr.asnumpy(), src.shape[0])
        return _csr(src, indptr, reduce, fill_value, False)

    def _ms_graph_method(self, src, indptr, reduce, fill_value):  # pylint: disable=no-self-use
        return _csr(src, indptr, reduce, fill_value, True)


_CSR_PATH = _CsrPath()


def segment_csr(src, indptr, reduce="sum", *, fill_value=0):
    """The rows of `src` reduced per segment of `indptr`; see docs/api/segment.md."""
    return _CSR_PATH(src, indptr, reduce, fill_value)


# ------------------------------------------------------------------ the primitives

class _ContractPrimitive(FunctionPrimitive):
    _inputs = ("src", "segment_ids", "num_segments")


class SegmentReduce(_ContractPrimitive):
    """``SegmentReduce(reduce="sum", fill_value=0, indices_are_sorted=False)(src, segment_ids,
    num_segments)``: the primitive of :func:`ms_scatter.segment_reduce`."""
    _name = "SegmentReduce"

    def __init__(self, reduce="sum", fill_value=0, indices_are_sorted=False):
        infer.check_segment_reduce(self._name, reduce)
        super().__init__(reduce=reduce, fill_value=fill_value, indices_are_sorted=indices_are_sorted)
        self.reduce, self.fill_value = reduce, fill_value

    def _ms_graph_method(self, src, segment_ids, num_segments):
        return segment_reduce(src, segment_ids, num_segments, self.reduce, fill_value=self.fill_value)

    def infer_shape(self, src_shape, ids_shape, num_segments):
        return list(infer.segment_rows_shape(self._name, src_shape, ids_shape, num_segments))

    def infer_dtype(self, src_dtype, ids_dtype, num_segments_dtype=None):  # pylint: disable=unused-argument
        infer.segment_dtype(self._name, src_dtype, ids_dtype)
        return src_dtype


class SegmentCsr(_ContractPrimitive):
    """The primitive of :func:`ms_scatter.segment_csr`: ``SegmentCsr(reduce, fill_value)(src, indptr)``."""
    _name = "SegmentCsr"
    _inputs = ("src", "indptr")

    def __init__(self, reduce="sum", fill_value=0):
        infer.check_segment_reduce(self._name, reduce)
        super().__init__(reduce=reduce, fill_value=fill_value)
        self.reduce, self.fill_value = reduce, fill_value

    def _ms_graph_method(self, src, indptr):
        return segment_csr(src, indptr, self.reduce, fill_value=self.fill_value)

    def infer_shape(self, src_shape, indptr_shape):
        return list(infer.segment_csr_shape(self._name, src_shape, indptr_shape))

    def infer_dtype(self, src_dtype, indptr_dtype):
        infer.segment_dtype(self._name, src_dtype, indptr_dtype, names=("src", "indptr"))
        return src_dtype


def _simple_primitive(name, function, returns_arg):
    def graph_method(self, src, segment_ids, num_segments):  # pylint: disable=unused-argument
        return function(src, segment_ids, num_segments)

    def infer_shape(self, src_shape, ids_shape, num_segments):  # pylint: disable=unused-argument
        shape = list(infer.segment_rows_shape(name, src_shape, ids_shape, num_segments))
        return (shape, shape) if returns_arg else list(src_shape)

    def infer_dtype(self, src_dtype, ids_dtype, num_segments_dtype=None):  # pylint: disable=unused-argument
        infer.segment_dtype(name, src_dtype, ids_dtype)
        return (src_dtype, mstype.int64) if returns_arg else src_dtype

    return type(name, (_ContractPrimitive,), {
        "_name": name, "_ms_graph_method": graph_method, "infer_shape": infer_shape,
        "infer_dtype": infer_dtype, "__module__": "ms_scatter",
        "__doc__": f"``{name}()(src, segment_ids, num_segments)``: the primitive of "
                   f":func:`ms_scatter.{function.__name__}`."})


SegmentArgmax = _simple_primitive("SegmentArgmax", segment_argmax, True)
SegmentArgmin = _simple_primitive("SegmentArgmin", segment_argmin, True)
SegmentSoftmax = _simple_primitive("SegmentSoftmax", segment_softmax, False)
SegmentReduce.__module__ = SegmentCsr.__module__ = "ms_scatter"

_COMMON = f"""
    `segment_ids`: int32 or int64, 1-D, one id per row of `src` (E = src.shape[0]); a negative
    id drops its row; an id >= num_segments is an error before anything is computed
    (ms_scatter.ScatterIndexError in PYNATIVE, MindSpore's RuntimeError in a graph).
    `num_segments` (N): an int > 0, or a 0-d integer Tensor whose value is known when a graph
    compiles. Works in PYNATIVE, GRAPH and under jit, with gradients; the leading dimension
    (E) may be dynamic in a graph (not for the arg outputs).

    Supported Platforms:
        {PLATFORMS}; on Ascend a ValueError (not yet built there).
"""
segment_reduce.__doc__ = """
    The rows of `src` reduced per segment: ``output[s] = reduce(src[i] for i with
    segment_ids[i] == s)``, of shape ``(num_segments,) + src.shape[1:]`` and `src`'s dtype.

    `reduce`: "sum", "mean", "max", "min" or "prod". An empty segment is `fill_value` (mean of
    nothing is `fill_value`, never NaN). `indices_are_sorted`: a promise the kernels may use;
    today they do not need it (the result is the same either way). Integer means truncate
    toward zero, summed in 64 bits (exact where a sum in the dtype would wrap). Gradients:
    sum/mean/prod the ordinary derivative (prod with zeros), max/min split a segment's
    gradient evenly among the rows that tie.
""" + _COMMON + """
    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> import ms_scatter
        >>> src = Tensor(np.array([[1.0], [2.0], [6.0]], np.float32))
        >>> ids = Tensor(np.array([0, 0, 2], np.int32))
        >>> print(ms_scatter.segment_reduce(src, ids, 3, "mean", fill_value=-1.0))
        [[ 1.5]
         [-1. ]
         [ 6. ]]
"""
segment_csr.__doc__ = """
    The rows of `src` reduced per segment of a CSR row pointer `indptr`.

    Segment k is the rows ``indptr[k]:indptr[k + 1]``; the output has shape
    ``(len(indptr) - 1,) + src.shape[1:]`` and `src`'s dtype.

    `indptr`: int32 or int64, 1-D, of a length K + 1 known when a graph compiles; it must
    start at 0, never decrease and end at E = src.shape[0]: else an error before anything is
    computed (a ValueError in PYNATIVE; in a graph MindSpore's RuntimeError, with the check's
    message on stderr and in ms_scatter.last_error()). `reduce` and `fill_value` as in
    :func:`segment_reduce`, which it runs on the ids of the rows (an O(E) pass; a Python call
    also reads `indptr` to check it, O(K)). Works in PYNATIVE, GRAPH and under jit, with
    gradients with respect to `src` (as segment_reduce's).

    Supported Platforms:
        {PLATFORMS}; on Ascend a ValueError (not yet built there).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> import ms_scatter
        >>> src = Tensor(np.array([[1.0], [2.0], [6.0]], np.float32))
        >>> indptr = Tensor(np.array([0, 2, 2, 3], np.int64))
        >>> print(ms_scatter.segment_csr(src, indptr, "max", fill_value=-1.0))
        [[ 2.]
         [-1.]
         [ 6.]]
""".replace("{PLATFORMS}", PLATFORMS)
_ARG_DOC = """
    (values, arg): the {kind} of each segment (as ``segment_reduce(..., "{kind}", fill_value=0)``)
    and, in `arg` (int64, the same shape), the row of `src` that won: the first in index order
    among ties; a NaN wins; an empty segment's arg is E = src.shape[0]. `values` is
    differentiable (ties split the gradient evenly); `arg` is not.
""" + _COMMON + """
    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> import ms_scatter
        >>> src = Tensor(np.array([[3.0], [5.0], [{third}]], np.float32))
        >>> values, arg = ms_scatter.segment_arg{kind}(src, Tensor(np.array([1, 1, 1], np.int32)), 2)
        >>> print(arg)
        [[3]
         [{winner}]]
"""
segment_argmax.__doc__ = _ARG_DOC.format(kind="max", third="5.0", winner=1)
segment_argmin.__doc__ = _ARG_DOC.format(kind="min", third="3.0", winner=0)
segment_softmax.__doc__ = """
    The softmax over the rows of each segment, per trailing element, shifted by the segment's
    max (no overflow for logits of 1e4); the same shape and dtype as `src`; a row with a
    negative id gives 0. Gradient: ``dx = y * (dy - segment_sum(y * dy))``.
""" + _COMMON + """
    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> import ms_scatter
        >>> src = Tensor(np.array([1e4, 1e4, 0.0], np.float32))
        >>> print(ms_scatter.segment_softmax(src, Tensor(np.array([0, 0, 1], np.int32)), 2))
        [0.5 0.5 1. ]
"""

CONTRACT_FUNCTIONS = {f.__name__: f for f in (segment_reduce, segment_csr, segment_argmax, segment_argmin,
                                               segment_softmax)}
CONTRACT_PRIMITIVES = {c.__name__: c for c in (SegmentReduce, SegmentCsr, SegmentArgmax, SegmentArgmin,
                                               SegmentSoftmax)}
