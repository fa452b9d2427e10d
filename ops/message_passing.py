"""The message-passing operators of the segment contract (shared/SEGMENT_API.md, section 3):
``gspmm(x, src, dst, num_nodes, edge_weight=None, reduce="sum")`` and
``gsddmm(x_u, x_v, src, dst, op="dot")``, with their primitives ``Gspmm`` and ``Gsddmm``.

On the CPU each call is one fused kernel (kernels/cpu/message.h) that never makes the E x F
tensor of gathered rows, and so are the gradients of gspmm sum/mean (a gspmm over the reversed
edges, a gsddmm dot for the edge weights), of gspmm max/min (ties split evenly: a pass by
destination that counts the ties, one by source for d x, one per edge for d edge_weight) and of
gsddmm dot (weighted gspmm sums). Elsewhere (GPU, Ascend) the composite
below runs: a gather of the rows along the edges and the engine's segment reduction (gspmm)
or an elementwise op (gsddmm), with a kernel check of the ids in graphs. An id out of range
is an error before anything is computed: a ValueError naming the ids in PYNATIVE (the call
reads them, O(E)); in a graph the kernel's check fails the graph with MindSpore's
RuntimeError, its message on stderr and in ``ms_scatter.last_error()``.
"""
from mindspore import Tensor, ops
from mindspore.common import dtype as mstype
from mindspore.ops import constexpr

from . import infer
from ._docs import PLATFORMS
from ._graph import GRAPH_METHOD
from ._kernel import FusedKernel, _known_or_unknown, fused_path, row_count
from .primitives import FUNCTIONS
from .segment import SEGMENT_FUNCTIONS, FunctionPrimitive, gather_rows
from .segment_reduce import _num_segments_in_graph, segment_reduce

GSPMM_REDUCES = ("sum", "mean", "max", "min")
GSDDMM_OPS = ("dot", "add", "sub", "mul")
_TENSOR_SCATTER_ADD = FUNCTIONS["tensor_scatter_add"]
# (the gradients' sums over the edges: the number of rows may be a dynamic dimension)
_SEGMENT_SUM = SEGMENT_FUNCTIONS["unsorted_segment_sum"]


def _ids_error(op, name, ids, rows):
    """The ValueError of ids (a numpy array) outside [0, rows), or None."""
    if ids.size and (ids.min() < 0 or ids.max() >= rows):
        bad = int(ids[(ids < 0) | (ids >= rows)][0])
        return infer.op_error(ValueError, op, f"each value of '{name}' must be in [0, {rows}), but got {bad}.")
    return None


def _check_ids_now(op, pairs):
    """A Python call: read the ids and raise for the first out of range."""
    for name, ids, rows in pairs:
        error = _ids_error(op, name, ids.asnumpy(), rows)
        if error is not None:
            raise error


def _checked(ids, rows, value):
    """In a graph: `value`, after a kernel check that every id is in [0, rows) (our
    TensorScatterAdd on an (rows, 1) int32 tensor raises before anything is computed)."""
    vectors = ops.reshape(ops.cast(ids, mstype.int32), (-1, 1))
    check = _TENSOR_SCATTER_ADD(ops.zeros((rows, 1), mstype.int32), vectors, ops.ones_like(vectors))
    return ops.depend(value, check)


def _edge_shapes(op, src_shape, dst_shape, src_dtype, dst_dtype):
    for name, shape, dtype in (("src", src_shape, src_dtype), ("dst", dst_shape, dst_dtype)):
        name_ = infer.dtype_name(dtype)
        if name_ not in infer.INDEX_DTYPES:
            raise infer.op_error(TypeError, op, f"the dtype of '{name}' must be int32 or int64, but got {name_}.")
        if len(shape) != 1:
            raise infer.op_error(ValueError, op, f"'{name}' must be 1-D (one id per edge), but got shape "
                                                 f"{tuple(shape)}.")
    if src_shape[0] >= 0 and dst_shape[0] >= 0 and src_shape[0] != dst_shape[0]:
        raise infer.op_error(ValueError, op, f"'src' and 'dst' must have one id per edge each, but got "
                                             f"{src_shape[0]} and {dst_shape[0]}.")


# ---------------------------------------------------------------- the fused CPU kernels
# kernels/cpu/message.h: gspmm and every gsddmm op in one pass over the edges, the backward
# too (no E x F tensor). Graph nodes inferred by the library (<entry>InferShape /
# InferType), as the engine's graph nodes are (ops/_kernel.py says why).

def _spmm_bprop(mean, weighted):
    """d x: a gspmm sum over the reversed edges of dout (mean: divided by each node's in-degree);
    d edge_weight: a gsddmm dot of x's rows along the edges with those of that gradient."""
    def gradient(x, src, dst, rows, dout):
        if not mean:
            return dout
        degree = _SEGMENT_SUM(ops.ones_like(dst).astype(mstype.float32), dst, rows.shape[0])
        scale = ops.reshape(ops.maximum(degree, ops.ones_like(degree)), (-1,) + (1,) * (dout.ndim - 1))
        return ops.cast(ops.cast(dout, mstype.float32) / scale, dout.dtype)

    def bprop_weighted(x, src, dst, rows, weight, out, dout):  # pylint: disable=unused-argument
        grad = gradient(x, src, dst, rows, dout)
        return (_GSPMM_SUM_W(grad, dst, src, x, weight), ops.zeros_like(src), ops.zeros_like(dst),
                ops.zeros_like(rows), _GSDDMM_DOT(x, grad, src, dst))

    def bprop(x, src, dst, rows, out, dout):  # pylint: disable=unused-argument
        grad = gradient(x, src, dst, rows, dout)
        return _GSPMM_SUM(grad, dst, src, x), ops.zeros_like(src), ops.zeros_like(dst), ops.zeros_like(rows)
    return bprop_weighted if weighted else bprop


def _spmm_extreme_bprop(weighted):
    """max/min: a node's gradient splits evenly among the edges whose message ties for its value
    (rounds to it; the family's rule), by message.h's tie kernels: no E x F tensor."""
    def bprop_weighted(x, src, dst, rows, weight, out, dout):
        return (_TIE_GRAD_W(x, src, dst, out, dout, weight), ops.zeros_like(src), ops.zeros_like(dst),
                ops.zeros_like(rows), _TIE_GRAD_WEIGHT(x, src, dst, out, dout, weight))

    def bprop(x, src, dst, rows, out, dout):
        return _TIE_GRAD(x, src, dst, out, dout), ops.zeros_like(src), ops.zeros_like(dst), ops.zeros_like(rows)
    return bprop_weighted if weighted else bprop


def _sddmm_bprop(op_name):
    def bprop(u, v, src, dst, out, dout):  # pylint: disable=unused-argument
        if op_name == "dot":  # d u[i] = sum over the edges from i of dout[e] * v[dst[e]]
            du = _GSPMM_SUM_W(v, dst, src, u, dout)
            dv = _GSPMM_SUM_W(u, src, dst, v, dout)
        else:
            grad_u, grad_v = dout, dout
            if op_name == "sub":
                grad_v = -dout
            elif op_name == "mul":
                grad_u, grad_v = dout * gather_rows(v, dst), dout * gather_rows(u, src)
            du = _SEGMENT_SUM(grad_u, src, u.shape[0])
            dv = _SEGMENT_SUM(grad_v, dst, v.shape[0])
        return du, dv, ops.zeros_like(src), ops.zeros_like(dst)
    return bprop


# (each entry's output shape from its inputs' shapes, for a direct Python call: ops/_kernel.py)
def _nodes_shape(shapes):
    return shapes[3][:1] + shapes[0][1:]


def _edges_shape(shapes):
    return shapes[2][:1] + shapes[0][1:]


_FUSED = {name + suffix: FusedKernel(name, _spmm_bprop(name == "GspmmMean", suffix == "_w"), _nodes_shape)
          for name in ("GspmmSum", "GspmmMean") for suffix in ("", "_w")}
_FUSED.update({name + suffix: FusedKernel(name, _spmm_extreme_bprop(suffix == "_w"), _nodes_shape)
               for name in ("GspmmMax", "GspmmMin") for suffix in ("", "_w")})
_FUSED.update({f"Gsddmm{op.title()}": FusedKernel(f"Gsddmm{op.title()}", _sddmm_bprop(op),
                                                  (lambda s: s[2][:1]) if op == "dot" else _edges_shape)
               for op in GSDDMM_OPS})
_GSPMM_SUM = _FUSED["GspmmSum"]
_GSPMM_SUM_W = _FUSED["GspmmSum_w"]
_GSPMM_MEAN = _FUSED["GspmmMean"]
_GSPMM_MEAN_W = _FUSED["GspmmMean_w"]
_GSPMM_MAX, _GSPMM_MAX_W = _FUSED["GspmmMax"], _FUSED["GspmmMax_w"]
_GSPMM_MIN, _GSPMM_MIN_W = _FUSED["GspmmMin"], _FUSED["GspmmMin_w"]
_GSDDMM_DOT, _GSDDMM_ADD = _FUSED["GsddmmDot"], _FUSED["GsddmmAdd"]
_GSDDMM_SUB, _GSDDMM_MUL = _FUSED["GsddmmSub"], _FUSED["GsddmmMul"]
_TIE_GRAD = FusedKernel("GspmmTieGrad", None, lambda s: s[0])
_TIE_GRAD_W = FusedKernel("GspmmTieGrad", None, lambda s: s[0])
_TIE_GRAD_WEIGHT = FusedKernel("GspmmTieGradWeight", None, lambda s: s[1])
_FUSED_REDUCES = {"sum": "GspmmSum", "mean": "GspmmMean"}


@constexpr
def _gspmm_plan(x_shape, src_shape, dst_shape, w_shape, x_dtype, src_dtype, dst_dtype, w_dtype, reduce,
                num_nodes):
    """The rules of one gspmm call (at compile time in a graph)."""
    op = "gspmm"
    if reduce not in GSPMM_REDUCES:
        raise infer.op_error(ValueError, op, f"'reduce' must be one of {', '.join(GSPMM_REDUCES)}, but got "
                                             f"{reduce!r}.")
    x_shape, src_shape, dst_shape = (_known_or_unknown(s) for s in (x_shape, src_shape, dst_shape))
    x_name = infer.dtype_name(x_dtype)
    if x_name not in infer.VALUE_DTYPES:
        raise infer.op_error(TypeError, op, f"the dtype of 'x' must be one of {', '.join(infer.VALUE_DTYPES)}, "
                                            f"but got {x_name}.")
    if not x_shape or x_shape == (-2,):
        raise infer.op_error(ValueError, op, f"'x' must have rank >= 1 (nodes) known when a graph compiles, but "
                                             f"got shape {x_shape}.")
    _edge_shapes(op, src_shape, dst_shape, src_dtype, dst_dtype)
    if w_shape is not None:
        w_shape = _known_or_unknown(w_shape)
        if infer.dtype_name(w_dtype) != x_name:
            raise infer.op_error(TypeError, op, f"the dtype of 'edge_weight' must be the dtype of 'x' ({x_name}), "
                                                f"but got {infer.dtype_name(w_dtype)}.")
        if len(w_shape) != 1 or (w_shape[0] >= 0 and src_shape[0] >= 0 and w_shape[0] != src_shape[0]):
            raise infer.op_error(ValueError, op, f"'edge_weight' must have shape (E,) = {src_shape}, but got "
                                                 f"{w_shape}.")
    infer.segment_shape(op, (src_shape[0],) + x_shape[1:], dst_shape, num_nodes)
    return x_name


def _gspmm(x, src, dst, num_nodes, edge_weight, reduce, graph_check):
    n = _num_segments_in_graph("gspmm", num_nodes)
    _gspmm_plan(x.shape, src.shape, dst.shape, None if edge_weight is None else edge_weight.shape, x.dtype,
                src.dtype, dst.dtype, None if edge_weight is None else edge_weight.dtype, reduce, n)
    if fused_path():
        rows = row_count(n)
        if edge_weight is None:
            if reduce == "sum":
                return _GSPMM_SUM(x, src, dst, rows)
            if reduce == "mean":
                return _GSPMM_MEAN(x, src, dst, rows)
            if reduce == "max":
                return _GSPMM_MAX(x, src, dst, rows)
            return _GSPMM_MIN(x, src, dst, rows)
        if reduce == "sum":
            return _GSPMM_SUM_W(x, src, dst, rows, edge_weight)
        if reduce == "mean":
            return _GSPMM_MEAN_W(x, src, dst, rows, edge_weight)
        if reduce == "max":
            return _GSPMM_MAX_W(x, src, dst, rows, edge_weight)
        return _GSPMM_MIN_W(x, src, dst, rows, edge_weight)
    dtype = x.dtype
    work = ops.cast(x, mstype.float32) if dtype == mstype.bfloat16 else x  # (no bfloat16 Gather on the CPU)
    if graph_check:
        src = _checked(src, x.shape[0], src)
        dst = _checked(dst, n, dst)
    messages = gather_rows(work, src)
    if edge_weight is not None:
        arith = _arithmetic_dtype(work.dtype)
        weight = ops.cast(edge_weight, arith)
        messages = ops.cast(ops.cast(messages, arith) * ops.reshape(weight, weight.shape + (1,) * (messages.ndim - 1)),
                            work.dtype)
    out = segment_reduce(messages, dst, n, reduce, fill_value=0)
    return ops.cast(out, dtype) if dtype == mstype.bfloat16 else out


@constexpr
def _gsddmm_plan(u_shape, v_shape, src_shape, dst_shape, u_dtype, v_dtype, src_dtype, dst_dtype, op_name):
    op = "gsddmm"
    if op_name not in GSDDMM_OPS:
        raise infer.op_error(ValueError, op, f"'op' must be one of {', '.join(GSDDMM_OPS)}, but got {op_name!r}.")
    u_shape, v_shape, src_shape, dst_shape = (_known_or_unknown(s) for s in (u_shape, v_shape, src_shape, dst_shape))
    u_name, v_name = infer.dtype_name(u_dtype), infer.dtype_name(v_dtype)
    if u_name not in infer.VALUE_DTYPES:
        raise infer.op_error(TypeError, op, f"the dtype of 'x_u' must be one of {', '.join(infer.VALUE_DTYPES)}, "
                                            f"but got {u_name}.")
    if v_name != u_name:
        raise infer.op_error(TypeError, op, f"the dtype of 'x_v' must be the dtype of 'x_u' ({u_name}), but got "
                                            f"{v_name}.")
    for name, shape in (("x_u", u_shape), ("x_v", v_shape)):
        if not shape or shape == (-2,):
            raise infer.op_error(ValueError, op, f"'{name}' must have rank >= 1 (nodes) known when a graph "
                                                 f"compiles, but got shape {shape}.")
    if len(u_shape) != len(v_shape) or any(a >= 0 and b >= 0 and a != b for a, b in zip(u_shape[1:], v_shape[1:])):
        raise infer.op_error(ValueError, op, f"'x_u' and 'x_v' must have the same feature shape (shape[1:]), but "
                                             f"got {u_shape} and {v_shape}.")
    _edge_shapes(op, src_shape, dst_shape, src_dtype, dst_dtype)
    return u_name


def _gsddmm(x_u, x_v, src, dst, op_name, graph_check):
    _gsddmm_plan(x_u.shape, x_v.shape, src.shape, dst.shape, x_u.dtype, x_v.dtype, src.dtype, dst.dtype, op_name)
    if fused_path():
        if op_name == "dot":
            return _GSDDMM_DOT(x_u, x_v, src, dst)
        if op_name == "add":
            return _GSDDMM_ADD(x_u, x_v, src, dst)
        if op_name == "sub":
            return _GSDDMM_SUB(x_u, x_v, src, dst)
        return _GSDDMM_MUL(x_u, x_v, src, dst)
    dtype = x_u.dtype
    work = mstype.float32 if dtype in (mstype.float16, mstype.bfloat16) else _arithmetic_dtype(dtype)
    u = ops.cast(x_u, work) if work != dtype else x_u
    v = ops.cast(x_v, work) if work != dtype else x_v
    if graph_check:
        src = _checked(src, x_u.shape[0], src)
        dst = _checked(dst, x_v.shape[0], dst)
    a, b = gather_rows(u, src), gather_rows(v, dst)
    if op_name == "dot":
        out = a * b
        if out.ndim > 1:
            out = ops.reduce_sum(out, tuple(range(1, out.ndim)))
    elif op_name == "add":
        out = a + b
    elif op_name == "sub":
        out = a - b
    else:
        out = a * b
    return ops.cast(out, dtype) if work != dtype else out


@constexpr
def _arithmetic_dtype(dtype):
    """The dtype elementwise arithmetic runs in: uint32/uint64 in int64 (MindSpore's CPU graph
    kernels of Sub, Mul and ReduceSum lack them; the results agree modulo 2^32 / 2^64)."""
    return mstype.int64 if dtype in (mstype.uint32, mstype.uint64) else dtype


class _MessagePath:
    """gspmm's and gsddmm's two paths: a Python call reads the ids and raises a ValueError for
    one out of range; a graph compiles _ms_graph_method (ops/_graph.py), with a kernel check."""
    __ms_class__ = True
    __parse_method__ = GRAPH_METHOD

    def __init__(self, name):
        self.name = name

    def __call__(self, a, b, src, dst, extra, choice):
        for arg_name, value in (("src", src), ("dst", dst)):
            if not isinstance(value, Tensor):
                raise infer.op_error(TypeError, self.name, f"'{arg_name}' must be a Tensor, but got "
                                                           f"{type(value).__name__}.")
        if self.name == "gspmm":
            n = _num_segments_in_graph("gspmm", extra)
            _gspmm_plan(a.shape, src.shape, dst.shape, None if b is None else b.shape, a.dtype, src.dtype,
                        dst.dtype, None if b is None else b.dtype, choice, n)
            _check_ids_now("gspmm", (("src", src, a.shape[0]), ("dst", dst, n)))
            return _gspmm(a, src, dst, n, b, choice, False)
        _gsddmm_plan(a.shape, b.shape, src.shape, dst.shape, a.dtype, b.dtype, src.dtype, dst.dtype, choice)
        _check_ids_now("gsddmm", (("src", src, a.shape[0]), ("dst", dst, b.shape[0])))
        return _gsddmm(a, b, src, dst, choice, False)

    def _ms_graph_method(self, a, b, src, dst, extra, choice):
        if self.name == "gspmm":
            return _gspmm(a, src, dst, extra, b, choice, True)
        return _gsddmm(a, b, src, dst, choice, True)


_GSPMM = _MessagePath("gspmm")
_GSDDMM = _MessagePath("gsddmm")


def gspmm(x, src, dst, num_nodes, edge_weight=None, reduce="sum"):
    """``out[v] = reduce(x[src[e]] * edge_weight[e] for every edge e with dst[e] == v)``."""
    return _GSPMM(x, edge_weight, src, dst, num_nodes, reduce)


def gsddmm(x_u, x_v, src, dst, op="dot"):
    """Per edge e, ``x_u[src[e]] <op> x_v[dst[e]]`` (dot: summed over the features)."""
    return _GSDDMM(x_u, x_v, src, dst, None, op)


class Gspmm(FunctionPrimitive):
    """The primitive of :func:`ms_scatter.gspmm`: ``Gspmm(reduce)(x, src, dst, num_nodes, edge_weight=None)``."""
    __module__ = "ms_scatter"
    _name = "Gspmm"
    _inputs = ("x", "src", "dst", "num_nodes", "edge_weight")

    def __init__(self, reduce="sum"):
        if reduce not in GSPMM_REDUCES:
            raise infer.op_error(ValueError, self._name, f"'reduce' must be one of {', '.join(GSPMM_REDUCES)}, "
                                                         f"but got {reduce!r}.")
        super().__init__(reduce=reduce)
        self.reduce = reduce

    def _ms_graph_method(self, x, src, dst, num_nodes, edge_weight=None):
        return gspmm(x, src, dst, num_nodes, edge_weight, self.reduce)


class Gsddmm(FunctionPrimitive):
    """The primitive of :func:`ms_scatter.gsddmm`: ``Gsddmm(op)(x_u, x_v, src, dst)``."""
    __module__ = "ms_scatter"
    _name = "Gsddmm"
    _inputs = ("x_u", "x_v", "src", "dst")

    def __init__(self, op="dot"):
        if op not in GSDDMM_OPS:
            raise infer.op_error(ValueError, self._name, f"'op' must be one of {', '.join(GSDDMM_OPS)}, but got "
                                                         f"{op!r}.")
        super().__init__(op=op)
        self.op = op

    def _ms_graph_method(self, x_u, x_v, src, dst):
        return gsddmm(x_u, x_v, src, dst, self.op)


_FUSED_NOTE = """
    On the CPU one fused kernel, forward and backward, never makes the E x F tensor of
    gathered rows (max/min's backward gathers it once); bit-identical at any thread count.
    On the GPU it is a gather and the engine's segment reduction.
"""
gspmm.__doc__ = """
    The generalized sparse-dense product of message passing: each node reduces the features
    of its in-neighbours, ``out[v] = reduce(x[src[e]] * edge_weight[e] for each edge e with
    dst[e] == v)``, of shape ``(num_nodes,) + x.shape[1:]`` and `x`'s dtype.

    `src`, `dst`: int32 or int64, 1-D, one id per edge (E), in any order; `src` in
    [0, x.shape[0]), `dst` in [0, num_nodes): else an error before anything is computed (a
    ValueError in PYNATIVE; in a graph MindSpore's RuntimeError, the kernel check's message on
    stderr and in ms_scatter.last_error()). `edge_weight`: None or shape (E,), `x`'s dtype.
    `reduce`: "sum", "mean", "max" or "min"; a node without incoming edges gets 0.
    `num_nodes`: an int > 0 (or a one-element integer Tensor known when a graph compiles).
    Gradients with respect to `x` and `edge_weight` (max/min: ties split evenly), in PYNATIVE,
    GRAPH and under jit; float16 and bfloat16 are reduced in float32.
""" + _FUSED_NOTE + """
    Supported Platforms:
        {PLATFORMS}; on Ascend a ValueError (not yet built there).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> import ms_scatter
        >>> x = Tensor(np.array([[1.0], [2.0], [4.0]], np.float32))
        >>> src = Tensor(np.array([0, 1, 2, 2], np.int32))
        >>> dst = Tensor(np.array([1, 1, 0, 1], np.int32))
        >>> print(ms_scatter.gspmm(x, src, dst, 3, reduce="sum"))
        [[4.]
         [7.]
         [0.]]
""".replace("{PLATFORMS}", PLATFORMS)
gsddmm.__doc__ = """
    The generalized sampled dense-dense product of message passing: per edge e,
    ``x_u[src[e]] <op> x_v[dst[e]]``. `op` "dot" gives shape (E,) (summed over the features);
    "add", "sub" and "mul" give ``(E,) + x_u.shape[1:]``; `x_u`'s dtype.

    `x_u`, `x_v`: the same dtype and feature shape (shape[1:]); `src` in [0, x_u.shape[0]),
    `dst` in [0, x_v.shape[0]) (errors as for :func:`gspmm`). Gradients with respect to
    both, in PYNATIVE, GRAPH and under jit; float16 and bfloat16 are computed in float32.
""" + _FUSED_NOTE + """
    Supported Platforms:
        {PLATFORMS}; on Ascend a ValueError (not yet built there).

    Examples:
        >>> import numpy as np
        >>> from mindspore import Tensor
        >>> import ms_scatter
        >>> h = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
        >>> src = Tensor(np.array([0, 1], np.int32))
        >>> dst = Tensor(np.array([1, 1], np.int32))
        >>> print(ms_scatter.gsddmm(h, h, src, dst, op="dot"))
        [11. 25.]
""".replace("{PLATFORMS}", PLATFORMS)

MESSAGE_FUNCTIONS = {f.__name__: f for f in (gspmm, gsddmm)}
MESSAGE_PRIMITIVES = {c.__name__: c for c in (Gspmm, Gsddmm)}
