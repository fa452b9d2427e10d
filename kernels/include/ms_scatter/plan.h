// ms-scatter: host-side part shared by every backend: how an aot call's arguments map
// onto the one engine (ScatterNd with index depth `depth`), index validation, and the
// error channel (an aot kernel can only return an integer code, so the message is kept
// here for the Python side to read, and printed to stderr).
#ifndef MS_SCATTER_PLAN_H_
#define MS_SCATTER_PLAN_H_

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/error.h"

namespace ms_scatter {

enum ErrorCode : int {
  kOk = 0,
  kBadArguments = 1,    // shapes/dtypes the kernel cannot have been given by our own inference
  kIndexOutOfRange = 2,
  kDivisionByZero = 3,
};

// Index modes: Scatter* index the first axis (depth 1, any index shape);
// ScatterNd*/TensorScatter* take the last axis of `indices` as the depth; the segment
// operators index the first axis and drop the index vectors with a negative id.
enum class IndexMode { kFirstAxis, kNd, kSegment };
// Outputs: kToken writes input_x in place and a 1-element token; kReturn writes in place
// and copies the updated input_x to the output; kTensor leaves input_x alone and writes
// the result to the output (copy + scatter).
enum class OutputMode { kToken, kReturn, kTensor };

// The highest rank any argument may have (infer.MAX_RANK says the same on the Python side).
constexpr int kMaxRank = 64;

inline int64_t numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n *= shape[i];
  return n;
}

// Shapes from a direct call are not trusted: every dimension >= 0 and the element count
// representable (so numel() cannot overflow).
inline bool valid_shape(int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > kMaxRank || (ndim > 0 && shape == nullptr)) return false;
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) return false;
  }
  return n <= (int64_t(1) << 56);
}

inline std::string shape_str(int ndim, const int64_t *shape) {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (ndim == 1) s += ",";
  return s + ")";
}

// Position of flat element `flat` in an array of shape `shape`, as "(i, j, ...)".
inline std::string position_str(int64_t flat, int ndim, const int64_t *shape) {
  std::vector<int64_t> pos(ndim > 0 ? ndim : 0);
  for (int d = ndim - 1; d >= 0; --d) {
    if (shape[d] > 0) {
      pos[d] = flat % shape[d];
      flat /= shape[d];
    }
  }
  return shape_str(ndim, pos.data());
}

// printf into a std::string (a message check_plan returns instead of reporting it).
inline std::string format_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string format_message(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

struct Plan {
  const char *op = "";
  int x_ndim = 0;
  const int64_t *x_shape = nullptr;
  int idx_ndim = 0;
  const int64_t *idx_shape = nullptr;
  int upd_ndim = 0;
  const int64_t *upd_shape = nullptr;
  int64_t x_numel = 0;
  int64_t n = 0;      // number of index vectors
  int64_t depth = 0;  // components per index vector
  int64_t slice = 1;  // elements per update slice
  int64_t strides[kMaxRank] = {0};  // element stride of each indexed dimension
  int out_arg = 3;    // argument index of the output
  // Row shard (the _shard entries): input_x holds rows [row_begin, row_begin + x_shape[0])
  // of a table of global_rows rows. Dimension 0 of every index vector is a global row,
  // checked against global_rows; a vector whose row is outside the shard is skipped.
  bool sharded = false;
  int64_t row_begin = 0;
  int64_t global_rows = 0;
  // Segment ids (IndexMode::kSegment): a negative id drops its row of 'updates' (as
  // MindSpore's and TensorFlow's unsorted_segment_*); the engine runs the row-shard path.
  bool drop_negative = false;
};

// Build the plan from the shapes of (x, indices, updates, out), or for a sharded entry
// (x, indices, updates, shard, out) with shard an int64 (row_begin, global_rows) whose
// values set_shard reads. Our inference has already checked all of this; the kernels
// check again so that a direct call cannot read out of bounds. `report`: write the reason
// of a failure to the error channel (check_plan does not, but gives it in *why if asked).
inline int plan_from_shapes(const char *op, IndexMode mode, bool sharded, const int *ndims, int64_t *const *shapes,
                            Plan *p, bool report, std::string *why = nullptr) {
#define MSS_PLAN_FAIL(...)                                           \
  do {                                                               \
    if (report) set_error(kBadArguments, __VA_ARGS__);               \
    if (why) *why = format_message(__VA_ARGS__);                     \
    return kBadArguments;                                            \
  } while (0)
  const int args = sharded ? 5 : 4;
  for (int a = 0; a < args; ++a) {
    if (!valid_shape(ndims[a], shapes[a]))
      MSS_PLAN_FAIL("For '%s', argument %d has an invalid shape (negative or too large dimensions).", op, a);
  }
  if (sharded && !(ndims[3] == 1 && shapes[3][0] == 2))
    MSS_PLAN_FAIL("For '%s', 'shard' must have shape (2,) (row_begin, global_rows), but got %s.", op,
                  shape_str(ndims[3], shapes[3]).c_str());
  p->op = op;
  p->sharded = sharded;
  p->out_arg = args - 1;
  p->x_ndim = ndims[0];
  p->x_shape = shapes[0];
  p->idx_ndim = ndims[1];
  p->idx_shape = shapes[1];
  p->upd_ndim = ndims[2];
  p->upd_shape = shapes[2];
  p->x_numel = numel(p->x_ndim, p->x_shape);
  const int64_t idx_numel = numel(p->idx_ndim, p->idx_shape);
  int lead = p->idx_ndim;  // index dims that enumerate index vectors
  if (mode == IndexMode::kFirstAxis || mode == IndexMode::kSegment) {
    p->depth = 1;
    p->n = idx_numel;
    if (p->x_ndim == 0) {  // a 0-d input_x is one element along its (single) first axis, as MindSpore's
      static const int64_t kOneElement[1] = {1};
      p->x_ndim = 1;
      p->x_shape = kOneElement;
    }
  } else {
    if (p->idx_ndim < 1) MSS_PLAN_FAIL("For '%s', 'indices' must have rank >= 1, but got shape ().", op);
    p->depth = p->idx_shape[p->idx_ndim - 1];
    lead = p->idx_ndim - 1;
    p->n = numel(lead, p->idx_shape);
  }
  if (p->depth > p->x_ndim || p->depth > kMaxRank)
    MSS_PLAN_FAIL("For '%s', the index depth must be <= rank of 'input_x' (%d), but got %lld.", op, p->x_ndim,
                  static_cast<long long>(p->depth));
  // updates.shape == indices.shape[:lead] + x.shape[depth:]
  bool ok = p->upd_ndim == lead + (p->x_ndim - static_cast<int>(p->depth));
  for (int i = 0; ok && i < lead; ++i) ok = p->upd_shape[i] == p->idx_shape[i];
  for (int i = static_cast<int>(p->depth); ok && i < p->x_ndim; ++i)
    ok = p->upd_shape[lead + i - p->depth] == p->x_shape[i];
  if (!ok)
    MSS_PLAN_FAIL("For '%s', the shape of 'updates' must match 'indices' %s and 'input_x' %s, but got %s.", op,
                  shape_str(p->idx_ndim, p->idx_shape).c_str(), shape_str(p->x_ndim, p->x_shape).c_str(),
                  shape_str(p->upd_ndim, p->upd_shape).c_str());
#undef MSS_PLAN_FAIL
  if (mode == IndexMode::kSegment) {
    p->drop_negative = true;
    p->global_rows = p->x_shape[0];
  }
  p->slice = numel(p->x_ndim - static_cast<int>(p->depth), p->x_shape + p->depth);
  int64_t stride = p->slice;
  for (int64_t d = p->depth - 1; d >= 0; --d) {
    p->strides[d] = stride;
    stride *= p->x_shape[d];
  }
  return kOk;
}

// The plan of an aot call (x, indices, updates, [shard,] out); a failure is reported.
inline int make_plan(const char *op, IndexMode mode, bool sharded, int nparam, int *ndims, int64_t **shapes,
                     Plan *p) {
  const int args = sharded ? 5 : 4;
  if (nparam != args) {
    set_error(kBadArguments, "For '%s', the kernel expects %d inputs and 1 output, but got %d arguments.",
              op, args - 1, nparam);
    return kBadArguments;
  }
  return plan_from_shapes(op, mode, sharded, ndims, shapes, p, true);
}

// The same checks without reporting a failure (its message in *why where given).
inline int check_plan(const char *op, IndexMode mode, const int *ndims, int64_t *const *shapes, Plan *p,
                      bool sharded = false, std::string *why = nullptr) {
  return plan_from_shapes(op, mode, sharded, ndims, shapes, p, false, why);
}

// Do two byte ranges share memory? (updates that alias input_x: an in-place call reads them
// as they were when it started, from a copy.)
inline bool overlaps(const void *a, size_t a_bytes, const void *b, size_t b_bytes) {
  const uintptr_t pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes && b_bytes && pa < pb + b_bytes && pb < pa + a_bytes;
}

// A sharded entry's 'shard' input must be int64 before the backend reads its two values.
inline int check_shard_dtype(const Plan &p, const char *const *dtypes) {
  if (std::strcmp(dtypes[3], "int64") == 0) return kOk;
  set_error(kBadArguments, "For '%s', 'shard' must be int64, but got %s.", p.op, dtypes[3]);
  return kBadArguments;
}

// The values of the 'shard' input (row_begin, global_rows), read by the backend: the shard
// must lie inside the table, and index vectors must name a row.
inline int set_shard(Plan *p, const int64_t *info) {
  const long long begin = info[0], rows = info[1];
  const long long local = p->x_ndim > 0 ? p->x_shape[0] : 0;
  if (p->depth < 1) {
    set_error(kBadArguments, "For '%s', a row-sharded 'input_x' needs index vectors of depth >= 1, but got depth %lld.",
              p->op, static_cast<long long>(p->depth));
    return kBadArguments;
  }
  if (begin < 0 || rows < 0 || begin > rows || local > rows - begin) {
    set_error(kBadArguments,
              "For '%s', 'shard' (row_begin, global_rows) must place the %lld rows of 'input_x' inside the table, "
              "but got (%lld, %lld).", p->op, local, begin, rows);
    return kBadArguments;
  }
  p->row_begin = begin;
  p->global_rows = rows;
  return kOk;
}

// What index_offsets learns about the offsets on its way (the engine's thread and path
// choice reads it, so that the indices are read once).
struct OffsetStats {
  int64_t min = 0, max = 0;  // smallest and largest offset (0 when there are none)
  bool sorted = true;        // offsets non-decreasing in index order
};

// The two data errors, one wording on every backend: `flat` is the position of the bad
// value in 'indices' (value `v`) or of the zero in 'updates'. The format_* functions write
// the message into `buf` (the Ascend path formats a device-reported status with them);
// index_error/zero_error also report it through the error channel.
inline void format_index_message(char *buf, size_t len, const Plan &p, int64_t flat, long long v) {
  const int64_t d = p.depth > 0 ? flat % p.depth : 0;
  std::snprintf(buf, len,
                "For '%s', each value of 'indices' must be in [0, %lld) (dimension %lld of 'input_x' with "
                "shape %s), but got %lld at position %s of 'indices' (shape %s).",
                p.op, static_cast<long long>(d < p.x_ndim ? p.x_shape[d] : 0), static_cast<long long>(d),
                shape_str(p.x_ndim, p.x_shape).c_str(), v, position_str(flat, p.idx_ndim, p.idx_shape).c_str(),
                shape_str(p.idx_ndim, p.idx_shape).c_str());
}
inline void format_zero_message(char *buf, size_t len, const Plan &p, int64_t flat) {
  std::snprintf(buf, len,
                "For '%s', integer division by zero: 'updates' must not contain 0 for dtype of 'input_x', "
                "but got 0 at position %s of 'updates' (shape %s).",
                p.op, position_str(flat, p.upd_ndim, p.upd_shape).c_str(), shape_str(p.upd_ndim, p.upd_shape).c_str());
}
inline int index_error(const Plan &p, int64_t flat, long long v) {
  if (p.drop_negative) {
    set_error(kIndexOutOfRange,
              "For '%s', each value of 'segment_ids' must be < num_segments (%lld) (a negative id drops its row), "
              "but got %lld at position %s of 'segment_ids' (shape %s).",
              p.op, static_cast<long long>(p.x_shape[0]), v, position_str(flat, p.idx_ndim, p.idx_shape).c_str(),
              shape_str(p.idx_ndim, p.idx_shape).c_str());
    return kIndexOutOfRange;
  }
  if (p.sharded && p.depth > 0 && flat % p.depth == 0) {
    std::vector<int64_t> global(p.x_shape, p.x_shape + p.x_ndim);
    global[0] = p.global_rows;
    set_error(kIndexOutOfRange,
              "For '%s', each value of 'indices' must be in [0, %lld) (dimension 0 of 'input_x', rows [%lld, %lld) "
              "of a table sharded by rows with global shape %s), but got %lld at position %s of 'indices' (shape %s).",
              p.op, static_cast<long long>(p.global_rows), static_cast<long long>(p.row_begin),
              static_cast<long long>(p.row_begin + p.x_shape[0]), shape_str(p.x_ndim, global.data()).c_str(), v,
              position_str(flat, p.idx_ndim, p.idx_shape).c_str(), shape_str(p.idx_ndim, p.idx_shape).c_str());
    return kIndexOutOfRange;
  }
  char message[1024];
  format_index_message(message, sizeof message, p, flat, v);
  set_error(kIndexOutOfRange, "%s", message);
  return kIndexOutOfRange;
}
inline int zero_error(const Plan &p, int64_t flat) {
  char message[1024];
  format_zero_message(message, sizeof message, p, flat);
  set_error(kDivisionByZero, "%s", message);
  return kDivisionByZero;
}

// Check every index and turn each index vector into the element offset of its slice
// (off[0..p.n)). Nothing is written to input_x before this has passed; the error names
// the first bad value in index order.
template <typename I>
int index_offsets(const Plan &p, const I *__restrict idx, int64_t *__restrict off, OffsetStats *st) {
  const int64_t n = p.n;
  *st = OffsetStats();
  if (n == 0) return kOk;
  if (p.depth == 1) {
    // Depth 1 (every Scatter* op): one branch-free pass that vectorises.
    const int64_t dim = p.x_shape[0], stride = p.strides[0];
    uint64_t bad = 0;
    int64_t lo = static_cast<int64_t>(idx[0]), hi = lo;
    bool down = false;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t v = static_cast<int64_t>(idx[k]);
      bad |= static_cast<uint64_t>(v) >= static_cast<uint64_t>(dim);
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
      // unsigned: a bad value (rejected below, before any write) must not overflow here
      off[k] = static_cast<int64_t>(static_cast<uint64_t>(v) * static_cast<uint64_t>(stride));
    }
    for (int64_t k = 1; k < n; ++k) down |= idx[k] < idx[k - 1];
    if (bad) {
      for (int64_t k = 0; k < n; ++k)
        if (static_cast<uint64_t>(static_cast<int64_t>(idx[k])) >= static_cast<uint64_t>(dim))
          return index_error(p, k, static_cast<long long>(idx[k]));
    }
    st->min = lo * stride;
    st->max = hi * stride;
    st->sorted = !down;
    return kOk;
  }
  const int64_t depth = p.depth;
  for (int64_t k = 0; k < n; ++k) {
    int64_t o = 0;
    for (int64_t d = 0; d < depth; ++d) {
      const int64_t v = static_cast<int64_t>(idx[k * depth + d]);
      if (v < 0 || v >= p.x_shape[d]) return index_error(p, k * depth + d, static_cast<long long>(v));
      o += v * p.strides[d];
    }
    off[k] = o;
  }
  int64_t lo = off[0], hi = off[0];
  bool down = false;
  for (int64_t k = 0; k < n; ++k) {
    lo = off[k] < lo ? off[k] : lo;
    hi = off[k] > hi ? off[k] : hi;
  }
  for (int64_t k = 1; k < n; ++k) down |= off[k] < off[k - 1];
  st->min = lo;
  st->max = hi;
  st->sorted = !down;
  return kOk;
}

// index_offsets for a row shard (Plan::sharded) and for segment ids (Plan::drop_negative:
// the whole input_x is the shard, a negative id is dropped). Every index vector is checked,
// dimension 0 against the global row count, before anything is written; the vectors whose
// row lies in the shard get the element offset of their slice in the shard at off[k], and
// their positions k, in index order, go to pos[0..*kept). The statistics are those of the
// kept offsets. A vector outside the shard is never applied, whatever the reduction.
template <typename I>
int shard_offsets(const Plan &p, const I *__restrict idx, int64_t *__restrict off, int64_t *__restrict pos,
                  int64_t *kept, OffsetStats *st) {
  const int64_t n = p.n, depth = p.depth, begin = p.row_begin;
  const uint64_t rows = static_cast<uint64_t>(p.x_shape[0]);
  *st = OffsetStats();
  int64_t m = 0;
  for (int64_t k = 0; k < n; ++k) {
    const I *vec = idx + k * depth;
    if (p.drop_negative && static_cast<int64_t>(vec[0]) < 0) continue;
    for (int64_t d = 0; d < depth; ++d) {
      const int64_t v = static_cast<int64_t>(vec[d]);
      if (v < 0 || v >= (d == 0 ? p.global_rows : p.x_shape[d]))
        return index_error(p, k * depth + d, static_cast<long long>(v));
    }
    const int64_t row = static_cast<int64_t>(vec[0]) - begin;
    if (static_cast<uint64_t>(row) >= rows) continue;
    int64_t o = row * p.strides[0];
    for (int64_t d = 1; d < depth; ++d) o += static_cast<int64_t>(vec[d]) * p.strides[d];
    if (m == 0) {
      st->min = st->max = o;
    } else {
      st->sorted = st->sorted && o >= off[pos[m - 1]];
      st->min = o < st->min ? o : st->min;
      st->max = o > st->max ? o : st->max;
    }
    off[k] = o;
    pos[m++] = k;
  }
  *kept = m;
  return kOk;
}

template <typename T> struct TypeTag { using type = T; };

// Checks the output MindSpore allocated from our inference (a 1-element int32 token, or
// input_x's shape and dtype) and the dtypes, then returns f(TypeTag<T>{}, TypeTag<I>{})
// for the value dtype T and index dtype I named in dtypes (from the lists in dtypes.h;
// kCopies: Update's bit-copy dtypes too). Every backend dispatches through this one function.
template <bool kCopies = false, typename F>
int dispatch_dtypes(const Plan &p, OutputMode om, const int *ndims, int64_t *const *shapes,
                    const char *const *dtypes, F &&f) {
  const char *op = p.op;
  const int o = p.out_arg;
  const bool token_ok = om == OutputMode::kToken && numel(ndims[o], shapes[o]) >= 1 &&
                        std::strcmp(dtypes[o], "int32") == 0;
  const bool full_ok = om != OutputMode::kToken && ndims[o] == ndims[0] &&
                       std::equal(shapes[o], shapes[o] + ndims[o], shapes[0]) &&
                       std::strcmp(dtypes[o], dtypes[0]) == 0;
  if (!token_ok && !full_ok) {
    set_error(kBadArguments, "For '%s', the output must be %s, but got shape %s of dtype %s.", op,
              om == OutputMode::kToken ? "a 1-element int32 token" : "of the shape and dtype of 'input_x'",
              shape_str(ndims[o], shapes[o]).c_str(), dtypes[o]);
    return kBadArguments;
  }
  if (std::strcmp(dtypes[0], dtypes[2]) != 0) {
    set_error(kBadArguments, "For '%s', 'updates' must have the dtype of 'input_x' (%s), but got %s.", op,
              dtypes[0], dtypes[2]);
    return kBadArguments;
  }
#define MSS_INDEX_CASE(IN, IT) \
  if (std::strcmp(dtypes[1], #IN) == 0) return f(TypeTag<T>{}, TypeTag<IT>{});
#define MSS_VALUE_CASE(VN, VT)                                                                      \
  if (std::strcmp(dtypes[0], #VN) == 0) {                                                           \
    using T = VT;                                                                                   \
    MS_SCATTER_INDEX_DTYPES(MSS_INDEX_CASE)                                                         \
    set_error(kBadArguments, "For '%s', 'indices' must be int32 or int64, but got %s.", op, dtypes[1]); \
    return kBadArguments;                                                                           \
  }
  MS_SCATTER_VALUE_DTYPES(MSS_VALUE_CASE)
  if constexpr (kCopies) {
    MS_SCATTER_COPY_DTYPES(MSS_VALUE_CASE)
  }
#undef MSS_VALUE_CASE
#undef MSS_INDEX_CASE
  set_error(kBadArguments, "For '%s', the dtype of 'input_x' is not supported, but got %s.", op, dtypes[0]);
  return kBadArguments;
}

}  // namespace ms_scatter

#endif  // MS_SCATTER_PLAN_H_
