"""The numpy loop reference of the operators (``ms_scatter.reference``): it applies the index
vectors one at a time, in index order, with the project's policies:

* float16 and bfloat16 accumulate in float32: each destination slice starts from input_x,
  takes all of its updates in index order in float32, and is rounded once;
* Max/Min propagate a NaN from either side (numpy.maximum/minimum's rule);
* integer Add/Sub/Mul wrap as the dtype does; integer Div truncates toward zero,
  MIN / -1 wraps to MIN, and a zero in updates is an error before anything is written;
* an index outside [0, dim) is an error before anything is written.

The docstrings' printed outputs are computed with it (ops/_docs.py), and the tests compare
every kernel with it (through ms_scatter.testing).
"""
import numpy as np

from . import infer


class OracleIndexError(IndexError):
    pass


class OracleZeroDivisionError(ZeroDivisionError):
    pass


def np_dtype(dtype):
    """np.dtype of a name or dtype; 'bfloat16' is MindSpore's numpy bfloat16."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        from mindspore.common.np_dtype import bfloat16  # pylint: disable=import-outside-toplevel
        return np.dtype(bfloat16)
    return np.dtype(dtype)


def is_float(dtype):
    """numpy float dtypes and MindSpore's numpy bfloat16 (kind 'V')."""
    dtype = np_dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def acc_dtype(dtype):
    """The accumulator of a value dtype: float32 for the 16-bit floats."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype.name in ("float16", "bfloat16") else dtype


def mean_acc_dtype(dtype):
    """A mean's sum: the integers in 64 bits (their mean always fits the dtype, their sum need
    not), the floats in acc_dtype."""
    dtype = np.dtype(dtype)
    if dtype.kind == "i":
        return np.dtype(np.int64)
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    return acc_dtype(dtype)


def split_op(op):
    """'ScatterNdAdd' -> ('ScatterNd', 'Add'), from the operator table."""
    record = infer.operator(op)
    return record.family, record.reduction


def _trunc_div(a, b):
    with np.errstate(all="ignore"):
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        q = q + fix.astype(q.dtype)
        return np.where(b == -1, np.negative(a), q).astype(a.dtype) if np.issubdtype(a.dtype, np.signedinteger) \
            else q.astype(a.dtype)


def reduce_step(reduction, acc, v):
    """One update of destination values `acc` by values `v` (same dtype)."""
    with np.errstate(all="ignore"):
        if reduction == "Add":
            return acc + v
        if reduction == "Sub":
            return acc - v
        if reduction == "Mul":
            return acc * v
        if reduction == "Div":
            return _trunc_div(acc, v) if np.issubdtype(acc.dtype, np.integer) else acc / v
        if reduction == "Max":
            return np.where((acc >= v) | np.isnan(acc) if acc.dtype.kind == "f" else (acc >= v), acc, v)
        if reduction == "Min":
            return np.where((acc <= v) | np.isnan(acc) if acc.dtype.kind == "f" else (acc <= v), acc, v)
        if reduction == "Update":
            return v.copy()
    raise ValueError(reduction)


def oracle(op, x, indices, updates):
    """Result of `op` (e.g. 'ScatterAdd') applied to numpy arrays; input arrays unchanged."""
    record = infer.operator(op)
    reduction = record.reduction
    x = np.asarray(x)
    indices = np.asarray(indices)
    updates = np.asarray(updates, dtype=x.dtype)
    if record.depth_one:
        vectors = indices.reshape(-1, 1)
        depth = 1
    else:
        depth = indices.shape[-1]
        vectors = indices.reshape(int(np.prod(indices.shape[:-1])), depth)
    slice_shape = x.shape[depth:]
    upd = updates.reshape((vectors.shape[0],) + slice_shape)
    for k, vec in enumerate(vectors):
        for d, v in enumerate(vec):
            if v < 0 or v >= x.shape[d]:
                raise OracleIndexError(f"index {int(v)} at vector {k} out of range [0, {x.shape[d]})")
    if reduction == "Div" and np.issubdtype(x.dtype, np.integer) and np.any(upd == 0):
        raise OracleZeroDivisionError("integer division by zero")
    acc = acc_dtype(x.dtype)
    work = x.astype(acc, copy=True)
    for k, vec in enumerate(vectors):
        dest = tuple(int(v) for v in vec)
        work[dest] = reduce_step(reduction, work[dest], upd[k].astype(acc))
    return work.astype(x.dtype)


def segment_fill(fill, dtype):
    """The oracle's value of an empty segment for a record's fill ("zero", "one", "lowest",
    "highest") and a numpy dtype, written out apart from ms_scatter.segment's own."""
    if fill in ("zero", "one"):
        return 0 if fill == "zero" else 1
    if np.dtype(dtype) == np_dtype("bfloat16"):
        big = np.float32(3.3895313892515355e38)  # bfloat16's largest finite value, 0x7f7f
        return -big if fill == "lowest" else big
    info = np.iinfo(dtype) if np.issubdtype(dtype, np.integer) else np.finfo(dtype)
    return info.min if fill == "lowest" else info.max


def segment_oracle(reduction, x, segment_ids, num_segments, fill):
    """unsorted_segment_* on numpy arrays: the rows of `x` (leading dims = segment_ids.shape)
    reduced per segment in index order (16-bit floats in float32, rounded once), negative ids
    dropped, an empty segment `fill`; an id >= num_segments raises OracleIndexError."""
    x = np.asarray(x)
    ids = np.asarray(segment_ids).reshape(-1)
    rows = x.reshape((ids.size,) + x.shape[np.asarray(segment_ids).ndim:])
    acc = acc_dtype(x.dtype)
    out = np.full((num_segments,) + rows.shape[1:], fill, dtype=x.dtype).astype(acc)
    for k, s in enumerate(ids):
        if s >= num_segments:
            raise OracleIndexError(f"segment id {int(s)} at {k} >= num_segments {num_segments}")
    for k, s in enumerate(ids):
        if s >= 0:
            out[s] = reduce_step(reduction, out[s], rows[k].astype(acc))
    return out.astype(x.dtype)


_IDENTITY = {"sum": ("Add", 0), "prod": ("Mul", 1), "mean": ("Add", 0)}


def segment_reduce_oracle(reduce, src, segment_ids, num_segments, fill_value=0):
    """segment_reduce on numpy arrays (1-D ids): an empty segment is fill_value; mean is the
    sum (16-bit floats in float32, integers in 64 bits) over the count, integers truncated
    toward zero."""
    src, ids = np.asarray(src), np.asarray(segment_ids)
    counts = np.zeros(num_segments, np.int64)
    for s in ids:
        if 0 <= s < num_segments:
            counts[s] += 1
    if reduce in ("max", "min"):
        if is_float(src.dtype):
            start = -np.inf if reduce == "max" else np.inf
        else:
            start = np.iinfo(src.dtype).min if reduce == "max" else np.iinfo(src.dtype).max
        out = segment_oracle(reduce.capitalize(), src, ids, num_segments, start).astype(acc_dtype(src.dtype))
    else:
        reduction, identity = _IDENTITY[reduce]
        acc = mean_acc_dtype(src.dtype) if reduce == "mean" else acc_dtype(src.dtype)
        work = src.astype(acc) if reduce == "mean" else src
        out = segment_oracle(reduction, work, ids, num_segments, identity).astype(acc)
        if reduce == "mean":
            denominator = np.maximum(counts, 1).reshape((-1,) + (1,) * (src.ndim - 1))
            out = out / denominator if is_float(src.dtype) else _trunc_div(out, denominator.astype(out.dtype))
    empty = (counts == 0).reshape((-1,) + (1,) * (src.ndim - 1))
    return np.where(empty, np.asarray(fill_value).astype(out.dtype), out).astype(src.dtype)


def segment_arg_oracle(kind, src, segment_ids, num_segments):
    """(values, arg) of segment_argmax / segment_argmin: the first row in index order that
    holds the segment's max (min), a NaN winning; an empty segment: value 0, arg E."""
    src, ids = np.asarray(src), np.asarray(segment_ids)
    length = src.shape[0]
    values = np.zeros((num_segments,) + src.shape[1:], src.dtype)
    arg = np.full((num_segments,) + src.shape[1:], length, np.int64)
    for k, s in enumerate(ids):
        if s < 0:
            continue
        v = src[k]
        cur = values[s]
        taken = arg[s] < length
        nan_v = np.isnan(v) if is_float(src.dtype) else np.zeros(v.shape, bool)
        nan_cur = np.isnan(cur) if is_float(src.dtype) else np.zeros(v.shape, bool)
        with np.errstate(invalid="ignore"):  # (bfloat16 compares NaN with a warning)
            better = (v > cur) if kind == "max" else (v < cur)
        win = ~taken | (~nan_cur & (nan_v | better))
        values[s] = np.where(win, v, cur)
        arg[s] = np.where(win, k, arg[s])
    return values, arg


def segment_softmax_oracle(src, segment_ids, num_segments):
    """segment_softmax on numpy arrays, in float64: rows with a negative id give 0."""
    src, ids = np.asarray(src, np.float64), np.asarray(segment_ids)
    out = np.zeros_like(src)
    for s in range(num_segments):
        rows = ids == s
        if rows.any():
            e = np.exp(src[rows] - src[rows].max(axis=0))
            out[rows] = e / e.sum(axis=0)
    return out
