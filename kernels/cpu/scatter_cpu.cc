// ms-scatter CPU kernels: one engine for the whole family.
//
// Every operator is ScatterNd<Op> with some index depth: Scatter<Op> is depth 1 over any
// index shape, TensorScatter<Op> is a copy followed by ScatterNd<Op>. The reduction is
// a compile-time tag (reducer.h); value and index dtypes and the exported entry points
// are generated from the lists in dtypes.h.
//
// Entry points use MindSpore's aot signature and are registered through ops.Custom:
//   Scatter<Op>_token / ScatterNd<Op>_token    in place on input_x, 1-element output
//   Scatter<Op>_return / ScatterNd<Op>_return  in place, plus a copy of the result
//   TensorScatter<Op>                          out of place (input_x untouched)
//   Gspmm<R> / Gsddmm<O>                       fused message passing (message.h)
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <mutex>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/plan.h"
#include "ms_scatter/reducer.h"
#include "row_ops.h"
#include "thread_pool.h"
#include "thread_rule.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace ms_scatter {
namespace {

// Calls on the same input_x serialise (striped locks keyed by its address), so two
// concurrent in-place calls on one Parameter never lose an update.
std::mutex &lock_for(const void *p) {
  static std::mutex stripes[64];
  return stripes[(reinterpret_cast<uintptr_t>(p) >> 6) % 64];
}

// Scratch memory that a calling thread keeps between calls (a fresh vector costs an mmap,
// page faults and a zero fill per call), grow-only, contents not initialised; a buffer much
// larger than the call needs is given back. Buffers of 2 MiB and more are 2 MiB aligned and
// marked for transparent huge pages (random rows of the float16 mirror are partly bound by
// TLB misses). Measurements: docs/performance.md, "Notes from the kernels".
template <typename T>
class Scratch {
 public:
  static_assert(std::is_trivial<T>::value, "scratch holds plain values");
  Scratch() = default;
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { std::free(data_); }
  T *get(size_t n) {
    if (n == 0) n = 1;
    if (cap_ * sizeof(T) > kReleaseBytes && n < cap_ / 4) reset();
    if (n > cap_) {
      reset();
      size_t bytes = n * sizeof(T);
      void *p = nullptr;
      if (bytes >= kHugeBytes) {
        bytes = (bytes + kHugeBytes - 1) & ~(kHugeBytes - 1);
        p = std::aligned_alloc(kHugeBytes, bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
        if (p) madvise(p, bytes, MADV_HUGEPAGE);  // advisory: ignored where THP is off
#endif
      } else {
        bytes = (bytes + 63) & ~size_t(63);  // rows of float accumulators start on a cache line
        p = std::aligned_alloc(64, bytes);
      }
      if (!p) throw std::bad_alloc();
      data_ = static_cast<T *>(p);
      cap_ = bytes / sizeof(T);
    }
    return data_;
  }

 private:
  static constexpr size_t kHugeBytes = size_t(2) << 20;
  static constexpr size_t kReleaseBytes = size_t(64) << 20;
  void reset() {
    std::free(data_);
    data_ = nullptr;
    cap_ = 0;
  }
  T *data_ = nullptr;
  size_t cap_ = 0;
};

template <typename T>
int check_nonzero(const Plan &p, const T *upd) {
  const int64_t total = p.n * p.slice;
  for (int64_t i = 0; i < total; ++i)
    if (upd[i] == T(0)) return zero_error(p, i);
  return kOk;
}

// ---------------------------------------------------------------------------------
// Deterministic parallel plan: every destination slice is owned by exactly one thread,
// and each thread applies its updates in index order, so the result equals the serial
// one bit for bit at any thread count.

constexpr int64_t kParallelMinWork = int64_t(1) << 22;  // elements (n * slice) below which one thread runs
constexpr int64_t kFewRowsBytes = int64_t(1) << 20;      // touched span below which one thread runs
constexpr int kBinsPerThread = 64;
constexpr int64_t kBlockBytes = int64_t(256) << 10;     // float accumulators of one destination block

struct Work {
  int threads = 1;
  std::vector<int64_t> pos;    // positions k, grouped by owning thread, index order within a group
  std::vector<int64_t> begin;  // group t is pos[begin[t], begin[t+1])
};

// Threads for one call. An explicit setting is used as given wherever the work is large
// enough to split. The automatic setting learns the count per kind of work from the calls
// themselves (thread_rule.h); until a kind has decided, or with MS_SCATTER_THREAD_RULE=fixed,
// the fixed rule from the benchmark on a 2-core machine: the direct path (accumulator ==
// storage type) on unsorted indices is bound by random row read-modify-write and ran
// 1.0-1.4x slower on two threads than on one; the float16 grouped path (sort + float
// accumulation) gained 1.6-2.1x from two threads, and sorted indices (a stream) 1.3x.
inline ThreadRule::Pick choose_threads(const Plan &p, int64_t n, int64_t min_off, int64_t max_off, size_t elem_size,
                                       bool grouped, bool sorted) {
  ThreadRule::Pick one;
  const int setting = ThreadPool::instance().setting();
  const int avail = setting > 0 ? setting : ThreadPool::all_cores();
  if (avail <= 1 || n * p.slice < kParallelMinWork || n < 2 * avail) return one;
  // All updates on a few rows: the work stays in cache and one thread is faster.
  const int64_t span = (max_off - min_off + p.slice) * static_cast<int64_t>(elem_size);
  if (span < kFewRowsBytes) return one;
  if (setting > 0) {
    one.threads = setting;
    return one;
  }
  const WorkKind kind = grouped ? (sorted ? WorkKind::kGroupedSorted : WorkKind::kGrouped)
                                : (sorted ? WorkKind::kDirectSorted : WorkKind::kDirect);
  const uint64_t key = ThreadRule::make_key(kind, elem_size, static_cast<uint64_t>(n * p.slice),
                                            static_cast<uint64_t>(span), avail);
  return ThreadRule::instance().pick(key, avail, grouped || sorted ? avail : 1);
}

// Split positions pos[0..n) ([0, n) when pos is null) among `threads` owners by
// destination, balancing counts with a histogram of the offsets.
inline void partition(const int64_t *off, const int64_t *pos, int64_t n, int64_t min_off, int64_t max_off,
                      int threads, Work *w) {
  w->threads = threads;
  const int bins = threads * kBinsPerThread;
  const double scale = static_cast<double>(bins) / static_cast<double>(max_off - min_off + 1);
  auto bin_of = [&](int64_t o) {
    int b = static_cast<int>(static_cast<double>(o - min_off) * scale);
    return b < bins ? b : bins - 1;
  };
  // Per chunk (one per thread, contiguous in index order) bin counts.
  std::vector<int64_t> counts(static_cast<size_t>(threads) * bins, 0);
  const int64_t chunk = (n + threads - 1) / threads;
  auto chunk_range = [&](int c, int64_t *lo, int64_t *hi) {
    *lo = std::min<int64_t>(n, c * chunk);
    *hi = std::min<int64_t>(n, *lo + chunk);
  };
  ThreadPool &pool = ThreadPool::instance();
  auto count_fn = [&](int c) {
    int64_t lo, hi;
    chunk_range(c, &lo, &hi);
    int64_t *cnt = counts.data() + static_cast<size_t>(c) * bins;
    for (int64_t k = lo; k < hi; ++k) ++cnt[bin_of(off[pos ? pos[k] : k])];
  };
  if (!pool.run(threads, count_fn))
    for (int c = 0; c < threads; ++c) count_fn(c);
  // Bins -> owners: contiguous runs of bins with about n / threads updates each.
  std::vector<int> owner(static_cast<size_t>(bins));
  {
    int64_t acc = 0;
    int t = 0;
    for (int b = 0; b < bins; ++b) {
      int64_t total = 0;
      for (int c = 0; c < threads; ++c) total += counts[static_cast<size_t>(c) * bins + b];
      if (t < threads - 1 && acc > 0 && acc + total / 2 > (t + 1) * n / threads) ++t;
      owner[b] = t;
      acc += total;
    }
  }
  // Start of each (owner, chunk) run in pos: owner-major, chunk order inside.
  std::vector<int64_t> start(static_cast<size_t>(threads) * threads, 0);  // [chunk][owner]
  w->begin.assign(static_cast<size_t>(threads) + 1, 0);
  {
    std::vector<int64_t> per(static_cast<size_t>(threads) * threads, 0);
    for (int c = 0; c < threads; ++c)
      for (int b = 0; b < bins; ++b) per[static_cast<size_t>(c) * threads + owner[b]] += counts[static_cast<size_t>(c) * bins + b];
    int64_t run = 0;
    for (int t = 0; t < threads; ++t) {
      w->begin[t] = run;
      for (int c = 0; c < threads; ++c) {
        start[static_cast<size_t>(c) * threads + t] = run;
        run += per[static_cast<size_t>(c) * threads + t];
      }
    }
    w->begin[threads] = run;
  }
  w->pos.resize(static_cast<size_t>(n));
  auto fill_fn = [&](int c) {
    int64_t lo, hi;
    chunk_range(c, &lo, &hi);
    int64_t *st = start.data() + static_cast<size_t>(c) * threads;
    for (int64_t k = lo; k < hi; ++k) {
      const int64_t at = pos ? pos[k] : k;
      w->pos[st[owner[bin_of(off[at])]]++] = at;
    }
  };
  if (!pool.run(threads, fill_fn))
    for (int c = 0; c < threads; ++c) fill_fn(c);
}

// Prefetches the cache lines a row occupies (from its address: a row of 256 bytes that
// starts 16 bytes into a line spans 5 lines), at most 8.
template <typename T>
inline void prefetch_row(const T *row, int64_t slice, int rw = 0) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(row) & ~uintptr_t(63);
  const uintptr_t last = (reinterpret_cast<uintptr_t>(row + slice) - 1) & ~uintptr_t(63);
  const uintptr_t end = std::min(last, first + 7 * 64);
  for (uintptr_t l = first; l <= end; l += 64) {
    if (rw) __builtin_prefetch(reinterpret_cast<const void *>(l), 1);
    else __builtin_prefetch(reinterpret_cast<const void *>(l), 0);
  }
}

// Accumulator == storage type: apply the updates of positions pos[0..m) in order, one
// slice at a time, prefetching destinations a few updates ahead.
template <typename T, typename Op>
void apply_direct(T *dst, const T *upd, const int64_t *off, const int64_t *pos, int64_t m, int64_t slice) {
  constexpr int64_t kAhead = 16;  // the measured knee (docs/performance.md, "Notes from the kernels")
  for (int64_t q = 0; q < m; ++q) {
    const int64_t k = pos ? pos[q] : q;
    if (q + kAhead < m) prefetch_row(dst + off[pos ? pos[q + kAhead] : q + kAhead], slice, 1);
    rows::direct<T, Op>(dst + off[k], upd + k * slice, slice);
  }
}

// The slice (row) of an element offset, a multiple of slice: a shift when slice is a
// power of two (a 64-bit division costs more than the row's update).
struct SliceRow {
  explicit SliceRow(int64_t slice)
      : slice(slice), shift((slice & (slice - 1)) == 0 ? __builtin_ctzll(static_cast<unsigned long long>(slice)) : -1) {}
  int64_t operator()(int64_t e) const { return shift >= 0 ? e >> shift : e / slice; }
  int64_t slice;
  int shift;
};

constexpr int64_t kStreamPrefetchBytes = int64_t(16) << 20;

// Prefetches the update rows at(*next) .. at(stop - 1) not prefetched yet (each row once).
template <typename T, typename At>
inline void prefetch_updates(const T *upd, At at, int64_t slice, int64_t stop, int64_t *next) {
  for (; *next < stop; ++*next) prefetch_row(upd + at(*next) * slice, slice);
}

// Half precision on sorted offsets (a stream): each run of updates onto one destination
// slice is accumulated in float registers and rounded once (rows::run_into). No buffer, no
// sort.
template <typename T, typename Op>
void apply_runs(T *dst, const T *upd, const int64_t *off, const int64_t *pos, int64_t m, int64_t slice) {
  using A = typename Reducer<T, Op>::acc_t;
  thread_local Scratch<A> scratch_buf;  // only where the build has no AVX-512 (rows::run_into)
  A *scratch = scratch_buf.get(static_cast<size_t>(slice));
  auto at = [pos](int64_t q) { return pos ? pos[q] : q; };
  constexpr int64_t kAhead = 16;
  // A stream of updates beyond the caches: its rows prefetched about 2 KiB ahead of the run
  // being reduced, each once (on 16384 x 64 float16, in cache, the prefetch cost 1.1-1.2x).
  const int64_t upd_ahead = m * slice * static_cast<int64_t>(sizeof(T)) >= kStreamPrefetchBytes
                                ? std::max<int64_t>(2, 2048 / (slice * static_cast<int64_t>(sizeof(T))))
                                : 0;
  int64_t next = 0;
  for (int64_t q = 0; q < m;) {
    const int64_t o = off[at(q)];
    int64_t e = q + 1;
    while (e < m && off[at(e)] == o) ++e;
    if (e + kAhead < m) prefetch_row(dst + off[at(e + kAhead)], slice, 1);
    if (upd_ahead) prefetch_updates(upd, at, slice, std::min(m, e + upd_ahead), &next);
    rows::run_into<T, Op>(dst + o, upd, at, q, e - q, slice, scratch);
    q = e;
  }
}

// Half precision on unsorted offsets spanning at most kCountedRows slices, dense. A count
// pass finds the distinct slices (in first-touch order) and their update counts. Then:
// - many distinct slices: the positions counting-sorted by slice (stably), and each slice's
//   run of updates accumulated in float registers and rounded once (rows::run_into, as for
//   sorted offsets): each touched slice of input_x read and written once, each update row
//   read once, no float copy of any slice;
// - few (their float copies within kSlotBytes): each slice widened into a float slot, the
//   updates streamed onto the slots in index order, the slots rounded back.
// The counts stay with the calling thread, all zero between calls. This split beat the
// earlier one (singles in place, float slots for the rest) on every case measured, and sets
// kSlotBytes where runs and slots cross (docs/performance.md, "Notes from the kernels").
constexpr int64_t kCountedRows = int64_t(1) << 20;  // 4 MiB of counts
constexpr int64_t kSlotBytes = int64_t(256) << 10;

template <typename T, typename Op>
void apply_counted(T *dst, const T *upd, const int64_t *off, const int64_t *pos, int64_t m, int64_t slice,
                   int64_t lo, int64_t span) {
  using A = typename Reducer<T, Op>::acc_t;
  thread_local std::vector<uint32_t> count_buf;  // all zero between calls
  thread_local Scratch<uint32_t> rows_buf;
  thread_local Scratch<int64_t> order_buf;
  thread_local Scratch<A> scratch_buf;  // only where the build has no AVX-512 (rows::run_into)
  thread_local Scratch<A> acc_buf;
  if (count_buf.size() < static_cast<size_t>(span)) count_buf.resize(static_cast<size_t>(span));
  uint32_t *count = count_buf.data();
  uint32_t *rows = rows_buf.get(static_cast<size_t>(m));  // the distinct slices, in first-touch order
  int64_t *order = order_buf.get(static_cast<size_t>(m));
  A *scratch = scratch_buf.get(static_cast<size_t>(slice));
  const SliceRow row_of(slice);
  auto at = [pos](int64_t q) { return pos ? pos[q] : q; };
  int64_t nt = 0;
  for (int64_t q = 0; q < m; ++q) {
    const uint32_t r = static_cast<uint32_t>(row_of(off[at(q)] - lo));
    const uint32_t c = count[r];
    rows[nt] = r;
    nt += c == 0;
    count[r] = c + 1;
  }
  T *base = dst + lo;
  if (nt * slice * static_cast<int64_t>(sizeof(A)) <= kSlotBytes) {
    // few distinct slices (the count of a slice becomes its slot number)
    A *acc = acc_buf.get(static_cast<size_t>(nt * slice));
    for (int64_t t = 0; t < nt; ++t) {
      count[rows[t]] = static_cast<uint32_t>(t);
      rows::widen_row<T>(base + static_cast<int64_t>(rows[t]) * slice, acc + t * slice, slice);
    }
    for (int64_t q = 0; q < m; ++q) {
      const int64_t k = at(q);
      rows::accumulate<T, Op>(acc + static_cast<int64_t>(count[row_of(off[k] - lo)]) * slice, upd + k * slice, slice);
    }
    for (int64_t t = 0; t < nt; ++t) {
      rows::narrow_row<T>(acc + t * slice, base + static_cast<int64_t>(rows[t]) * slice, slice);
      count[rows[t]] = 0;
    }
    return;
  }
  // many: count[r] becomes where the run of slice r starts, then (after the fill) where it ends
  uint32_t run = 0;
  for (int64_t t = 0; t < nt; ++t) {
    const uint32_t r = rows[t];
    const uint32_t c = count[r];
    count[r] = run;
    run += c;
  }
  for (int64_t q = 0; q < m; ++q) {
    const int64_t k = at(q);
    order[count[row_of(off[k] - lo)]++] = k;
  }
  auto in_order = [order](int64_t q) { return order[q]; };
  constexpr int64_t kAhead = 16;  // slices ahead for input_x, updates ahead for the update rows
  int64_t next = 0;               // the next update row to prefetch
  int64_t q = 0;
  for (int64_t t = 0; t < nt; ++t) {
    const uint32_t r = rows[t];
    const int64_t e = count[r];
    if (t + kAhead < nt) prefetch_row(base + static_cast<int64_t>(rows[t + kAhead]) * slice, slice, 1);
    prefetch_updates(upd, in_order, slice, std::min(m, e + kAhead), &next);
    rows::run_into<T, Op>(base + static_cast<int64_t>(r) * slice, upd, in_order, q, e - q, slice, scratch);
    count[r] = 0;
    q = e;
  }
}

// Half precision: group positions pos[0..m) by destination (keeping index order inside
// a group), accumulate each destination slice in float and round once. [lo, hi]: the
// extreme offsets when the caller knows them (lo < 0: not known); sorted: the offsets
// are non-decreasing.
template <typename T, typename Op>
void apply_grouped(T *dst, const T *upd, const int64_t *off, const int64_t *pos, int64_t m, int64_t slice,
                   int64_t lo, int64_t hi, bool sorted) {
  using R = Reducer<T, Op>;
  using A = typename R::acc_t;
  if (m == 0 || slice == 0) return;
  if (sorted) {
    apply_runs<T, Op>(dst, upd, off, pos, m, slice);
    return;
  }
  if (lo < 0) {
    lo = hi = off[pos ? pos[0] : 0];
    for (int64_t q = 1; q < m; ++q) {
      const int64_t o = off[pos ? pos[q] : q];
      lo = std::min(lo, o);
      hi = std::max(hi, o);
    }
  }
  const int64_t span = (hi - lo) / slice + 1;  // destination slices between the extremes
  const bool dense = span <= 4 * m + 1024;
  if (dense && span <= kCountedRows && m <= int64_t(UINT32_MAX)) {  // (a run end must fit a count)
    apply_counted<T, Op>(dst, upd, off, pos, m, slice, lo, span);
    return;
  }
  auto position = [pos](int64_t q) { return pos ? pos[q] : q; };
  if (dense && static_cast<uint64_t>(slice) <= UINT32_MAX) {
    // Dense beyond kCountedRows slices: counting-sort the positions (stably) into
    // destination blocks whose float accumulators fit in L2, then take each block's
    // updates in index order: the offsets are then read as a stream, dense blocks are loaded
    // whole, updates prefetched 32 ahead (docs/performance.md, "Notes from the kernels").
    const int64_t rows =
        std::min(span, std::max<int64_t>(1, kBlockBytes / (slice * static_cast<int64_t>(sizeof(A)))));
    const int64_t blocks = (span + rows - 1) / rows;
    std::vector<int64_t> start(static_cast<size_t>(blocks) + 1, 0);
    const SliceRow block_of(rows * slice);  // a shift when the block's elements are a power of two
    for (int64_t q = 0; q < m; ++q) ++start[block_of(off[position(q)] - lo) + 1];
    for (int64_t b = 0; b < blocks; ++b) start[b + 1] += start[b];
    // sorted: the positions, block by block; local: each one's element offset inside its
    // block (< rows * slice, which is at most max(kBlockBytes / sizeof(A), slice) < 2^32)
    thread_local Scratch<int64_t> sorted_buf;
    thread_local Scratch<uint32_t> local_buf;
    int64_t *order = sorted_buf.get(static_cast<size_t>(m));
    uint32_t *local = local_buf.get(static_cast<size_t>(m));
    {
      std::vector<int64_t> fill(start.begin(), start.end() - 1);
      for (int64_t q = 0; q < m; ++q) {
        const int64_t k = position(q);
        const int64_t e = off[k] - lo;
        const int64_t b = block_of(e);
        const int64_t at = fill[b]++;
        order[at] = k;
        local[at] = static_cast<uint32_t>(e - b * rows * slice);
      }
    }
    thread_local Scratch<A> acc_scratch;
    A *__restrict acc = acc_scratch.get(static_cast<size_t>(rows * slice));
    std::vector<unsigned char> touched(static_cast<size_t>(rows));
    const SliceRow row_of(slice);
    constexpr int64_t kAhead = 16;
    for (int64_t b = 0; b < blocks; ++b) {
      if (start[b] == start[b + 1]) continue;
      const int64_t base = lo + b * rows * slice;  // element offset of the block's first slice
      const int64_t block_rows = std::min(rows, span - b * rows);
      // A block with updates for at least half of its slices is loaded whole (a stream);
      // a sparser one loads each slice on its first update (random reads, prefetched).
      const bool whole = 2 * (start[b + 1] - start[b]) >= block_rows;
      if (whole) rows::widen_row<T>(dst + base, acc, block_rows * slice);
      std::fill(touched.begin(), touched.end(), 0);
      for (int64_t q = start[b]; q < start[b + 1]; ++q) {
        const int64_t k = order[q];
        if (q + kAhead < m) {
          if (q + 2 * kAhead < m) prefetch_row(upd + order[q + 2 * kAhead] * slice, slice);
          if (!whole) prefetch_row(dst + base + local[q + kAhead], slice);
        }
        const int64_t e = local[q];
        const int64_t r = row_of(e);
        A *a = acc + e;
        if (!touched[r]) {
          if (!whole) rows::widen_row<T>(dst + base + e, a, slice);
          touched[r] = 1;
        }
        rows::accumulate<T, Op>(a, upd + k * slice, slice);
      }
      // only touched slices are written back (a float round trip would quiet a
      // signalling NaN elsewhere)
      for (int64_t r = 0; r < block_rows; ++r)
        if (touched[r]) rows::narrow_row<T>(acc + r * slice, dst + base + r * slice, slice);
    }
    return;
  }
  // Sparse: comparison sort by destination; ties keep index order.
  std::vector<int64_t> order(static_cast<size_t>(m));
  for (int64_t q = 0; q < m; ++q) order[q] = position(q);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return off[x] < off[y]; });
  std::vector<A> acc_buf(static_cast<size_t>(slice));
  A *__restrict acc = acc_buf.data();
  for (int64_t g = 0; g < m;) {
    const int64_t o = off[order[g]];
    T *d = dst + o;
    rows::widen_row<T>(d, acc, slice);
    for (; g < m && off[order[g]] == o; ++g) rows::accumulate<T, Op>(acc, upd + order[g] * slice, slice);
    rows::narrow_row<T>(acc, d, slice);
  }
}

// Positions pos[0..m) (0..m when pos is null); [lo, hi] and sorted as for apply_grouped.
template <typename T, typename Op>
void apply(T *dst, const T *upd, const int64_t *off, const int64_t *pos, int64_t m, int64_t slice,
           int64_t lo = -1, int64_t hi = -1, bool sorted = false) {
  if constexpr (std::is_same<typename Reducer<T, Op>::acc_t, T>::value)
    apply_direct<T, Op>(dst, upd, off, pos, m, slice);
  else
    apply_grouped<T, Op>(dst, upd, off, pos, m, slice, lo, hi, sorted);
}

// The thread count of the last call that applied updates (what the benchmark's access
// probe runs with), and the count the probe forces on its own calls (0: the engine's choice).
std::atomic<int> g_last_threads{1};
thread_local int t_probe_threads = 0;

// Applies positions pos[0..n) (all p.n positions when pos is null: a row shard passes the
// positions it keeps); st describes their offsets.
template <typename T, typename Op>
void apply_all(const Plan &p, T *dst, const T *upd, const int64_t *off, const OffsetStats &st,
               const int64_t *pos, int64_t n) {
  if (n == 0 || p.slice == 0) return;
  const int64_t min_off = st.min, max_off = st.max;
  const bool sorted = st.sorted;
  constexpr bool grouped = !std::is_same<typename Reducer<T, Op>::acc_t, T>::value;
  ThreadRule::Pick pick;
  if (t_probe_threads > 0)
    pick.threads = t_probe_threads;
  else
    pick = choose_threads(p, n, min_off, max_off, sizeof(T), grouped, sorted);
  const int threads = pick.threads;
  RuleTimer timer(pick, static_cast<uint64_t>(n * p.slice));
  auto at = [pos](int64_t q) { return pos ? pos[q] : q; };
  bool done = false;
  if (threads > 1 && sorted) {
    // Sorted indices: contiguous runs of positions, cut between destinations.
    std::vector<int64_t> cut(static_cast<size_t>(threads) + 1, n);
    cut[0] = 0;
    for (int t = 1; t < threads; ++t) {
      int64_t c = std::max(cut[t - 1], n * t / threads);
      while (c > 0 && c < n && off[at(c)] == off[at(c - 1)]) ++c;
      cut[t] = c;
    }
    auto fn = [&](int t) {
      // positions cut[t] .. cut[t + 1]: the call's arrays from there on, extremes at the ends
      const int64_t m = cut[t + 1] - cut[t];
      if (m <= 0) return;
      const int64_t lo = off[at(cut[t])], hi = off[at(cut[t + 1] - 1)];
      if (pos)
        apply<T, Op>(dst, upd, off, pos + cut[t], m, p.slice, lo, hi, true);
      else
        apply<T, Op>(dst, upd + cut[t] * p.slice, off + cut[t], nullptr, m, p.slice, lo, hi, true);
    };
    done = ThreadPool::instance().run(threads, fn);
  } else if (threads > 1) {
    Work w;
    partition(off, pos, n, min_off, max_off, threads, &w);
    auto fn = [&](int t) {
      apply<T, Op>(dst, upd, off, w.pos.data() + w.begin[t], w.begin[t + 1] - w.begin[t], p.slice);
    };
    done = ThreadPool::instance().run(threads, fn);
  }
  if (!done) apply<T, Op>(dst, upd, off, pos, n, p.slice, min_off, max_off, sorted);
  if (done || threads == 1) timer.ran();  // (not when a busy pool made a multi-thread pick run serially)
  g_last_threads.store(done ? threads : 1, std::memory_order_relaxed);
}

// Copy of input_x into the output (TensorScatter, and the in-place primitive's result):
// split among the pool's threads when large (a stream, bandwidth-bound: two threads
// copied 1e6 x 64 float32 faster than one on the 2-core machine); the automatic setting
// learns the count per size class, as for the scatter.
constexpr size_t kParallelCopyBytes = size_t(1) << 20;

inline void copy_bytes(void *dst, const void *src, size_t bytes) {
  ThreadPool &pool = ThreadPool::instance();
  const int setting = pool.setting();
  ThreadRule::Pick pick;
  if (bytes >= kParallelCopyBytes) {
    if (setting > 0) {
      pick.threads = setting;
    } else {
      const int avail = ThreadPool::all_cores();
      pick = ThreadRule::instance().pick(ThreadRule::make_key(WorkKind::kCopy, 1, bytes, bytes, avail), avail, avail);
    }
  }
  const int threads = pick.threads;
  RuleTimer timer(pick, bytes);
  if (threads > 1) {
    const size_t chunk = (bytes / threads + 4095) & ~size_t(4095);
    auto fn = [&](int t) {
      const size_t lo = std::min(bytes, chunk * static_cast<size_t>(t));
      const size_t hi = std::min(bytes, lo + chunk);
      if (hi > lo) std::memcpy(static_cast<char *>(dst) + lo, static_cast<const char *>(src) + lo, hi - lo);
    };
    if (pool.run(threads, fn)) {
      timer.ran();
      return;
    }
    std::memcpy(dst, src, bytes);
    return;
  }
  std::memcpy(dst, src, bytes);
  timer.ran();
}

// The offsets of one call, in scratch memory the calling thread keeps.
inline int64_t *offset_buffer(int64_t n) {
  thread_local Scratch<int64_t> buf;
  return buf.get(static_cast<size_t>(n > 0 ? n : 1));
}
// The positions a row shard keeps (sharded entries only).
inline int64_t *position_buffer(int64_t n) {
  thread_local Scratch<int64_t> buf;
  return buf.get(static_cast<size_t>(n > 0 ? n : 1));
}

template <typename T, typename I, typename Op>
int run(const Plan &p, OutputMode om, void **params) {
  T *x = static_cast<T *>(params[0]);
  const I *idx = static_cast<const I *>(params[1]);
  const T *upd = static_cast<const T *>(params[2]);
  const size_t x_bytes = static_cast<size_t>(p.x_numel) * sizeof(T);
  const size_t upd_bytes = static_cast<size_t>(p.n * p.slice) * sizeof(T);
  if (om != OutputMode::kTensor && overlaps(x, x_bytes, upd, upd_bytes)) {
    // updates that share input_x's memory are read as they were when the call started
    thread_local Scratch<T> alias_buf;
    T *copy = alias_buf.get(static_cast<size_t>(p.n * p.slice));
    std::memcpy(copy, upd, upd_bytes);
    upd = copy;
  }
  int64_t *off = offset_buffer(p.n);
  OffsetStats st;
  const int64_t *pos = nullptr;  // a row shard's kept positions (null: all of them)
  int64_t kept = p.n;
  int rc;
  if (p.sharded || p.drop_negative) {
    int64_t *keep = position_buffer(p.n);
    rc = shard_offsets<I>(p, idx, off, keep, &kept, &st);
    if (kept < p.n) pos = keep;
  } else {
    rc = index_offsets<I>(p, idx, off, &st);
  }
  if (rc != kOk) return rc;
  if constexpr (RejectsZero<Op>::value && std::is_integral<T>::value) {
    rc = check_nonzero<T>(p, upd);
    if (rc != kOk) return rc;
  }
  T *dst = x;
  if (om == OutputMode::kTensor) {
    dst = static_cast<T *>(params[p.out_arg]);
    if (x_bytes) copy_bytes(dst, x, x_bytes);
  }
  {
    std::unique_lock<std::mutex> lock(lock_for(x), std::defer_lock);
    if (om != OutputMode::kTensor) lock.lock();
    apply_all<T, Op>(p, dst, upd, off, st, pos, kept);
    if (om == OutputMode::kReturn && x_bytes) copy_bytes(params[p.out_arg], x, x_bytes);
  }
  if (om == OutputMode::kToken) *static_cast<int32_t *>(params[p.out_arg]) = 0;
  return kOk;
}

// The benchmark's access probe (ms_scatter_probe_rmw, not an operator): a bitwise XOR of
// the update row into the destination row, on unsigned words of the element's width.
struct ProbeXor {
  static constexpr const char *name = "ProbeXor";
  template <typename A> static A update(A acc, A v) { return acc ^ v; }
};

template <typename Op>
int dispatch(const char *op, IndexMode im, OutputMode om, bool sharded, int nparam, void **params, int *ndims,
             int64_t **shapes, const char **dtypes, void * /* stream: unused on CPU */) {
  Plan p;
  int rc = make_plan(op, im, sharded, nparam, ndims, shapes, &p);
  if (rc != kOk) return rc;
  if (sharded) {
    // (row_begin, global_rows): host memory on CPU
    rc = check_shard_dtype(p, dtypes);
    if (rc == kOk) rc = set_shard(&p, static_cast<const int64_t *>(params[3]));
    if (rc != kOk) return rc;
  }
  constexpr bool copies = std::is_same<Op, OpUpdate>::value;
  return dispatch_dtypes<copies>(p, om, ndims, shapes, dtypes, [&](auto value, auto index) {
    return run<typename decltype(value)::type, typename decltype(index)::type, Op>(p, om, params);
  });
}

}  // namespace
}  // namespace ms_scatter

#include "ms_scatter/entries.h"
#include "message.h"

MSS_EXPORT int ms_scatter_num_threads() { return ms_scatter::ThreadPool::instance().setting(); }
MSS_EXPORT void ms_scatter_set_num_threads(int n) { ms_scatter::ThreadPool::instance().set_num_threads(n); }
// 1 while a caller thread spins waiting for the kernels (ms_scatter's PYNATIVE calls say so).
MSS_EXPORT void ms_scatter_set_caller_waits(int waits) {
  ms_scatter::ThreadPool::caller_waits().store(waits, std::memory_order_relaxed);
}
// The automatic thread rule's table (thread_rule.h): rows of 8 int64 into out (up to cap
// rows); returns the number of rows. Reset empties it.
MSS_EXPORT int ms_scatter_thread_choices(int64_t *out, int cap) {
  return ms_scatter::ThreadRule::instance().snapshot(out, cap);
}
MSS_EXPORT void ms_scatter_reset_thread_choices() { ms_scatter::ThreadRule::instance().reset(); }
MSS_EXPORT int ms_scatter_thread_rule_learns() { return ms_scatter::ThreadRule::instance().learns() ? 1 : 0; }

// Threads the last call that applied updates ran on.
MSS_EXPORT int ms_scatter_last_threads() { return ms_scatter::g_last_threads.load(std::memory_order_relaxed); }

// The benchmark's access probe, not an operator: the memory traffic of a Scatter call with
// these arguments (aot layout: x, indices, updates, out) without the reduction. The indices
// are read and checked, then each update row is XORed into its destination row in index
// order, on the engine's own loop (prefetch, row ownership, partition) for an unsigned type
// of the element's width, on `threads` threads (0: the engine's choice for that type).
// tensor != 0: indices of shape (n, 1) and `out` of input_x's shape, which input_x is first
// copied into (TensorScatter's traffic); otherwise a 1-element int32 token.
MSS_EXPORT int ms_scatter_probe_rmw(int threads, int tensor, int nparam, void **params, int *ndims, int64_t **shapes,
                                    const char **dtypes) {
  using namespace ms_scatter;
  const IndexMode im = tensor ? IndexMode::kNd : IndexMode::kFirstAxis;
  const OutputMode om = tensor ? OutputMode::kTensor : OutputMode::kToken;
  Plan p;
  int rc = make_plan("ProbeRMW", im, false, nparam, ndims, shapes, &p);
  if (rc != kOk) return rc;
  size_t width = 0;
#define MSS_WIDTH(NAME, TYPE) \
  if (std::strcmp(dtypes[0], #NAME) == 0) width = sizeof(TYPE);
  MS_SCATTER_VALUE_DTYPES(MSS_WIDTH)
#undef MSS_WIDTH
  const bool wide = std::strcmp(dtypes[1], "int64") == 0;
  if (!wide && std::strcmp(dtypes[1], "int32") != 0) return kBadArguments;
  t_probe_threads = threads > 0 ? threads : 0;
  try {
    auto go = [&](auto word) -> int {
      using T = decltype(word);
      return wide ? run<T, int64_t, ProbeXor>(p, om, params) : run<T, int32_t, ProbeXor>(p, om, params);
    };
    rc = width == 1   ? go(uint8_t{})
         : width == 2 ? go(uint16_t{})
         : width == 4 ? go(uint32_t{})
         : width == 8 ? go(uint64_t{})
                      : static_cast<int>(kBadArguments);
  } catch (const std::exception &) {
    rc = kBadArguments;
  }
  t_probe_threads = 0;
  return rc;
}
