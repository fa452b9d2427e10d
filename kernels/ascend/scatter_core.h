// ms-scatter: the Ascend backend's logic, free of CANN so that the CPU tests compile and run it
// (tests/test_ascend_core.py). The Ascend C kernel (op_kernel/ms_scatter_kernel.h) includes it and
// supplies only memory moves between global memory (GM) and the AI core's unified buffer (UB);
// the host tiling (op_host/ms_scatter_nd.cpp) calls make_tiling.
//
// One engine: every operator is ScatterNd<Op> at index depth d (Scatter* has d = 1 and the
// Python layer passes its indices as (..., 1)); the reduction is a compile-time tag
// (reducer.h). The Ascend op is out of place: y = x with the updates applied, plus a status
// [code, flat position, value, 0] (code 0, or plan.h's 2 = index out of range, 3 = integer
// division by zero). On an error nothing is scattered: y equals x.
//
// Work split (deterministic, no atomics, no cross-core barrier): the destination rows
// (x viewed as rows x slice, rows = prod(x.shape[:d])) and the slice columns are cut into a
// grid of regions, one per AI core, with region boundaries on 32-byte block boundaries of y
// (so that no two cores ever write the same block). Every core walks all index vectors in
// index order and applies those that land in its rows to its columns: duplicates apply in
// index order, and the result does not depend on the number of cores.
//
// Checks before any scatter: every core checks every index vector (and, for integer Div,
// every update for a zero) itself, so all cores reach the same verdict without
// communicating; the price is that each core reads all indices (and integer Div's updates).
//
// Two ways a core runs its region (make_tiling picks one):
//  * resident: a block of the region's rows is loaded into the UB accumulator window, all
//    index vectors are walked for it, the block is stored; float16 accumulates in float in
//    UB and is rounded once. Costs one walk over the indices per block.
//  * streaming: y (or, for float16, a float workspace in GM) is the accumulator; each
//    update loads its destination chunk into UB, applies, stores it back (consecutive
//    updates of one row keep it in UB). float16: the workspace is converted to y at the end,
//    rounding once.
#ifndef MS_SCATTER_ASCEND_SCATTER_CORE_H_
#define MS_SCATTER_ASCEND_SCATTER_CORE_H_

#if !defined(__CCE_AICORE__)
#include <cstdint>
#include <cstring>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/plan.h"
#endif

#include "ms_scatter/reducer.h"

namespace ms_scatter {
namespace ascend {

constexpr int kMaxDepth = 16;          // >= every depth: depth <= rank(input_x) <= 8 on Ascend (op_host kMaxRank)
constexpr int64_t kBlockBytes = 32;    // the AI core moves GM <-> UB in 32-byte blocks
constexpr int64_t kStatusWords = 4;    // the status output: [code, flat position, value, 0] (int64)
constexpr int64_t kMaxResidentBlocks = 8;  // resident only while it walks the indices at most this often

// Status codes: those of plan.h (kept equal; tests/test_ascend_core.py checks them).
constexpr int64_t kStatusOk = 0, kStatusIndex = 2, kStatusZero = 3;

// The tiling: int64 fields only, so that the host can copy the struct into CANN's tiling
// buffer byte for byte and the kernel can read it back word by word (load_tiling), with no
// TilingData macros and no layout question.
struct Tiling {
  int64_t n;               // index vectors
  int64_t depth;           // components per index vector
  int64_t slice;           // elements per destination row (prod(x.shape[d:]))
  int64_t rows;            // destination rows (prod(x.shape[:d]))
  int64_t check_zero;      // integer Div: a zero in updates is an error
  int64_t cores;           // AI cores that take part: row_groups * col_groups
  int64_t col_groups;      // the slice columns cut into col_groups ranges ...
  int64_t cols_per_group;  // ... of cols_per_group columns (a multiple of one block of y)
  int64_t rows_per_group;  // the rows cut into ranges of rows_per_group rows
  int64_t resident;        // 1: resident blocks, 0: streaming (see above)
  int64_t block_rows;      // resident: rows per block
  int64_t pitch;           // elements between two rows in the accumulator window
  int64_t acc_window;      // elements (accumulator type) of the accumulator window
  int64_t upd_window;      // elements of the updates window
  int64_t idx_window;      // elements of the index window (a multiple of depth)
  int64_t workspace_acc;   // streaming float16: accumulate in a float workspace in GM
  int64_t workspace_bytes; // bytes of that workspace (0 if none)
  int64_t dims[kMaxDepth];     // x.shape[:d]: the bounds of the index components
  int64_t weights[kMaxDepth];  // row = sum(index[c] * weights[c])
};
constexpr int64_t kTilingWords = static_cast<int64_t>(sizeof(Tiling) / sizeof(int64_t));

// The kernel's copy of the tiling from the tiling buffer, word by word (`Src` is the GM
// pointer type on the AI core, a plain pointer on the host).
template <typename Src>
MSS_HD void load_tiling(Src words, Tiling *t) {
  int64_t *dst = reinterpret_cast<int64_t *>(t);
  for (int64_t i = 0; i < kTilingWords; ++i) dst[i] = words[i];
}

MSS_HD int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
MSS_HD int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
MSS_HD int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }
MSS_HD int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }
MSS_HD int64_t gcd64(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

// The region of one core: rows [r0, r1), columns [c0, c1) (empty if r0 >= r1 or c0 >= c1).
struct Region {
  int64_t r0, r1, c0, c1;
};

MSS_HD Region region_of(const Tiling &t, int64_t core) {
  Region g{0, 0, 0, 0};
  if (core < 0 || core >= t.cores || t.col_groups <= 0) return g;
  const int64_t rg = core / t.col_groups, cg = core % t.col_groups;
  g.r0 = min64(t.rows, rg * t.rows_per_group);
  g.r1 = min64(t.rows, g.r0 + t.rows_per_group);
  g.c0 = min64(t.slice, cg * t.cols_per_group);
  g.c1 = min64(t.slice, g.c0 + t.cols_per_group);
  return g;
}

// ----------------------------------------------------------------------- the per-core loop
//
// `Mem` is what the device (or the CPU test) provides. Windows are UB buffers; offsets into
// GM are element offsets of the tensor named; a call never exceeds its window (the tiling
// sized them) and every window offset is a multiple of the pitch.
//
//   void fetch_indices(int64_t begin, int64_t count);      // index window <- indices[begin, +count)
//   int64_t index_at(int64_t j);                           // index window[j] as int64
//   void fetch_updates(int64_t begin, int64_t count);      // updates window <- updates[begin, +count)
//   Acc update_at(int64_t j);                              // updates window[j] in the accumulator type
//   void acc_from_x(int64_t win, int64_t gm, int64_t n);   // acc window[win, +n) <- load(x[gm, +n))
//   void acc_from_gm(int64_t win, int64_t gm, int64_t n);  // acc window <- the GM accumulator (y or workspace)
//   void acc_to_gm(int64_t win, int64_t gm, int64_t n);    // the GM accumulator <- acc window
//   void acc_to_y(int64_t win, int64_t gm, int64_t n);     // y[gm, +n) <- store(acc window)
//   Acc acc_at(int64_t j); void acc_set(int64_t j, Acc v);
//   void write_status(const int64_t *status);              // the status output (4 int64)
//
// Without a workspace the GM accumulator is y itself (Acc == T).

// The row of index vector `k` whose components are at index window [j, j + depth).
template <typename Mem>
MSS_HD int64_t row_at(const Tiling &t, Mem &m, int64_t j) {
  int64_t row = 0;
  for (int64_t c = 0; c < t.depth; ++c) row += m.index_at(j + c) * t.weights[c];
  return row;
}

// Every index component in range, then (integer Div) no zero divisor: the same verdict on
// every core. status = [code, flat position in indices / updates, value, 0].
template <typename Mem>
MSS_HD void validate(const Tiling &t, Mem &m, int64_t *status) {
  for (int64_t i = 0; i < kStatusWords; ++i) status[i] = 0;
  const int64_t total = t.n * t.depth;
  for (int64_t begin = 0; begin < total; begin += t.idx_window) {
    const int64_t count = min64(t.idx_window, total - begin);
    m.fetch_indices(begin, count);
    for (int64_t j = 0; j < count; ++j) {
      const int64_t v = m.index_at(j);
      const int64_t c = (begin + j) % t.depth;
      if (v < 0 || v >= t.dims[c]) {
        status[0] = kStatusIndex;
        status[1] = begin + j;
        status[2] = v;
        return;
      }
    }
  }
  if (!t.check_zero) return;
  const int64_t updates = t.n * t.slice;
  for (int64_t begin = 0; begin < updates; begin += t.upd_window) {
    const int64_t count = min64(t.upd_window, updates - begin);
    m.fetch_updates(begin, count);
    for (int64_t j = 0; j < count; ++j) {
      if (m.update_at(j) == 0) {
        status[0] = kStatusZero;
        status[1] = begin + j;
        return;
      }
    }
  }
}

// acc window[win, +len) takes the updates of index vector k at columns [col, col + len).
template <typename Op, typename Acc, typename Mem>
MSS_HD void apply_updates(const Tiling &t, Mem &m, int64_t k, int64_t col, int64_t len, int64_t win) {
  for (int64_t off = 0; off < len; off += t.upd_window) {
    const int64_t count = min64(t.upd_window, len - off);
    m.fetch_updates(k * t.slice + col + off, count);
    for (int64_t j = 0; j < count; ++j)
      m.acc_set(win + off + j, Op::template update<Acc>(m.acc_at(win + off + j), m.update_at(j)));
  }
}

// Calls f(k, row) for every index vector k in index order (row = its destination row).
// (Visitors are structs, not lambdas: the AI core compiler needs __aicore__ on every callee.)
template <typename Mem, typename F>
MSS_HD void for_each_vector(const Tiling &t, Mem &m, F &f) {
  if (t.depth == 0) {  // every vector selects the one row
    for (int64_t k = 0; k < t.n; ++k) f(k, int64_t(0));
    return;
  }
  const int64_t per_window = t.idx_window / t.depth;
  for (int64_t k0 = 0; k0 < t.n; k0 += per_window) {
    const int64_t count = min64(per_window, t.n - k0);
    m.fetch_indices(k0 * t.depth, count * t.depth);
    for (int64_t j = 0; j < count; ++j) f(k0 + j, row_at(t, m, j * t.depth));
  }
}

enum class Move { kFromX, kToY, kFromGm, kToGm };

template <typename Mem>
MSS_HD void move_acc(Mem &m, Move what, int64_t win, int64_t gm, int64_t len) {
  if (what == Move::kFromX)
    m.acc_from_x(win, gm, len);
  else if (what == Move::kToY)
    m.acc_to_y(win, gm, len);
  else if (what == Move::kFromGm)
    m.acc_from_gm(win, gm, len);
  else
    m.acc_to_gm(win, gm, len);
}

// Moves rows [r0, r1) x the region's columns between GM and the accumulator window (rows at
// multiples of the pitch), in one move when the rows are contiguous in both.
template <typename Mem>
MSS_HD void move_rows(const Tiling &t, const Region &g, int64_t r0, int64_t r1, Mem &m, Move what) {
  if (g.c0 == 0 && g.c1 == t.slice && t.pitch == t.slice) {
    move_acc(m, what, 0, r0 * t.slice, (r1 - r0) * t.slice);
    return;
  }
  for (int64_t r = r0; r < r1; ++r) move_acc(m, what, (r - r0) * t.pitch, r * t.slice + g.c0, g.c1 - g.c0);
}

// Resident: the vectors that land in block [b0, b1) are applied to the block in UB.
template <typename Op, typename Acc, typename Mem>
struct ResidentVisitor {
  const Tiling &t;
  const Region &g;
  Mem &m;
  int64_t b0, b1;
  MSS_HD void operator()(int64_t k, int64_t row) {
    if (row >= b0 && row < b1) apply_updates<Op, Acc>(t, m, k, g.c0, g.c1 - g.c0, (row - b0) * t.pitch);
  }
};

template <typename Op, typename Acc, typename Mem>
MSS_HD void run_resident(const Tiling &t, const Region &g, Mem &m, bool scatter) {
  for (int64_t b0 = g.r0; b0 < g.r1; b0 += t.block_rows) {
    const int64_t b1 = min64(g.r1, b0 + t.block_rows);
    move_rows(t, g, b0, b1, m, Move::kFromX);
    if (scatter) {
      ResidentVisitor<Op, Acc, Mem> visit{t, g, m, b0, b1};
      for_each_vector(t, m, visit);
    }
    move_rows(t, g, b0, b1, m, Move::kToY);
  }
}

// Moves the region in chunks of at most `chunk` elements through window offset 0: `first`
// then `second` on each chunk, row by row (or over the whole contiguous range when the
// region spans full rows).
template <typename Mem>
MSS_HD void chunks(const Tiling &t, const Region &g, int64_t chunk, Mem &m, Move first, Move second) {
  if (g.c0 == 0 && g.c1 == t.slice) {
    const int64_t end = g.r1 * t.slice;
    for (int64_t gm = g.r0 * t.slice; gm < end; gm += chunk) {
      const int64_t len = min64(chunk, end - gm);
      move_acc(m, first, 0, gm, len);
      move_acc(m, second, 0, gm, len);
    }
    return;
  }
  for (int64_t r = g.r0; r < g.r1; ++r) {
    for (int64_t c = g.c0; c < g.c1; c += chunk) {
      const int64_t len = min64(chunk, g.c1 - c);
      move_acc(m, first, 0, r * t.slice + c, len);
      move_acc(m, second, 0, r * t.slice + c, len);
    }
  }
}

// Streaming: each vector that lands in the region loads its destination, applies, stores;
// the last row stays in UB while consecutive vectors hit it (when a row segment fits).
template <typename Op, typename Acc, typename Mem>
struct StreamingVisitor {
  const Tiling &t;
  const Region &g;
  Mem &m;
  int64_t held;  // row kept in the window, or -1
  MSS_HD void operator()(int64_t k, int64_t row) {
    if (row < g.r0 || row >= g.r1) return;
    const int64_t cw = g.c1 - g.c0;
    if (cw <= t.acc_window) {
      if (row != held) {
        if (held >= 0) m.acc_to_gm(0, held * t.slice + g.c0, cw);
        m.acc_from_gm(0, row * t.slice + g.c0, cw);
        held = row;
      }
      apply_updates<Op, Acc>(t, m, k, g.c0, cw, 0);
      return;
    }
    for (int64_t c = g.c0; c < g.c1; c += t.acc_window) {
      const int64_t len = min64(t.acc_window, g.c1 - c);
      m.acc_from_gm(0, row * t.slice + c, len);
      apply_updates<Op, Acc>(t, m, k, c, len, 0);
      m.acc_to_gm(0, row * t.slice + c, len);
    }
  }
};

template <typename Op, typename Acc, typename Mem>
MSS_HD void run_streaming(const Tiling &t, const Region &g, Mem &m, bool scatter) {
  chunks(t, g, t.acc_window, m, Move::kFromX, t.workspace_acc ? Move::kToGm : Move::kToY);  // accumulator = x
  if (scatter) {
    StreamingVisitor<Op, Acc, Mem> visit{t, g, m, -1};
    for_each_vector(t, m, visit);
    if (visit.held >= 0) m.acc_to_gm(0, visit.held * t.slice + g.c0, g.c1 - g.c0);
  }
  if (t.workspace_acc) chunks(t, g, t.acc_window, m, Move::kFromGm, Move::kToY);  // rounded once
}

// One AI core's whole share of a call. Every core in [0, t.cores) runs it; core 0 writes the
// status. Acc is the accumulator type (float for half precision, else T).
template <typename Op, typename Acc, typename Mem>
MSS_HD void run_core(const Tiling &t, int64_t core, Mem &m) {
  if (core < 0 || core >= t.cores) return;
  const Region g = region_of(t, core);
  const bool has_region = g.r0 < g.r1 && g.c0 < g.c1;
  if (!has_region && core != 0) return;
  int64_t status[kStatusWords];
  validate(t, m, status);
  if (has_region) {
    const bool scatter = status[0] == kStatusOk;
    if (t.resident)
      run_resident<Op, Acc>(t, g, m, scatter);
    else
      run_streaming<Op, Acc>(t, g, m, scatter);
  }
  if (core == 0) m.write_status(status);
}

// ----------------------------------------------------------------------- host: the tiling
#if !defined(__CCE_AICORE__)

// What the host knows about a call besides its shapes (plan.h's Plan).
struct TilingInput {
  int64_t elem_bytes;     // bytes of an element of x / updates / y
  int64_t acc_bytes;      // bytes of the accumulator type (4 for float16, else elem_bytes)
  int64_t index_bytes;    // bytes of an index component (4 or 8)
  int64_t check_zero;     // integer Div
  int64_t cores;          // AI (vector) cores available
  int64_t ub_bytes;       // UB bytes the kernel may use for its windows
  int64_t force_mode;     // 0: choose; 1: resident; 2: streaming (tests)
};

// UB the kernel keeps for itself besides the windows: the status block, and, for float16,
// the staging buffer of a conversion (accounted in the window sizes below).
constexpr int64_t kUbReserve = 2 * kBlockBytes;

// Fills `t` for a call with plan `p` (depth, n, slice, shapes: plan.h's make_plan). Returns
// false if the UB cannot hold the smallest windows (never for real UB sizes).
inline bool make_tiling(int64_t depth, int64_t n, int64_t slice, const int64_t *x_dims, const TilingInput &in,
                        Tiling *t) {
  *t = Tiling();
  if (depth < 0 || depth > kMaxDepth || in.elem_bytes <= 0 || in.acc_bytes <= 0 || in.index_bytes <= 0)
    return false;
  t->n = n;
  t->depth = depth;
  t->slice = slice;
  int64_t rows = 1;
  for (int64_t c = depth - 1; c >= 0; --c) {
    t->dims[c] = x_dims[c];
    t->weights[c] = rows;
    rows *= x_dims[c];
  }
  t->rows = rows;
  t->check_zero = in.check_zero;

  // Windows: the accumulator (and, when it differs from T, a staging buffer of T for the
  // conversion) half of the UB, the updates a quarter, the indices a quarter.
  const int64_t budget = in.ub_bytes - kUbReserve;
  const int64_t stage = in.acc_bytes != in.elem_bytes ? in.elem_bytes : 0;
  const int64_t acc_elems = (budget / 2) / (in.acc_bytes + stage);
  const int64_t acc_align = kBlockBytes / in.acc_bytes;
  t->acc_window = acc_elems / acc_align * acc_align;
  t->upd_window = (budget / 4) / in.elem_bytes / (kBlockBytes / in.elem_bytes) * (kBlockBytes / in.elem_bytes);
  const int64_t idx_elems = (budget / 4) / in.index_bytes;
  t->idx_window = depth > 0 ? idx_elems / depth * depth : idx_elems;
  if (t->acc_window < acc_align || t->upd_window < 1 || t->idx_window < max64(depth, 1)) return false;

  // The grid: columns cut at block boundaries of y when a row is a whole number of blocks,
  // rows cut where row * slice * elem_bytes is a whole number of blocks.
  const int64_t cores = max64(in.cores, 1);
  const int64_t col_align = kBlockBytes / min64(in.elem_bytes, kBlockBytes);
  t->col_groups = 1;
  t->cols_per_group = slice;
  if (slice > 0 && slice % col_align == 0 && slice >= 2 * col_align && cores > 1) {
    const int64_t groups = min64(cores, slice / col_align);
    t->cols_per_group = round_up(ceil_div(slice, groups), col_align);
    t->col_groups = ceil_div(slice, t->cols_per_group);
  }
  if (rows == 0 || slice == 0) {
    t->rows_per_group = max64(rows, 1);
  } else {
    const int64_t row_align = kBlockBytes / gcd64(slice * in.elem_bytes, kBlockBytes);
    const int64_t row_groups = max64(1, cores / t->col_groups);
    t->rows_per_group = round_up(ceil_div(rows, row_groups), row_align);
  }
  t->cores = t->col_groups * max64(1, ceil_div(rows, t->rows_per_group));

  // Resident blocks when a row segment fits the window and the blocks are few. With whole
  // rows per core a block is one contiguous move (rows back to back); with a column range
  // each row is its own move and starts on a block of the UB.
  const int64_t cw = t->cols_per_group;
  t->pitch = t->col_groups == 1 ? max64(slice, 1) : round_up(max64(cw, 1), acc_align);
  t->block_rows = t->pitch <= t->acc_window ? t->acc_window / t->pitch : 0;
  const int64_t blocks = t->block_rows > 0 ? ceil_div(min64(t->rows_per_group, rows), t->block_rows) : 0;
  bool resident = t->block_rows > 0 && blocks <= kMaxResidentBlocks;
  if (in.force_mode == 1) resident = t->block_rows > 0;
  if (in.force_mode == 2) resident = false;
  t->resident = resident ? 1 : 0;
  if (!resident) {
    t->block_rows = 0;
    t->pitch = max64(cw, 1);
  }
  t->workspace_acc = (!resident && in.acc_bytes != in.elem_bytes) ? 1 : 0;
  t->workspace_bytes = t->workspace_acc ? round_up(rows * slice * in.acc_bytes, kBlockBytes) : 0;
  return true;
}

// The value dtypes of the Ascend op: dtypes.h's list without float64 (an AI core has no
// double arithmetic). bytes / acc_bytes: an element and its accumulator; integral: integer Div
// rejects a zero divisor.

struct DtypeInfo {
  int64_t bytes = 0, acc_bytes = 0;
  bool integral = false;
};

inline bool ascend_value_dtype(const char *name, DtypeInfo *info) {
#define MSS_DTYPE_INFO(VN, VT)                                                      \
  if (std::strcmp(name, #VN) == 0) {                                                \
    info->bytes = sizeof(VT);                                                       \
    info->acc_bytes = sizeof(typename AccOf<VT>::type);                             \
    info->integral = IntTraits<VT>::integral;                                       \
    return true;                                                                    \
  }
  MS_SCATTER_ASCEND_VALUE_DTYPES(MSS_DTYPE_INFO)
#undef MSS_DTYPE_INFO
  return false;
}

inline bool ascend_index_dtype(const char *name, int64_t *bytes) {
#define MSS_INDEX_INFO(IN, IT)      \
  if (std::strcmp(name, #IN) == 0) { \
    *bytes = sizeof(IT);            \
    return true;                    \
  }
  MS_SCATTER_INDEX_DTYPES(MSS_INDEX_INFO)
#undef MSS_INDEX_INFO
  return false;
}

// The host tiling of one call of the CANN op `op` (MsScatterNd<R>): shapes of x, indices,
// updates (y has x's shape), dtype names, `is_div` for the Div op. Checks the shapes with
// plan.h (the one wording, reported through the error channel) and the dtypes; returns kOk or
// kBadArguments. The op_host tiling function is this plus reading the shapes from CANN.
inline int tiling_for_call(const char *op, bool is_div, const int *ndims, int64_t *const *shapes,
                           const char *x_dtype, const char *index_dtype, int64_t cores, int64_t ub_bytes,
                           int64_t force_mode, Tiling *t) {
  int nd[4] = {ndims[0], ndims[1], ndims[2], ndims[0]};
  int64_t *sh[4] = {shapes[0], shapes[1], shapes[2], shapes[0]};
  Plan p;
  if (make_plan(op, IndexMode::kNd, false, 4, nd, sh, &p) != kOk) return kBadArguments;
  DtypeInfo v;
  int64_t index_bytes = 0;
  if (!ascend_value_dtype(x_dtype, &v) || !ascend_index_dtype(index_dtype, &index_bytes)) {
    set_error(kBadArguments, "For '%s', the Ascend kernel has no dtype %s with indices of %s.", op, x_dtype,
              index_dtype);
    return kBadArguments;
  }
  TilingInput in{v.bytes, v.acc_bytes, index_bytes, (is_div && v.integral) ? 1 : 0, cores, ub_bytes, force_mode};
  if (!make_tiling(p.depth, p.n, p.slice, p.x_shape, in, t)) {
    set_error(kBadArguments, "For '%s', no tiling fits a UB of %lld bytes.", op, static_cast<long long>(ub_bytes));
    return kBadArguments;
  }
  return kOk;
}

#endif  // !__CCE_AICORE__

}  // namespace ascend
}  // namespace ms_scatter

#endif  // MS_SCATTER_ASCEND_SCATTER_CORE_H_
