"""MindSpore's drop-ins of the segment contract on ms_scatter's engine: ``unsorted_segment_sum /
_prod / _max / _min(input_x, segment_ids, num_segments)`` and the primitives
``UnsortedSegmentSum / Prod / Max / Min``, and ``scatter_nd(indices, updates, shape)`` with
the primitive ``ScatterNd``, with MindSpore 2.10's semantics.

Each is one kernel call: the engine's first-axis scatter of input_x's rows, out of place, into
a tensor of ``num_segments`` rows filled with the reduction's identity (sum 0, prod 1, max the
dtype's lowest value, min its highest, as MindSpore fills an empty segment); a negative id
drops its row (as MindSpore and TensorFlow), an id >= num_segments is an error raised before
anything is written (``kernels/include/ms_scatter``: IndexMode::kSegment, entries
``UnsortedSegment<S>``). The family's policies hold: float16 and bfloat16 accumulate in
float32 and round once (MindSpore 2.10 adds float16 in float16), a NaN propagates in max/min
(MindSpore's skip it), rows apply in index order, the same result at any thread count.

scatter_nd is the engine's TensorScatterAdd on the zeros of `shape` (its own entry point,
``ScatterNd``, so that an error names the operator called).

Gradients (every mode): sum passes each row its segment's gradient; prod the product of the
segment's other rows (zeros included); max/min split a segment's gradient evenly among the
rows that tie for its value; a dropped row gets none; segment_ids and num_segments none.
"""
import numpy as np
from mindspore import Tensor, nn, ops
from mindspore.common import dtype as mstype
from mindspore.ops import constexpr
from mindspore.ops.primitive import Primitive

from . import _grad, infer
from ._docs import PLATFORMS
from ._graph import GRAPH_METHOD
from ._memo import Memo
from ._eager import numpy_dtype
from ._kernel import ScatterKernel, _known_or_unknown

_FAMILY = "UnsortedSegment"


def _fill_value(fill, dtype_name):
    """The value an empty segment takes, for a dtype name: "zero", "one", the dtype's "lowest"
    or "highest" value (MindSpore's fills), or "-inf" / "+inf" (the identities of max and min:
    infinities for the floats, the lowest / highest value for the integers)."""
    if fill == "zero":
        return 0
    if fill == "one":
        return 1
    if fill in ("-inf", "+inf"):
        if dtype_name.startswith(("int", "uint")):
            fill = "lowest" if fill == "-inf" else "highest"
        else:
            return float(fill)
    if dtype_name == "bfloat16":
        big = float(np.float32(3.3895313892515355e38))  # bfloat16's largest finite value (exact in float32)
    elif dtype_name.startswith(("int", "uint")):
        info = np.iinfo(dtype_name)
        return int(info.min if fill == "lowest" else info.max)
    else:
        big = float(np.finfo(dtype_name).max)
    return -big if fill == "lowest" else big


def _plan_now(op, x_shape, ids_shape, num_segments, x_dtype, ids_dtype, fill):
    """(output shape, the fill as a 0-d Tensor) of one call, after the operator's rules
    (folded at compile time in a graph). The fill is a Tensor of input_x's dtype (a Python
    float would pass through float32 in a graph: float64's lowest value would become -inf),
    float32 for bfloat16 (MindSpore's CPU BroadcastTo has no bfloat16; the value is exact)."""
    name = infer.segment_dtype(op, x_dtype, ids_dtype)
    x_shape, ids_shape = _known_or_unknown(x_shape), _known_or_unknown(ids_shape)
    shape = infer.segment_shape(op, x_shape, ids_shape, num_segments)
    if shape == (-2,):
        raise infer.op_error(ValueError, op, f"the ranks of 'input_x' and 'segment_ids' must be known when the graph "
                                             f"compiles, but got input_x {x_shape} and segment_ids {ids_shape}.")
    return shape, Tensor(_fill_value(fill, name), mstype.float32 if name == "bfloat16" else x_dtype)


# (in a graph, folded at compile time; a Python call runs _plan_now itself)
_plan = constexpr(_plan_now)


@constexpr
def _dynamic_fill_plan(shape, ids_rank):
    """None when the output shape is known; else ((num_segments,) as a Tensor, the rank of
    segment_ids): the output's shape is then num_segments + input_x's runtime shape past it."""
    if all(d >= 0 for d in shape):
        return None
    return Tensor([shape[0]], mstype.int64), ids_rank


def _num_segments(op, num_segments):
    """num_segments as an int: an int, or a one-element integer Tensor (as MindSpore takes it:
    0-d or of shape (1,)) whose value is known: in PYNATIVE, or a constant in a graph."""
    if num_segments is None:  # MindSpore 2.7-2.8: a graph input reaches the compiler without a value
        raise infer.op_error(ValueError, op, "'num_segments' must be known when the graph compiles (an int, or a "
                                             "constant Tensor): a Tensor passed as an input of the graph has no "
                                             "value then.")
    if isinstance(num_segments, Tensor):
        value = _num_segments_value(op, num_segments)
        if value <= 0:
            # (a Tensor that is an input of a graph reaches the compiler as a placeholder of value 0)
            raise infer.op_error(ValueError, op, f"'num_segments' must be greater than 0, but got {value}; in a "
                                                 f"graph it must be known when the graph compiles (an int, or a "
                                                 f"constant Tensor): a Tensor passed as an input of the graph has "
                                                 f"no value then.")
        return value
    return num_segments


_num_segments_in_graph = constexpr(_num_segments)


def _filled(shape, value, dtype, input_x, ids_rank, rows=None):
    """A tensor of `shape` filled with the 0-d Tensor `value`, of `dtype`. Dimensions unknown
    when the graph compiles (dynamic shapes) are read at run time: the trailing ones from
    input_x's shape, the first from `rows` (an int64 (1,) Tensor) when num_segments is only
    known then."""
    dynamic = _dynamic_fill_plan(shape, ids_rank) if rows is None else (rows, ids_rank)
    if dynamic is None:
        out = ops.broadcast_to(value, shape)
    else:
        rows, ids_rank = dynamic
        size = ops.concat((ops.cast(rows, mstype.int64), ops.dyn_shape(input_x)[ids_rank:]))
        out = ops.zeros(size, value.dtype) + value
    return out if value.dtype == dtype else ops.cast(out, dtype)


class _SegmentKernel(ScatterKernel):
    """The engine op of one segment operator: (filled output, segment_ids, input_x) -> output."""

    def __init__(self, op_name, reduction):
        self.reduction = reduction
        self._setup(op_name, _FAMILY, op_name, bprop=_segment_bprop(reduction), graph="dispatch",
                    no_ascend=f"For '{op_name}', the segment operators have no Ascend kernels yet (CPU and GPU "
                              f"only).")

    def __deepcopy__(self, memo):
        return type(self)(self.op_name, self.reduction)


def _expand(mask, like):
    """A segment_ids-shaped tensor broadcast over input_x's trailing dims."""
    return ops.reshape(mask, mask.shape + (1,) * (like.ndim - mask.ndim))


def _segment_bprop(reduction):
    """bprop of the engine op (init, ids, x) -> out: d init passes through (it is a constant
    fill), d x by the rule of the reduction, over the rows whose id is kept."""
    def bprop(init, ids, x, out, dout):
        compute = mstype.float32 if dout.dtype in (mstype.bfloat16, mstype.float16) else dout.dtype
        kept = ids >= 0
        rows = ops.select(kept, ids, ops.zeros_like(ids))  # dropped rows read row 0, then masked
        keep = ops.cast(_expand(kept, x), compute)
        g = ops.gather(ops.cast(dout, compute), rows, 0) * keep
        xc = ops.cast(x, compute)
        if reduction == "Add":
            dx = g
        elif reduction in ("Max", "Min"):
            won = ops.cast(xc == ops.gather(ops.cast(out, compute), rows, 0), compute) * keep
            counts = _SEGMENT_SUM(ops.zeros_like(ops.cast(out, compute)), ids, won)
            dx = g * won / ops.maximum(ops.gather(counts, rows, 0), ops.ones_like(g))
        else:  # Mul: the product of the segment's other rows, zeros included
            nonzero = xc != 0
            zeros = _SEGMENT_SUM(ops.zeros_like(ops.cast(out, compute)), ids,
                                 ops.cast(ops.logical_not(nonzero), compute) * keep)
            others = _SEGMENT_PROD(ops.ones_like(ops.cast(out, compute)), ids,
                                   ops.select(nonzero, xc, ops.ones_like(xc)))
            zeros_at, others_at = ops.gather(zeros, rows, 0), ops.gather(others, rows, 0)
            safe_x = ops.select(nonzero, xc, ops.ones_like(xc))
            dx = g * ops.select(nonzero, ops.select(zeros_at == 0, others_at / safe_x, ops.zeros_like(xc)),
                                ops.select(zeros_at == 1, others_at, ops.zeros_like(xc)))
        return dout, ops.zeros_like(ids), ops.cast(dx, x.dtype)
    return bprop


@constexpr
def _graph_num_segments(op, num_segments):
    """In a graph: num_segments as an int when its value is known when the graph compiles,
    else None (a Tensor that is an input of the graph, a dimension of a dynamic shape): the
    output's number of rows is then read at run time."""
    if num_segments is None:
        return None
    if isinstance(num_segments, Tensor):
        value = _num_segments_value(op, num_segments)
        # (a Tensor that is an input of a graph reaches the compiler as a placeholder of value 0)
        return value if value > 0 else None
    return num_segments


def _num_segments_value(op, num_segments):
    if num_segments.size != 1 or num_segments.dtype not in (mstype.int32, mstype.int64):
        raise infer.op_error(TypeError, op, f"'num_segments' must be an int or a one-element int32/int64 "
                                            f"Tensor, but got a Tensor of shape {tuple(num_segments.shape)} "
                                            f"and dtype {num_segments.dtype}.")
    return int(num_segments.asnumpy().reshape(()))


def _rows(num_segments):
    """A run-time num_segments (a Tensor, or a scalar of a dynamic shape) as an int64 (1,)."""
    if isinstance(num_segments, Tensor):
        return ops.reshape(ops.cast(num_segments, mstype.int64), (1,))
    return ops.reshape(ops.scalar_to_tensor(num_segments, mstype.int64), (1,))


_PLANS = Memo(256)


def _python_plan(*key):
    """_plan_now for a Python call, kept per signature. Kept, not made per call: MindSpore
    2.7.1's jit(capture_mode="trace") records an op's arguments by identity, and a shape tuple
    freed after the call let a traced function's own result tuple, made at the same address,
    be taken for it (the function returned (3, 2) instead of its tensors)."""
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS.put(key, _plan_now(*key))
    return plan


class _SegmentPath:
    """One segment function's two paths: a Python call (PYNATIVE) reads num_segments' value;
    a graph (ops/_graph.py: the object compiles as _ms_graph_method) folds it where it is
    known when the graph compiles, and otherwise takes the output's number of rows from it at
    run time (as MindSpore's unsorted_segment_* do: a Tensor input of the graph, a dimension of
    a dynamic shape)."""
    __ms_class__ = True
    __parse_method__ = GRAPH_METHOD

    def __init__(self, op, fill, kernel):
        self.op, self.fill, self.kernel = op, fill, kernel

    def __call__(self, input_x, segment_ids, num_segments):
        n = _num_segments(self.op, num_segments)
        shape, _ = _python_plan(self.op, tuple(input_x.shape), tuple(segment_ids.shape), n, input_x.dtype,
                                segment_ids.dtype, self.fill)
        # (on the host, not by a launched op: the kernel's direct call would wait for it)
        name = infer.dtype_name(input_x.dtype)
        filled = Tensor.from_numpy(np.full(shape, _fill_value(self.fill, name), numpy_dtype(name)))
        return self.kernel(filled, segment_ids, input_x)

    def _ms_graph_method(self, input_x, segment_ids, num_segments):
        n = _graph_num_segments(self.op, num_segments)
        shape, value = _plan(self.op, input_x.shape, segment_ids.shape, n, input_x.dtype, segment_ids.dtype,
                             self.fill)
        rows = None if n is not None else _rows(num_segments)
        return self.kernel(_filled(shape, value, input_x.dtype, input_x, segment_ids.ndim, rows), segment_ids,
                           input_x)


def _make(record):
    kernel = _SegmentKernel(record.name, record.reduction)
    path = _SegmentPath(record.name, record.fill, kernel)

    def function(input_x, segment_ids, num_segments):
        return path(input_x, segment_ids, num_segments)

    function.__name__ = function.__qualname__ = record.function
    function.__doc__ = _function_doc(record)
    return function, kernel


_EXTREME_NOTE = {
    "Max": "        As MindSpore's, the maximum starts from the dtype's lowest value: a segment whose\n"
           "        rows are all -inf gives -3.4028235e+38 in float32 (segment_reduce gives -inf).\n",
    "Min": "        As MindSpore's, the minimum starts from the dtype's highest value: a segment whose\n"
           "        rows are all +inf gives 3.4028235e+38 in float32 (segment_reduce gives +inf).\n",
}


def _function_doc(record):
    fills = {"zero": "0", "one": "1", "lowest": "the lowest value of the dtype (float32: -3.4028235e+38)",
             "highest": "the highest value of the dtype (float32: 3.4028235e+38)"}
    what = {"Add": "sum", "Mul": "product", "Max": "maximum", "Min": "minimum"}[record.reduction]
    return f"""
    The {what} of the rows of `input_x` in each segment of `segment_ids`.

    MindSpore's ``ops.{record.function}`` (deprecated from MindSpore 2.10) on ms_scatter's
    kernels.

    ``output[s] = {what}(input_x[i] for every i with segment_ids[i] == s)``, in index order;
    an empty segment is {fills[record.fill]}. A negative id drops its row.

    Args:
        input_x (Tensor): of dtype {', '.join(infer.VALUE_DTYPES)}.
        segment_ids (Tensor): int32 or int64; its shape is a prefix of `input_x`'s.
        num_segments (Union[int, Tensor]): the number of segments, > 0: an int, or a 0-d (or
            shape (1,)) int32/int64 Tensor. In a graph it may be known only at run time (a
            Tensor input of the graph, a dimension of a dynamic shape): the output's first
            dimension is then dynamic.

    Returns:
        Tensor of shape ``(num_segments,) + input_x.shape[segment_ids.ndim:]`` and the dtype of
        `input_x`.

    Raises:
        TypeError: If a dtype is not one of those above, or `num_segments` is not an int.
        ValueError: If `num_segments` <= 0, or `segment_ids.shape` is not a prefix of `input_x.shape`.
        ms_scatter.ScatterIndexError: In PYNATIVE mode, if an id is >= num_segments (in GRAPH
            mode MindSpore's RuntimeError); nothing is computed.

    Note:
        float16 and bfloat16 accumulate in float32 and round once (MindSpore 2.10 adds float16
        in float16); a NaN propagates in max/min (MindSpore's CPU kernels skip it).
{_EXTREME_NOTE.get(record.reduction, "")}        Differentiable with respect to `input_x` in PYNATIVE, GRAPH and under jit
        (max/min: ties split the gradient evenly).

    Supported Platforms:
        {PLATFORMS}; on Ascend a ValueError (not yet built there).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> import ms_scatter
        >>> x = Tensor(np.array([[1, 2], [3, 4], [5, 6]], np.float32))
        >>> ids = Tensor(np.array([1, -1, 1], np.int32))
        >>> print(ms_scatter.{record.function}(x, ids, 2).shape)
        (2, 2)
    """


class FunctionPrimitive(Primitive):
    """Base of the segment contract's primitives: a Primitive with its own shape and dtype
    inference whose call runs a function of this package, in PYNATIVE (``__call__``) and in a
    graph, where MindSpore compiles the object as its method ``_ms_graph_method``
    (ops/_graph.py). A subclass sets ``_name`` and ``_inputs`` and defines both methods; the
    constructor's keyword arguments become primitive attributes."""
    _name = None
    _inputs = ()

    def __init__(self, **kwargs):
        super().__init__(self._name)
        self.kwargs = kwargs
        for key, value in kwargs.items():
            self.add_prim_attr(key, value)
        self.init_prim_io_names(inputs=list(self._inputs), outputs=["y"])
        self.__ms_class__ = True
        self.__parse_method__ = GRAPH_METHOD

    def __call__(self, *args, **kwargs):
        return self._ms_graph_method(*args, **kwargs)  # a Python call runs what a graph compiles

    def __deepcopy__(self, memo):
        return type(self)(**self.kwargs)


class _SegmentPrimitive(FunctionPrimitive):
    """Base of UnsortedSegment*: the call runs the function `_function`."""
    _function = None
    _inputs = ("x", "segment_ids", "num_segments")

    def _ms_graph_method(self, input_x, segment_ids, num_segments):
        return self._function(input_x, segment_ids, num_segments)

    def infer_shape(self, x_shape, ids_shape, num_segments):
        return list(infer.segment_shape(self._name, x_shape, ids_shape, num_segments))

    def infer_dtype(self, x_dtype, ids_dtype, num_segments_dtype=None):  # pylint: disable=unused-argument
        infer.segment_dtype(self._name, x_dtype, ids_dtype)
        return x_dtype


SCATTER_ND = infer.SCATTER_ND


@constexpr
def _scatter_nd_plan(indices_shape, updates_shape, shape, indices_dtype, updates_dtype):
    """(output shape, a 0-d zero of the fill's dtype) of scatter_nd after MindSpore's rules
    (folded at compile time in a graph)."""
    name = infer.scatter_nd_dtype(SCATTER_ND, indices_dtype, updates_dtype)
    shape = infer.scatter_nd_output_shape(SCATTER_ND, _known_or_unknown(indices_shape),
                                          _known_or_unknown(updates_shape), shape)
    return shape, Tensor(0, mstype.float32 if name == "bfloat16" else updates_dtype)


def _scatter_nd_bprop(zeros, indices, updates, out, dout):  # pylint: disable=unused-argument
    """d updates: the output's gradient at each index (duplicates each get it whole)."""
    return ops.zeros_like(zeros), ops.zeros_like(indices), _grad.gather_nd(dout, indices)


class _ScatterNdKernel(ScatterKernel):
    """The engine op of scatter_nd: (zeros of `shape`, indices, updates) -> output."""

    def __init__(self):
        self._setup(SCATTER_ND, "TensorScatter", SCATTER_ND, bprop=_scatter_nd_bprop, graph="dispatch",
                    no_ascend=f"For '{SCATTER_ND}', ScatterNd has no Ascend kernel yet (CPU and GPU only).")

    def __deepcopy__(self, memo):
        return type(self)()


_SCATTER_ND_KERNEL = _ScatterNdKernel()


def scatter_nd(indices, updates, shape):
    """
    A new tensor of `shape`, zeros with `updates` added at `indices`.

    MindSpore's ``ops.scatter_nd`` (deprecated from MindSpore 2.10) on ms_scatter's kernels:
    the zeros of `shape` and ``tensor_scatter_add`` into them, in one kernel call.
    Duplicate indices add in index order.

    Args:
        indices (Tensor): int32 or int64, of rank >= 2; ``indices.shape[-1] <= len(shape)``.
        updates (Tensor): of shape ``indices.shape[:-1] + shape[indices.shape[-1]:]``, of dtype
            float16, float32, float64, bfloat16, int8, int16, int32, int64, uint8, uint16,
            uint32 or uint64.
        shape (tuple[int]): the output's shape, of positive ints (known when a graph compiles).

    Returns:
        Tensor of `shape` and the dtype of `updates`.

    Raises:
        TypeError: If a dtype is not one of those above, or `shape` is not a tuple of ints.
        ValueError: If `shape` is empty or has an item <= 0, or the shapes do not fit.
        ms_scatter.ScatterIndexError: In PYNATIVE mode, if an index is out of range (in GRAPH
            mode MindSpore's RuntimeError); nothing is computed.

    Note:
        float16 and bfloat16 accumulate in float32 and round once. Differentiable with respect
        to `updates` in PYNATIVE, GRAPH and under jit: its gradient gathers the output's
        gradient at `indices`.

    Supported Platforms:
        {platforms}; on Ascend a ValueError (not yet built there).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> import ms_scatter
        >>> indices = Tensor(np.array([[0, 1], [1, 1], [0, 1]], np.int32))
        >>> updates = Tensor(np.array([3.2, 1.1, 5.3], np.float32))
        >>> print(ms_scatter.scatter_nd(indices, updates, (2, 2)))
        [[0.  8.5]
         [0.  1.1]]
    """
    out_shape, zero = _scatter_nd_plan(indices.shape, updates.shape, shape, indices.dtype, updates.dtype)
    return _SCATTER_ND_KERNEL(_filled(out_shape, zero, updates.dtype, None, 0), indices, updates)


scatter_nd.__doc__ = scatter_nd.__doc__.replace("{platforms}", PLATFORMS)


class ScatterNd(FunctionPrimitive):
    """
    The primitive of :func:`ms_scatter.scatter_nd`: ``ScatterNd()(indices, updates, shape)``.
    """
    __module__ = "ms_scatter"
    _name = SCATTER_ND
    _inputs = ("indices", "update", "shape")

    def _ms_graph_method(self, indices, updates, shape):  # pylint: disable=no-self-use
        return scatter_nd(indices, updates, shape)

    def infer_shape(self, indices_shape, updates_shape, shape):
        return list(infer.scatter_nd_output_shape(SCATTER_ND, indices_shape, updates_shape, shape))

    def infer_dtype(self, indices_dtype, updates_dtype, shape_dtype=None):  # pylint: disable=unused-argument
        infer.scatter_nd_dtype(SCATTER_ND, indices_dtype, updates_dtype)
        return updates_dtype


ScatterNd.__doc__ += scatter_nd.__doc__

SEGMENT_PRIMITIVES = {SCATTER_ND: ScatterNd}
SEGMENT_FUNCTIONS = {"scatter_nd": scatter_nd}
_KERNELS = {}
for _record in infer.SEGMENT_OPERATORS.values():
    _fn, _KERNELS[_record.reduction] = _make(_record)
    SEGMENT_FUNCTIONS[_record.function] = _fn
    SEGMENT_PRIMITIVES[_record.name] = type(_record.name, (_SegmentPrimitive,), {
        "_name": _record.name, "_function": staticmethod(_fn), "__module__": "ms_scatter",
        "__doc__": f"\n    The primitive of :func:`ms_scatter.{_record.function}`: "
                   f"``{_record.name}()(input_x, segment_ids, num_segments)``.\n" + _fn.__doc__})
_SEGMENT_SUM = _KERNELS["Add"]
_SEGMENT_PROD = _KERNELS["Mul"]


def _extreme_function(reduction):
    """The segment max (min) that starts from -inf (+inf) for the floats: a segment whose rows
    are all -inf has max -inf (MindSpore's unsorted_segment_max, which starts from the dtype's
    lowest value, gives -3.4028235e+38 there, and our drop-in does the same). Empty segments
    are -inf (+inf); the contract's functions replace them by their own fill."""
    op = f"UnsortedSegment{reduction}"
    path = _SegmentPath(op, "-inf" if reduction == "Max" else "+inf", _KERNELS[reduction])

    def function(input_x, segment_ids, num_segments):
        return path(input_x, segment_ids, num_segments)
    return function


segment_max_from_inf = _extreme_function("Max")
segment_min_from_inf = _extreme_function("Min")


class _GatherRows(nn.Cell):
    """``ops.gather(x, rows, 0)`` whose gradient is our own segment sum of the output's gradient
    over `rows` (MindSpore's Gather gradient runs its UnsortedSegmentSum). `rows` must be in
    [0, x.shape[0])."""

    def construct(self, x, rows):
        return ops.gather(x, rows, 0)

    def bprop(self, x, rows, out, dout):  # pylint: disable=unused-argument
        return _SEGMENT_SUM_FUNCTION(dout, rows, x.shape[0]), ops.zeros_like(rows)


_SEGMENT_SUM_FUNCTION = SEGMENT_FUNCTIONS["unsorted_segment_sum"]
gather_rows = _GatherRows()

