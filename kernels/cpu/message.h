// ms-scatter CPU: the fused message-passing kernels of the segment contract (shared/SEGMENT_API.md,
// section 3). Neither makes the E x F tensor of gathered rows:
//   Gspmm<R>(x, src, dst, rows[, edge_weight]) -> out (N, *F), N = rows.shape[0] (only its length
//       is read: the output's rows come from a shape, so that inference needs no attribute):
//       out[v] = R over the edges e with dst[e] == v of x[src[e]] (* edge_weight[e]), R in Sum,
//       Mean, Max, Min; a node without edges gets 0.
//   Gsddmm<O>(x_u, x_v, src, dst) -> out: per edge x_u[src[e]] O x_v[dst[e]], O in Add, Sub, Mul
//       ((E, *F)) or Dot ((E,), summed over the features).
//   GspmmTieGrad(x, src, dst, out, dout[, edge_weight]) -> dx, GspmmTieGradWeight(..., edge_weight)
//       -> d edge_weight: the gradient of gspmm max/min (ties split evenly; spmm_ties below).
//   ScatterTieGradX / ScatterTieGradUpdates(out, dout, indices, xg, updates) -> dx / du: the
//       gradient of the scatter family's Max and Min (scatter_ties below).
//   ScatterGradGather(x, indices) -> x's slices at the index vectors (gather_nd), for the
//       family's gradients.
// Every id is read and range-checked before anything is written (kIndexOutOfRange). gspmm
// groups the edges by dst with a stable counting sort (skipped when dst is sorted) and
// gives each thread whole nodes: each node reduces its edges in edge order, in the
// accumulator type of reducer.h (float for the 16-bit floats), so the result is the same
// at any thread count. gsddmm splits the edges in contiguous ranges.
// Included by scatter_cpu.cc after entries.h (MSS_EXPORT, CallerRaises, ThreadPool, Scratch).
#ifndef MS_SCATTER_CPU_MESSAGE_H_
#define MS_SCATTER_CPU_MESSAGE_H_

namespace ms_scatter {
namespace message {

enum class Spmm { kSum, kMean, kMax, kMin, kProd };  // (kProd: segment_reduce only)
enum class Softmax { kForward, kGrad };
enum class Sddmm { kAdd, kSub, kMul, kDot };

constexpr int64_t kParallelMinElements = int64_t(1) << 18;  // E * F below which one thread runs

inline int64_t feature_size(int nd, const int64_t *shape) {
  int64_t f = 1;
  for (int i = 1; i < nd; ++i) f *= shape[i];
  return f;
}

inline int threads_for(int64_t work, int64_t items) {
  const int setting = ThreadPool::instance().setting();
  const int avail = setting > 0 ? setting : ThreadPool::all_cores();
  if (avail <= 1 || work < kParallelMinElements) return 1;
  return static_cast<int>(std::min<int64_t>(avail, std::max<int64_t>(items, 1)));
}

// f(t) for t in [0, n) on the pool, or on this thread when the pool is busy.
template <typename F>
void run_threads(int n, const F &f) {
  const std::function<void(int)> job = f;
  if (n <= 1 || !ThreadPool::instance().run(n, job))
    for (int t = 0; t < n; ++t) f(t);
}

// Buffers a calling thread keeps between calls (scatter_cpu.cc's Scratch: no allocation,
// page faults or zero fill per call).
enum Buffer { kSrc, kDst, kIndptr, kOrder, kNext, kIndptrBySrc, kOrderBySrc, kBuffers };
inline int64_t *buffer(Buffer which, int64_t n) {
  static thread_local Scratch<int64_t> buffers[kBuffers];
  return buffers[which].get(static_cast<size_t>(n));
}

// The ids of one int32/int64 input as int64, each checked to be in [0, bound).
// drop_negative (the segment ids): a negative id is read as `bound`, one bucket past the last,
// which the caller skips.
inline int read_ids(const char *op, const char *name, const void *p, const char *dtype, int64_t n, int64_t bound,
                    int64_t *out, bool *sorted, bool drop_negative = false) {
  const bool wide = std::strcmp(dtype, "int64") == 0;
  if (!wide && std::strcmp(dtype, "int32") != 0) {
    set_error(kBadArguments, "For '%s', the dtype of '%s' must be int32 or int64, but got %s.", op, name, dtype);
    return kBadArguments;
  }
  bool in_order = true;
  int64_t last = 0;
  for (int64_t e = 0; e < n; ++e) {
    int64_t v = wide ? static_cast<const int64_t *>(p)[e] : static_cast<const int32_t *>(p)[e];
    if (drop_negative && v < 0) {
      v = bound;
    } else if (drop_negative && v >= bound) {
      set_error(kIndexOutOfRange,
                "For '%s', each value of '%s' must be < num_segments (%lld) (a negative id drops its row), but got "
                "%lld at position (%lld,) of '%s' (shape (%lld,)).",
                op, name, static_cast<long long>(bound), static_cast<long long>(v), static_cast<long long>(e), name,
                static_cast<long long>(n));
      return kIndexOutOfRange;
    } else if (v < 0 || v >= bound) {
      set_error(kIndexOutOfRange, "For '%s', each value of '%s' must be in [0, %lld), but got %lld at position %lld.",
                op, name, static_cast<long long>(bound), static_cast<long long>(v), static_cast<long long>(e));
      return kIndexOutOfRange;
    }
    in_order = in_order && v >= last;
    last = v;
    out[e] = v;
  }
  if (sorted) *sorted = in_order;
  return kOk;
}

template <typename A>
inline A mul_acc(A a, A b) {
  return Arith<A>::mul(a, b);
}

// out[v] for v in [v0, v1): `order` lists the edges grouped by dst (indptr: each node's range).
// Edges ahead whose source rows are prefetched (random rows: the loop is bound by their reads).
constexpr int64_t kPrefetchEdges = 16;

template <typename T>
inline void prefetch_row(const T *row, int64_t F) {
  const char *p = reinterpret_cast<const char *>(row);
  for (int64_t b = 0; b < F * static_cast<int64_t>(sizeof(T)); b += 64) __builtin_prefetch(p + b);
}

// One edge's message for one feature, in the accumulator of T: the source value, times the
// edge's weight when the call has weights.
template <typename T>
inline typename AccOf<T>::type message_of(T value, bool weighted, typename AccOf<T>::type weight) {
  return weighted ? mul_acc<typename AccOf<T>::type>(to_acc<T>(value), weight) : to_acc<T>(value);
}

// The edges grouped by `keys` (each in [0, N)): *indptr[v] is the first of node v's edges
// in the returned order (a stable counting sort; nullptr, the identity, when `sorted`).
inline const int64_t *group(const int64_t *keys, int64_t E, int64_t N, bool sorted, Buffer indptr_buffer,
                            Buffer order_buffer, const int64_t **indptr_out) {
  int64_t *indptr = buffer(indptr_buffer, N + 1);
  std::fill(indptr, indptr + N + 1, int64_t(0));
  for (int64_t e = 0; e < E; ++e) ++indptr[keys[e] + 1];
  for (int64_t v = 0; v < N; ++v) indptr[v + 1] += indptr[v];
  *indptr_out = indptr;
  if (sorted) return nullptr;
  int64_t *order = buffer(order_buffer, E);
  int64_t *next = buffer(kNext, N);
  std::copy(indptr, indptr + N, next);
  for (int64_t e = 0; e < E; ++e) order[next[keys[e]]++] = e;
  return order;
}

// f(v0, v1) on threads that own whole node ranges, each about an equal share of the edges.
template <typename F>
void by_node_ranges(int64_t work, int64_t N, const int64_t *indptr, const F &f) {
  const int64_t E = indptr[N];
  const int threads = threads_for(work, N);
  run_threads(threads, [&](int t) {
    auto cut = [&](int k) -> int64_t {
      if (k == 0) return 0;
      if (k == threads) return N;
      return std::lower_bound(indptr, indptr + N + 1, (E * k) / threads) - indptr;
    };
    const int64_t v0 = std::min(cut(t), N), v1 = std::min(cut(t + 1), N);
    if (v0 < v1) f(v0, v1);
  });
}

// One edge's message (its source row, times its weight, in the accumulator of T) into a
// node's accumulators S (a mean's: 64 bits for the integers): the first edge's is copied (a
// sum's added to 0, so that a node of -0.0 messages sums to +0.0 as a scatter into zeros
// does), the others combined by the reduction.
template <Spmm R, bool kWeighted, typename T, typename S>
inline void take_row(S *acc, const T *row, int64_t F, bool first, typename AccOf<T>::type weight) {
  for (int64_t f = 0; f < F; ++f) {
    const S m = static_cast<S>(message_of<T>(row[f], kWeighted, weight));
    acc[f] = first ? (R == Spmm::kSum || R == Spmm::kMean ? Arith<S>::add(S(0), m) : m)
             : R == Spmm::kMax ? OpMax::update<S>(acc[f], m)
             : R == Spmm::kMin ? OpMin::update<S>(acc[f], m)
             : R == Spmm::kProd ? Arith<S>::mul(acc[f], m)
                               : Arith<S>::add(acc[f], m);
  }
}

// src: each edge's row of x (nullptr: the edge's own row, segment_reduce); fill: an empty
// node's value (nullptr: 0).
template <typename T, Spmm R>
void spmm_nodes(int64_t v0, int64_t v1, int64_t F, const T *x, const T *w, const int64_t *src,
                const int64_t *indptr, const int64_t *order, T *out, const T *fill = nullptr) {
  using A = typename AccOf<T>::type;
  using S = typename std::conditional<R == Spmm::kMean, typename MeanAccOf<T>::type, A>::type;
  std::vector<S> acc(static_cast<size_t>(F));
  const int64_t last = indptr[v1];
  for (int64_t v = v0; v < v1; ++v) {
    T *o = out + v * F;
    const int64_t b = indptr[v], e = indptr[v + 1];
    if (b == e) {
      for (int64_t f = 0; f < F; ++f) o[f] = fill ? *fill : from_acc<T>(A(0));
      continue;
    }
    for (int64_t k = b; k < e; ++k) {
      if (k + kPrefetchEdges < last && (src || order)) {
        const int64_t ahead = order ? order[k + kPrefetchEdges] : k + kPrefetchEdges;
        prefetch_row(x + (src ? src[ahead] : ahead) * F, F);
      }
      const int64_t edge = order ? order[k] : k;
      const T *row = x + (src ? src[edge] : edge) * F;
      if (w)
        take_row<R, true>(acc.data(), row, F, k == b, to_acc<T>(w[edge]));
      else
        take_row<R, false>(acc.data(), row, F, k == b, A(1));
    }
    if (R == Spmm::kMean) {
      for (int64_t f = 0; f < F; ++f) o[f] = from_acc<T>(static_cast<A>(mean_of<S>(acc[f], e - b)));
    } else {
      for (int64_t f = 0; f < F; ++f) o[f] = from_acc<T>(static_cast<A>(acc[f]));
    }
  }
}

template <typename T, Spmm R>
int spmm(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes, bool weighted) {
  const int64_t nx = shapes[0][0], E = shapes[1][0], N = shapes[3][0];
  const int64_t F = feature_size(ndims[0], shapes[0]);
  int64_t *src = buffer(kSrc, E), *dst = buffer(kDst, E);
  bool sorted = false;
  int rc = read_ids(op, "src", params[1], dtypes[1], E, nx, src, nullptr);
  if (rc == kOk) rc = read_ids(op, "dst", params[2], dtypes[2], E, N, dst, &sorted);
  if (rc != kOk) return rc;
  const int64_t *indptr = nullptr, *order = group(dst, E, N, sorted, kIndptr, kOrder, &indptr);
  const T *x = static_cast<const T *>(params[0]);
  const T *w = weighted ? static_cast<const T *>(params[4]) : nullptr;
  T *out = static_cast<T *>(params[weighted ? 5 : 4]);
  by_node_ranges(E * F, N, indptr, [&](int64_t v0, int64_t v1) {
    spmm_nodes<T, R>(v0, v1, F, x, w, src, indptr, order, out);
  });
  return kOk;
}

// segment_argmax / segment_argmin: SegmentArg<R>(src (E, *F), segment_ids (E,), rows (N,)) ->
// arg, int64 (N, *F): per segment and feature, the first row in index order holding the max
// (min), a NaN winning; E for an empty segment. Negative ids drop their rows. One pass over the
// rows grouped by id (gspmm's grouping and thread split), each segment's rows in index order.
// SegmentArgValues(src, segment_ids, arg) -> values (N, *F): src[arg] (0 where arg is E).
// SegmentArgMax/Min with a 5th argument (values, (N, *F)) write those values in the same pass
// (a direct call's; an aot Custom node has one output).
// (Written so: a NaN value passes the negated compare; `best == best` is false once a NaN
// leads. Not is_nan(value): for float16 g++ would fold it into a libgcc _Float16 compare.)
template <Spmm R, typename A>
inline bool beats(A value, A best) {
  return !(R == Spmm::kMax ? value <= best : value >= best) && best == best;
}

// I: the winning rows as the loop keeps them, int32 where E allows (the selects then run as
// wide as the values'), widened when stored.
template <typename T, Spmm R, typename I>
int segment_arg_rows(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes, T *values) {
  using A = typename AccOf<T>::type;
  const int64_t E = shapes[0][0], N = shapes[2][0];
  const int64_t F = feature_size(ndims[0], shapes[0]);
  int64_t *ids = buffer(kDst, E);
  bool sorted = false;
  const int rc = read_ids(op, "segment_ids", params[1], dtypes[1], E, N, ids, &sorted, true);
  if (rc != kOk) return rc;
  const int64_t *indptr = nullptr, *order = group(ids, E, N + 1, sorted, kIndptr, kOrder, &indptr);
  const T *src = static_cast<const T *>(params[0]);
  int64_t *arg = static_cast<int64_t *>(params[3]);
  by_node_ranges(indptr[N] * F, N, indptr, [&](int64_t v0, int64_t v1) {
    const int64_t width = F;  // (a local bound: g++ cannot vectorize a loop over a captured one)
    std::vector<A> best(static_cast<size_t>(F));
    std::vector<I> won(static_cast<size_t>(F));
    A *bp = best.data();
    I *wp = won.data();
    const int64_t last = indptr[v1];
    for (int64_t v = v0; v < v1; ++v) {
      int64_t *a = arg + v * F;
      const int64_t b = indptr[v], e = indptr[v + 1];
      if (b == e) {
        std::fill(a, a + F, E);
        if (values) std::fill(values + v * F, values + (v + 1) * F, from_acc<T>(A(0)));
        continue;
      }
      const int64_t first = order ? order[b] : b;
      for (int64_t f = 0; f < width; ++f) {
        bp[f] = to_acc<T>(src[first * F + f]);
        wp[f] = static_cast<I>(first);
      }
      for (int64_t k = b + 1; k < e; ++k) {
        if (order && k + kPrefetchEdges < last) prefetch_row(src + order[k + kPrefetchEdges] * F, F);
        const int64_t row = order ? order[k] : k;
        const I row_i = static_cast<I>(row);
        const T *x = src + row * F;
        for (int64_t f = 0; f < width; ++f) {  // (selects, not branches: g++ vectorizes them)
          const A value = to_acc<T>(x[f]);
          const bool better = beats<R>(value, bp[f]);
          bp[f] = better ? value : bp[f];
          wp[f] = better ? row_i : wp[f];
        }
      }
      for (int64_t f = 0; f < width; ++f) a[f] = wp[f];
      if (values) {  // the winners' own bits (rows this segment just read)
        T *o = values + v * F;
        for (int64_t f = 0; f < width; ++f) o[f] = src[static_cast<int64_t>(wp[f]) * F + f];
      }
    }
  });
  return kOk;
}

template <typename T, Spmm R>
int segment_arg(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes, bool values) {
  T *out = values ? static_cast<T *>(params[4]) : nullptr;
  if (shapes[0][0] <= INT32_MAX) return segment_arg_rows<T, R, int32_t>(op, params, ndims, shapes, dtypes, out);
  return segment_arg_rows<T, R, int64_t>(op, params, ndims, shapes, dtypes, out);
}

template <typename T>
int segment_arg_values(const char *op, void **params, int *ndims, int64_t **shapes) {
  const int64_t E = shapes[0][0], F = feature_size(ndims[0], shapes[0]), N = shapes[2][0];
  const T *src = static_cast<const T *>(params[0]);
  const int64_t *arg = static_cast<const int64_t *>(params[2]);
  bool bad = false;
  for (int64_t i = 0; i < N * F; ++i) bad |= static_cast<uint64_t>(arg[i]) > static_cast<uint64_t>(E);
  if (bad) {
    set_error(kBadArguments, "For '%s', each value of 'arg' must be in [0, %lld].", op, static_cast<long long>(E));
    return kBadArguments;
  }
  T *out = static_cast<T *>(params[3]);
  const T zero = from_acc<T>(typename AccOf<T>::type(0));
  const int threads = threads_for(N * F, N);
  run_threads(threads, [&](int t) {
    const int64_t width = F;  // (a local bound: g++ cannot vectorize a loop over a captured one)
    for (int64_t v = N * t / threads, v1 = N * (t + 1) / threads; v < v1; ++v)
      for (int64_t f = 0; f < width; ++f) {
        const int64_t a = arg[v * F + f];
        out[v * F + f] = a == E ? zero : src[a * F + f];
      }
  });
  return kOk;
}

// segment_reduce: SegmentReduce<R>(src (E, *F), segment_ids (E,), rows (N,), fill (1,)) -> out
// (N, *F), R in Sum, Mean, Max, Min, Prod: gspmm's node loop over the rows grouped by id (each
// row its own message), an empty segment `fill`; negative ids drop their rows.
template <typename T, Spmm R>
int segment_reduce(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  const int64_t E = shapes[0][0], N = shapes[2][0];
  const int64_t F = feature_size(ndims[0], shapes[0]);
  int64_t *ids = buffer(kDst, E);
  bool sorted = false;
  const int rc = read_ids(op, "segment_ids", params[1], dtypes[1], E, N, ids, &sorted, true);
  if (rc != kOk) return rc;
  const int64_t *indptr = nullptr, *order = group(ids, E, N + 1, sorted, kIndptr, kOrder, &indptr);
  const T *x = static_cast<const T *>(params[0]);
  const T *fill = static_cast<const T *>(params[3]);
  T *out = static_cast<T *>(params[4]);
  by_node_ranges(indptr[N] * F, N, indptr, [&](int64_t v0, int64_t v1) {
    spmm_nodes<T, R>(v0, v1, F, x, nullptr, nullptr, indptr, order, out, fill);
  });
  return kOk;
}

// segment_csr: SegmentCsr<R>(src (E, *F), indptr (K + 1,), fill (1,)) -> out (K, *F): segment k
// is rows indptr[k]:indptr[k + 1], reduced by gspmm's node loop as segment_reduce's are (no
// grouping: indptr is the grouping). indptr must start at 0, never decrease and end at E:
// checked before anything is written.
template <typename T, Spmm R>
int segment_csr(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  const int64_t E = shapes[0][0], K = shapes[1][0] - 1;
  const int64_t F = feature_size(ndims[0], shapes[0]);
  const bool wide = std::strcmp(dtypes[1], "int64") == 0;
  if (!wide && std::strcmp(dtypes[1], "int32") != 0) {
    set_error(kBadArguments, "For '%s', the dtype of 'indptr' must be int32 or int64, but got %s.", op, dtypes[1]);
    return kBadArguments;
  }
  int64_t *indptr = buffer(kIndptr, K + 1);
  for (int64_t k = 0; k <= K; ++k) {
    const int64_t v = wide ? static_cast<const int64_t *>(params[1])[k] : static_cast<const int32_t *>(params[1])[k];
    if ((k == 0 && v != 0) || (k > 0 && v < indptr[k - 1]) || (k == K && v != E) || v > E) {
      set_error(kBadArguments,
                "For '%s', 'indptr' must start at 0, never decrease and end at src.shape[0] (%lld), but got %lld at "
                "position (%lld,).",
                op, static_cast<long long>(E), static_cast<long long>(v), static_cast<long long>(k));
      return kBadArguments;
    }
    indptr[k] = v;
  }
  const T *x = static_cast<const T *>(params[0]);
  const T *fill = static_cast<const T *>(params[2]);
  T *out = static_cast<T *>(params[3]);
  by_node_ranges(E * F, K, indptr, [&](int64_t v0, int64_t v1) {
    spmm_nodes<T, R>(v0, v1, F, x, nullptr, nullptr, indptr, nullptr, out, fill);
  });
  return kOk;
}

// exp(x) for x <= 0 or NaN (a softmax's shifted logits), written so that g++ vectorizes it:
// x = n ln2 + r with |r| <= ln2 / 2 (Cody-Waite), e^r by its Taylor polynomial (degree 7 for
// float, 13 for double: below one ulp), 2^n from the exponent bits; 0 below the normal range.
// The same operations on every variant (no FMA: -ffp-contract=off), so the same bits.
template <typename A> struct ExpConst;
template <> struct ExpConst<float> {
  using Bits = int32_t;
  static constexpr int kDegree = 7, kMantissa = 23, kBias = 127;
  static constexpr float kLog2e = 1.44269504088896341f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  static constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  static constexpr float kLowest = -87.3f;      // e^x below FLT_MIN: 0
};
template <> struct ExpConst<double> {
  using Bits = int64_t;
  static constexpr int kDegree = 13, kMantissa = 52, kBias = 1023;
  static constexpr double kLog2e = 1.4426950408889634074, kLn2Hi = 6.93147180369123816490e-01,
                          kLn2Lo = 1.90821492927058770002e-10;
  static constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52
  static constexpr double kLowest = -708.3;
};

template <typename A>
inline A exp_nonpositive(A x) {
  using C = ExpConst<A>;
  using Bits = typename C::Bits;
  const A t = x * C::kLog2e + C::kShift;
  const A n = t - C::kShift;
  Bits shift_bits, t_bits;
  std::memcpy(&shift_bits, &C::kShift, sizeof(A));
  std::memcpy(&t_bits, &t, sizeof(A));
  const A r = (x - n * C::kLn2Hi) - n * C::kLn2Lo;
  A p = A(1);
  A factorial = A(1);
  A coefficient[C::kDegree + 1];
  for (int k = 0; k <= C::kDegree; ++k) {
    coefficient[k] = A(1) / factorial;
    factorial *= A(k + 1);
  }
  p = coefficient[C::kDegree];
  for (int k = C::kDegree - 1; k >= 0; --k) p = p * r + coefficient[k];
  const Bits scale_bits = static_cast<Bits>((t_bits - shift_bits) + C::kBias) << C::kMantissa;
  A scale;
  std::memcpy(&scale, &scale_bits, sizeof(A));
  return x < C::kLowest ? A(0) : p * scale;
}

// segment_softmax: SegmentSoftmax(src (E, *F), segment_ids (E,), rows (N,)) -> out (E, *F): per
// segment and feature exp(x - max) / sum, in the accumulator of T (float for the 16-bit
// floats); rows with a negative id give 0. SegmentSoftmaxGrad(y, dy, segment_ids, rows) -> dx
// = y * (dy - the segment's sum of y * dy). Rows grouped by id as segment_arg's are, each
// segment's rows in index order: the same bits at any thread count.
template <typename T, bool kGrad>
int segment_softmax(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  using A = typename AccOf<T>::type;
  const int ids_at = kGrad ? 2 : 1;
  const int64_t E = shapes[0][0], N = shapes[ids_at + 1][0];
  const int64_t F = feature_size(ndims[0], shapes[0]);
  int64_t *ids = buffer(kDst, E);
  bool sorted = false;
  const int rc = read_ids(op, "segment_ids", params[ids_at], dtypes[ids_at], E, N, ids, &sorted, true);
  if (rc != kOk) return rc;
  const int64_t *indptr = nullptr, *order = group(ids, E, N + 1, sorted, kIndptr, kOrder, &indptr);
  const T *x = static_cast<const T *>(params[0]);
  const T *dy = kGrad ? static_cast<const T *>(params[1]) : nullptr;
  T *out = static_cast<T *>(params[ids_at + 2]);
  const T zero = from_acc<T>(A(0));
  for (int64_t k = indptr[N]; k < indptr[N + 1]; ++k) std::fill_n(out + (order ? order[k] : k) * F, F, zero);
  by_node_ranges(indptr[N] * F, N, indptr, [&](int64_t v0, int64_t v1) {
    const int64_t width = F;  // (a local bound: g++ cannot vectorize a loop over a captured one)
    std::vector<A> m(static_cast<size_t>(F)), sum(static_cast<size_t>(F)), e;
    for (int64_t v = v0; v < v1; ++v) {
      const int64_t b = indptr[v], end = indptr[v + 1];
      if (b == end) continue;
      std::fill(sum.begin(), sum.end(), A(0));
      if (kGrad) {  // sum of y * dy, then dx = y * (dy - sum)
        for (int64_t k = b; k < end; ++k) {
          const int64_t row = (order ? order[k] : k) * F;
          for (int64_t f = 0; f < width; ++f) sum[f] = sum[f] + to_acc<T>(x[row + f]) * to_acc<T>(dy[row + f]);
        }
        for (int64_t k = b; k < end; ++k) {
          const int64_t row = (order ? order[k] : k) * F;
          for (int64_t f = 0; f < width; ++f)
            out[row + f] = from_acc<T>(to_acc<T>(x[row + f]) * (to_acc<T>(dy[row + f]) - sum[f]));
        }
        continue;
      }
      for (int64_t f = 0; f < width; ++f) m[f] = to_acc<T>(x[(order ? order[b] : b) * F + f]);
      for (int64_t k = b + 1; k < end; ++k) {
        const int64_t row = (order ? order[k] : k) * F;
        for (int64_t f = 0; f < width; ++f) m[f] = OpMax::update<A>(m[f], to_acc<T>(x[row + f]));
      }
      e.resize(static_cast<size_t>((end - b) * F));
      for (int64_t k = b; k < end; ++k) {
        const int64_t row = (order ? order[k] : k) * F;
        A *ek = e.data() + (k - b) * F;
        for (int64_t f = 0; f < width; ++f) ek[f] = exp_nonpositive<A>(to_acc<T>(x[row + f]) - m[f]);
        for (int64_t f = 0; f < width; ++f) sum[f] = sum[f] + ek[f];
      }
      for (int64_t k = b; k < end; ++k) {
        const int64_t row = (order ? order[k] : k) * F;
        const A *ek = e.data() + (k - b) * F;
        for (int64_t f = 0; f < width; ++f) out[row + f] = from_acc<T>(ek[f] / sum[f]);
      }
    }
  });
  return kOk;
}

// The gradient of gspmm max/min (the family's rule): a node's gradient splits evenly among the
// edges whose message ties for its result, i.e. rounds to it in the result's dtype (a NaN
// result ties with nothing). Three passes over the edges, none making an E x F tensor:
// shares (by dst) -> d x (by src) or d edge_weight (per edge).
enum class Ties { kX, kWeight };

template <typename T, typename A>
inline bool tie(A message, T result) {
  return to_acc<T>(from_acc<T>(message)) == to_acc<T>(result);
}
// float16: the same test on the bits (a float compare of two converted halves becomes a
// _Float16 compare, a libgcc call per element without AVX-512 FP16).
template <>
inline bool tie<half_t, float>(float message, half_t result) {
  const uint16_t a = from_acc<half_t>(message).bits, b = result.bits;
  if ((a & 0x7fffu) > 0x7c00u || (b & 0x7fffu) > 0x7c00u) return false;  // NaN ties with nothing
  return a == b || ((a | b) & 0x7fffu) == 0;                              // +0 == -0
}

// share[v, f] = dout[v, f] / the number of v's edges whose message ties for out[v, f] (0 where
// none), in the accumulator type, in a buffer of the calling thread.
template <typename T>
const typename AccOf<T>::type *tie_shares(int64_t N, int64_t F, const T *x, const T *w, const int64_t *src,
                                          const int64_t *indptr, const int64_t *order, const T *out,
                                          const T *dout) {
  using A = typename AccOf<T>::type;
  static thread_local Scratch<A> buffer_of_shares;
  A *share = buffer_of_shares.get(static_cast<size_t>(N * F));
  by_node_ranges(indptr[N] * F, N, indptr, [&](int64_t v0, int64_t v1) {
    const int64_t width = F;  // (a local bound: g++ cannot vectorize a loop over a captured one)
    std::vector<int64_t> count(static_cast<size_t>(F));
    for (int64_t v = v0; v < v1; ++v) {
      std::fill(count.begin(), count.end(), int64_t(0));
      const T *o = out + v * F;
      for (int64_t k = indptr[v]; k < indptr[v + 1]; ++k) {
        const int64_t edge = order ? order[k] : k;
        const T *row = x + src[edge] * F;
        const A weight = w ? to_acc<T>(w[edge]) : A(1);
        for (int64_t f = 0; f < width; ++f) {
          count[f] += tie(message_of<T>(row[f], w != nullptr, weight), o[f]);
        }
      }
      for (int64_t f = 0; f < width; ++f)
        share[v * F + f] = count[f] ? static_cast<A>(to_acc<T>(dout[v * F + f]) / static_cast<A>(count[f])) : A(0);
    }
  });
  return share;
}

// Ties::kX: params x, src, dst, out, dout[, edge_weight], dx (x's shape): dx[u] sums, in edge
// order, the shares (times the weight) of the edges from u that tie. Ties::kWeight: params x,
// src, dst, out, dout, edge_weight, dw ((E,)): dw[e] = the sum over the tied features of
// share * x[src[e]].
template <typename T, Ties G>
int spmm_ties(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes, bool weighted) {
  using A = typename AccOf<T>::type;
  const int64_t nx = shapes[0][0], E = shapes[1][0], N = shapes[3][0];
  const int64_t F = feature_size(ndims[0], shapes[0]);
  int64_t *src = buffer(kSrc, E), *dst = buffer(kDst, E);
  bool src_sorted = false, dst_sorted = false;
  int rc = read_ids(op, "src", params[1], dtypes[1], E, nx, src, &src_sorted);
  if (rc == kOk) rc = read_ids(op, "dst", params[2], dtypes[2], E, N, dst, &dst_sorted);
  if (rc != kOk) return rc;
  const T *x = static_cast<const T *>(params[0]);
  const T *out = static_cast<const T *>(params[3]);
  const T *w = weighted ? static_cast<const T *>(params[5]) : nullptr;
  const int64_t *indptr = nullptr, *order = group(dst, E, N, dst_sorted, kIndptr, kOrder, &indptr);
  const A *share = tie_shares<T>(N, F, x, w, src, indptr, order, out, static_cast<const T *>(params[4]));
  if (G == Ties::kWeight) {
    T *dw = static_cast<T *>(params[6]);
    const int threads = threads_for(E * F, E);
    run_threads(threads, [&](int t) {
      const int64_t width = F;  // (a local bound: g++ cannot vectorize a loop over a captured one)
      for (int64_t e = E * t / threads, e1 = E * (t + 1) / threads; e < e1; ++e) {
        const T *row = x + src[e] * F, *o = out + dst[e] * F;
        const A *q = share + dst[e] * F;
        const A weight = to_acc<T>(w[e]);
        A sum = A(0);
        for (int64_t f = 0; f < width; ++f) {
          const A value = to_acc<T>(row[f]);
          if (tie(message_of<T>(row[f], true, weight), o[f])) sum = Arith<A>::add(sum, mul_acc<A>(q[f], value));
        }
        dw[e] = from_acc<T>(sum);
      }
    });
    return kOk;
  }
  T *dx = static_cast<T *>(params[weighted ? 6 : 5]);
  const int64_t *by_src = nullptr, *src_order = group(src, E, nx, src_sorted, kIndptrBySrc, kOrderBySrc, &by_src);
  by_node_ranges(E * F, nx, by_src, [&](int64_t u0, int64_t u1) {
    const int64_t width = F;  // (a local bound: g++ cannot vectorize a loop over a captured one)
    std::vector<A> acc(static_cast<size_t>(F));
    for (int64_t u = u0; u < u1; ++u) {
      std::fill(acc.begin(), acc.end(), A(0));
      const T *row = x + u * F;
      for (int64_t k = by_src[u]; k < by_src[u + 1]; ++k) {
        const int64_t edge = src_order ? src_order[k] : k;
        const T *o = out + dst[edge] * F;
        const A *q = share + dst[edge] * F;
        const A weight = w ? to_acc<T>(w[edge]) : A(1);
        for (int64_t f = 0; f < width; ++f) {
          if (tie(message_of<T>(row[f], w != nullptr, weight), o[f])) acc[f] = Arith<A>::add(acc[f], w ? mul_acc<A>(q[f], weight) : q[f]);
        }
      }
      for (int64_t f = 0; f < width; ++f) dx[u * F + f] = from_acc<T>(acc[f]);
    }
  });
  return kOk;
}

// The gradient of the family's Max and Min (ops/_grad.py's rule, fused): each element of the
// result splits its gradient evenly among input_x (where its value before the call, xg,
// equals the result; always where no update reached it) and every update equal to it.
// params out, dout (input_x's shape), indices (n, d), xg, updates ((n, *S): each index
// vector's slice), then dx (input_x's shape) for Tied::kX or du (updates' shape) for
// Tied::kUpdates. The updates are grouped by destination slice (a stable counting sort),
// threads own whole slices: the count, the share and every write are a slice's own, so the
// result is the same at any thread count. The count and share are rounded to T as the
// composite rule's scatter and division round them.
enum class Tied { kX, kUpdates };
enum class Gathered { kSlices };

template <typename I>
int slice_rows(const char *op, const I *idx, int64_t n, int64_t depth, const int64_t *shape, int64_t *rows) {
  for (int64_t k = 0; k < n; ++k) {
    int64_t row = 0;
    for (int64_t j = 0; j < depth; ++j) {
      const int64_t v = static_cast<int64_t>(idx[k * depth + j]);
      if (v < 0 || v >= shape[j]) {
        set_error(kIndexOutOfRange,
                  "For '%s', each value of 'indices' must be in [0, %lld) (dimension %lld of 'input_x'), but got "
                  "%lld at position (%lld, %lld) of the index vectors.",
                  op, static_cast<long long>(shape[j]), static_cast<long long>(j), static_cast<long long>(v),
                  static_cast<long long>(k), static_cast<long long>(j));
        return kIndexOutOfRange;
      }
      row = row * shape[j] + v;
    }
    rows[k] = row;
  }
  return kOk;
}

template <typename T, Tied G>
int scatter_ties(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  using A = typename AccOf<T>::type;
  const int64_t n = shapes[2][0], depth = shapes[2][1];
  int64_t slices = 1;
  for (int64_t j = 0; j < depth; ++j) slices *= shapes[0][j];
  const int64_t S = numel(ndims[0], shapes[0]) / std::max<int64_t>(slices, 1);
  int64_t *rows = buffer(kDst, n);
  const int rc = std::strcmp(dtypes[2], "int64") == 0
                     ? slice_rows(op, static_cast<const int64_t *>(params[2]), n, depth, shapes[0], rows)
                     : slice_rows(op, static_cast<const int32_t *>(params[2]), n, depth, shapes[0], rows);
  if (rc != kOk) return rc;
  bool sorted = true;
  for (int64_t k = 1; k < n && sorted; ++k) sorted = rows[k] >= rows[k - 1];
  const int64_t *indptr = nullptr, *order = group(rows, n, slices, sorted, kIndptr, kOrder, &indptr);
  const T *out = static_cast<const T *>(params[0]), *dout = static_cast<const T *>(params[1]);
  const T *xg = static_cast<const T *>(params[3]), *upd = static_cast<const T *>(params[4]);
  T *result = static_cast<T *>(params[5]);
  by_node_ranges(std::max<int64_t>(n, slices) * S, slices, indptr, [&](int64_t v0, int64_t v1) {
    const int64_t width = S;  // (a local bound: g++ cannot vectorize a loop over a captured one)
    std::vector<int64_t> count(static_cast<size_t>(S));
    std::vector<A> share(static_cast<size_t>(S));
    for (int64_t v = v0; v < v1; ++v) {
      const T *o = out + v * S, *g = dout + v * S;
      const int64_t b = indptr[v], e = indptr[v + 1];
      if (b == e) {  // no update reached it: input_x keeps the whole gradient
        if (G == Tied::kX) std::copy(g, g + width, result + v * S);
        continue;
      }
      std::fill(count.begin(), count.end(), int64_t(0));
      for (int64_t k = b; k < e; ++k) {
        const T *u = upd + (order ? order[k] : k) * S;
        for (int64_t f = 0; f < width; ++f) count[f] += tie(to_acc<T>(u[f]), o[f]);
      }
      const T *x0 = xg + (order ? order[b] : b) * S;
      for (int64_t f = 0; f < width; ++f) {
        const bool won = tie(to_acc<T>(x0[f]), o[f]);
        const A c = to_acc<T>(from_acc<T>(static_cast<A>(std::max<int64_t>(count[f] + won, 1))));
        share[f] = to_acc<T>(from_acc<T>(static_cast<A>(to_acc<T>(g[f]) / c)));
        if (G == Tied::kX) result[v * S + f] = from_acc<T>(static_cast<A>(share[f] * static_cast<A>(won)));
      }
      if (G == Tied::kUpdates) {
        for (int64_t k = b; k < e; ++k) {
          const int64_t edge = order ? order[k] : k;
          const T *u = upd + edge * S;
          T *d = result + edge * S;
          for (int64_t f = 0; f < width; ++f)
            d[f] = from_acc<T>(static_cast<A>(share[f] * static_cast<A>(tie(to_acc<T>(u[f]), o[f]))));
        }
      }
    }
  });
  return kOk;
}

// x's slices at index vectors (gather_nd): params x, indices (..., d) int32/int64, out
// (indices.shape[:-1] + x.shape[d:]); every vector range-checked before anything is written.
// The gradients' gathers (ops/_grad.py), copies of whole slices split over the threads.
template <typename T>
int gather_slices(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  const int64_t depth = shapes[1][ndims[1] - 1];
  const int64_t n = numel(ndims[1] - 1, shapes[1]);
  int64_t slices = 1;
  for (int64_t j = 0; j < depth; ++j) slices *= shapes[0][j];
  const int64_t S = numel(ndims[0], shapes[0]) / std::max<int64_t>(slices, 1);
  int64_t *rows = buffer(kSrc, n);
  const int rc = std::strcmp(dtypes[1], "int64") == 0
                     ? slice_rows(op, static_cast<const int64_t *>(params[1]), n, depth, shapes[0], rows)
                     : slice_rows(op, static_cast<const int32_t *>(params[1]), n, depth, shapes[0], rows);
  if (rc != kOk) return rc;
  const T *x = static_cast<const T *>(params[0]);
  T *out = static_cast<T *>(params[2]);
  const int threads = threads_for(n * S, n);
  run_threads(threads, [&](int t) {
    for (int64_t k = n * t / threads, k1 = n * (t + 1) / threads; k < k1; ++k)
      std::memcpy(out + k * S, x + rows[k] * S, static_cast<size_t>(S) * sizeof(T));
  });
  return kOk;
}

template <typename T, Sddmm O>
int sddmm(const char *op, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  using A = typename AccOf<T>::type;
  const int64_t nu = shapes[0][0], nv = shapes[1][0], E = shapes[2][0];
  const int64_t F = feature_size(ndims[0], shapes[0]);
  int64_t *src = buffer(kSrc, E), *dst = buffer(kDst, E);
  int rc = read_ids(op, "src", params[2], dtypes[2], E, nu, src, nullptr);
  if (rc == kOk) rc = read_ids(op, "dst", params[3], dtypes[3], E, nv, dst, nullptr);
  if (rc != kOk) return rc;
  const T *u = static_cast<const T *>(params[0]);
  const T *v = static_cast<const T *>(params[1]);
  T *out = static_cast<T *>(params[4]);
  const int threads = threads_for(E * F, E);
  run_threads(threads, [&](int t) {
    const int64_t width = F;  // (a local bound: g++ cannot vectorize a loop over a captured one)
    const int64_t e0 = E * t / threads, e1 = E * (t + 1) / threads;
    for (int64_t e = e0; e < e1; ++e) {
      const T *a = u + src[e] * F;
      const T *b = v + dst[e] * F;
      if (O == Sddmm::kDot) {
        A s = A(0);
        for (int64_t f = 0; f < width; ++f) s = Arith<A>::add(s, Arith<A>::mul(to_acc<T>(a[f]), to_acc<T>(b[f])));
        out[e] = from_acc<T>(s);
      } else {
        T *o = out + e * F;
        for (int64_t f = 0; f < width; ++f) {
          const A p = to_acc<T>(a[f]), q = to_acc<T>(b[f]);
          o[f] = from_acc<T>(O == Sddmm::kAdd ? Arith<A>::add(p, q) : O == Sddmm::kSub ? Arith<A>::sub(p, q)
                                                                                      : Arith<A>::mul(p, q));
        }
      }
    }
  });
  return kOk;
}

// The arguments MindSpore passes: `inputs` tensors and one output; dtypes the value dtype's
// on every value tensor.
inline int check_args(const char *op, int nparam, int inputs, int *ndims, int64_t **shapes, const char **dtypes,
                      std::initializer_list<int> values) {
  if (nparam != inputs + 1) {
    set_error(kBadArguments, "For '%s', the kernel expects %d inputs and 1 output, but got %d arguments.", op, inputs,
              nparam);
    return kBadArguments;
  }
  for (int a = 0; a < nparam; ++a) {
    if (!valid_shape(ndims[a], shapes[a]) || ndims[a] < 1) {
      set_error(kBadArguments, "For '%s', argument %d has no valid shape of rank >= 1.", op, a);
      return kBadArguments;
    }
  }
  for (int a : values) {
    if (std::strcmp(dtypes[a], dtypes[0]) != 0) {
      set_error(kBadArguments, "For '%s', every value input must have the dtype of the first (%s), but got %s.", op,
                dtypes[0], dtypes[a]);
      return kBadArguments;
    }
  }
  return kOk;
}

inline int inconsistent_shapes(const char *op) {
  set_error(kBadArguments, "For '%s', the kernel was given inconsistent shapes.", op);
  return kBadArguments;
}

template <typename F>
int by_value_dtype(const char *op, const char *dtype, const F &f) {
#define MSS_MESSAGE_DTYPE(NAME, TYPE) \
  if (std::strcmp(dtype, #NAME) == 0) return f(TYPE{});
  MS_SCATTER_VALUE_DTYPES(MSS_MESSAGE_DTYPE)
#undef MSS_MESSAGE_DTYPE
  set_error(kBadArguments, "For '%s', the dtype %s is not supported.", op, dtype);
  return kBadArguments;
}

template <Spmm R>
int gspmm_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  const bool weighted = nparam == 6;
  int rc = check_args(op, nparam, weighted ? 5 : 4, ndims, shapes, dtypes,
                      weighted ? std::initializer_list<int>{4, 5} : std::initializer_list<int>{4});
  if (rc != kOk) return rc;
  const int out = weighted ? 5 : 4;
  if (ndims[out] != ndims[0] || shapes[out][0] != shapes[3][0] || shapes[1][0] != shapes[2][0] ||
      feature_size(ndims[0], shapes[0]) != feature_size(ndims[out], shapes[out]) ||
      (weighted && shapes[4][0] != shapes[1][0])) {
    return inconsistent_shapes(op);
  }
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return spmm<decltype(value), R>(op, params, ndims, shapes, dtypes, weighted);
  });
}

template <Ties G>
int gspmm_grad_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  const bool weighted = nparam == 7;
  if (G == Ties::kWeight && !weighted) {
    set_error(kBadArguments, "For '%s', expected 7 arguments, but got %d.", op, nparam);
    return kBadArguments;
  }
  int rc = check_args(op, nparam, weighted ? 6 : 5, ndims, shapes, dtypes,
                      weighted ? std::initializer_list<int>{3, 4, 5, 6} : std::initializer_list<int>{3, 4, 5});
  if (rc != kOk) return rc;
  const int64_t F = feature_size(ndims[0], shapes[0]), E = shapes[1][0];
  const int result = weighted ? 6 : 5;
  bool ok = shapes[2][0] == E && ndims[3] == ndims[0] && ndims[4] == ndims[0] && shapes[4][0] == shapes[3][0] &&
            feature_size(ndims[3], shapes[3]) == F && feature_size(ndims[4], shapes[4]) == F &&
            (!weighted || (ndims[5] == 1 && shapes[5][0] == E));
  ok = ok && (G == Ties::kWeight ? ndims[result] == 1 && shapes[result][0] == E
                                 : ndims[result] == ndims[0] && shapes[result][0] == shapes[0][0] &&
                                       feature_size(ndims[result], shapes[result]) == F);
  if (!ok) {
    return inconsistent_shapes(op);
  }
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return spmm_ties<decltype(value), G>(op, params, ndims, shapes, dtypes, weighted);
  });
}

template <Gathered>
int gather_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  if (nparam != 3) {
    set_error(kBadArguments, "For '%s', the kernel expects 2 inputs and 1 output, but got %d arguments.", op, nparam);
    return kBadArguments;
  }
  for (int a = 0; a < nparam; ++a) {
    if (!valid_shape(ndims[a], shapes[a])) {
      set_error(kBadArguments, "For '%s', argument %d has no valid shape.", op, a);
      return kBadArguments;
    }
  }
  const int lead = ndims[1] - 1;
  const int64_t depth = lead >= 0 ? shapes[1][lead] : -1;
  bool ok = depth >= 1 && depth <= ndims[0] && ndims[2] == lead + ndims[0] - depth &&
            std::equal(shapes[1], shapes[1] + lead, shapes[2]) &&
            std::equal(shapes[0] + depth, shapes[0] + ndims[0], shapes[2] + lead) &&
            std::strcmp(dtypes[0], dtypes[2]) == 0;
  if (!ok) return inconsistent_shapes(op);
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return gather_slices<decltype(value)>(op, params, ndims, shapes, dtypes);
  });
}

template <Tied G>
int scatter_ties_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes,
                       const char **dtypes) {
  int rc = check_args(op, nparam, 5, ndims, shapes, dtypes, {1, 3, 4, 5});
  if (rc != kOk) return rc;
  const int d = ndims[0];
  const int64_t n = shapes[2][0];
  const int64_t depth = ndims[2] == 2 ? shapes[2][1] : -1;
  bool ok = depth >= 1 && depth <= d && ndims[1] == d && std::equal(shapes[0], shapes[0] + d, shapes[1]) &&
            ndims[3] == ndims[4] && std::equal(shapes[3], shapes[3] + ndims[3], shapes[4]) && shapes[3][0] == n &&
            numel(ndims[3], shapes[3]) == n * numel(d - static_cast<int>(std::max<int64_t>(depth, 0)),
                                                    shapes[0] + std::max<int64_t>(depth, 0));
  const int r = 5;
  ok = ok && (G == Tied::kX ? ndims[r] == d && std::equal(shapes[0], shapes[0] + d, shapes[r])
                            : ndims[r] == ndims[4] && std::equal(shapes[4], shapes[4] + ndims[4], shapes[r]));
  if (!ok) return inconsistent_shapes(op);
  if (std::strcmp(dtypes[0], "float16") != 0 && std::strcmp(dtypes[0], "float32") != 0 &&
      std::strcmp(dtypes[0], "float64") != 0 && std::strcmp(dtypes[0], "bfloat16") != 0) {
    set_error(kBadArguments, "For '%s', the tie gradient is defined for floating-point dtypes, but got %s.", op,
              dtypes[0]);
    return kBadArguments;
  }
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return scatter_ties<decltype(value), G>(op, params, ndims, shapes, dtypes);
  });
}

template <Spmm R>
int segment_arg_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  // a 5th argument (ms_scatter's direct call): the values too, in one pass
  const bool values = nparam == 5;
  int rc = check_args(op, nparam - values, 3, ndims, shapes, dtypes, {});
  if (rc != kOk) return rc;
  if (ndims[1] != 1 || shapes[1][0] != shapes[0][0] || ndims[3] != ndims[0] || shapes[3][0] != shapes[2][0] ||
      feature_size(ndims[3], shapes[3]) != feature_size(ndims[0], shapes[0]) || std::strcmp(dtypes[3], "int64") != 0 ||
      (values && (!valid_shape(ndims[4], shapes[4]) || ndims[4] != ndims[3] ||
                  !std::equal(shapes[3], shapes[3] + ndims[3], shapes[4]) || std::strcmp(dtypes[4], dtypes[0]) != 0))) {
    return inconsistent_shapes(op);
  }
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return segment_arg<decltype(value), R>(op, params, ndims, shapes, dtypes, values);
  });
}

template <Spmm>
int arg_values_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  int rc = check_args(op, nparam, 3, ndims, shapes, dtypes, {3});
  if (rc != kOk) return rc;
  if (ndims[2] != ndims[0] || ndims[3] != ndims[0] || shapes[3][0] != shapes[2][0] ||
      feature_size(ndims[2], shapes[2]) != feature_size(ndims[0], shapes[0]) ||
      feature_size(ndims[3], shapes[3]) != feature_size(ndims[0], shapes[0]) || std::strcmp(dtypes[2], "int64") != 0) {
    return inconsistent_shapes(op);
  }
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return segment_arg_values<decltype(value)>(op, params, ndims, shapes);
  });
}

template <Spmm R>
int segment_csr_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  int rc = check_args(op, nparam, 3, ndims, shapes, dtypes, {2, 3});
  if (rc != kOk) return rc;
  if (ndims[1] != 1 || shapes[1][0] < 1 || ndims[2] != 1 || shapes[2][0] != 1 || ndims[3] != ndims[0] ||
      shapes[3][0] != shapes[1][0] - 1 || feature_size(ndims[3], shapes[3]) != feature_size(ndims[0], shapes[0])) {
    return inconsistent_shapes(op);
  }
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return segment_csr<decltype(value), R>(op, params, ndims, shapes, dtypes);
  });
}

template <Softmax G>
int segment_softmax_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes,
                          const char **dtypes) {
  constexpr bool kGrad = G == Softmax::kGrad;
  const int inputs = kGrad ? 4 : 3, ids_at = kGrad ? 2 : 1;
  int rc = check_args(op, nparam, inputs, ndims, shapes, dtypes,
                      kGrad ? std::initializer_list<int>{1, 4} : std::initializer_list<int>{3});
  if (rc != kOk) return rc;
  const int out = inputs;
  bool ok = ndims[ids_at] == 1 && shapes[ids_at][0] == shapes[0][0] && ndims[out] == ndims[0];
  for (int i = 0; ok && i < ndims[0]; ++i) ok = shapes[out][i] == shapes[0][i] && (!kGrad || shapes[1][i] == shapes[0][i]);
  if (!ok || (kGrad && ndims[1] != ndims[0])) {
    return inconsistent_shapes(op);
  }
  const char *d = dtypes[0];
  if (std::strcmp(d, "float32") == 0) return segment_softmax<float, kGrad>(op, params, ndims, shapes, dtypes);
  if (std::strcmp(d, "float64") == 0) return segment_softmax<double, kGrad>(op, params, ndims, shapes, dtypes);
  if (std::strcmp(d, "float16") == 0) return segment_softmax<half_t, kGrad>(op, params, ndims, shapes, dtypes);
  if (std::strcmp(d, "bfloat16") == 0) return segment_softmax<bf16_t, kGrad>(op, params, ndims, shapes, dtypes);
  set_error(kBadArguments, "For '%s', the dtype of 'src' must be float16, float32, float64 or bfloat16, but got %s.",
            op, d);
  return kBadArguments;
}

template <Spmm R>
int segment_reduce_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes,
                         const char **dtypes) {
  int rc = check_args(op, nparam, 4, ndims, shapes, dtypes, {3, 4});
  if (rc != kOk) return rc;
  if (ndims[1] != 1 || shapes[1][0] != shapes[0][0] || ndims[3] != 1 || shapes[3][0] != 1 || ndims[4] != ndims[0] ||
      shapes[4][0] != shapes[2][0] || feature_size(ndims[4], shapes[4]) != feature_size(ndims[0], shapes[0])) {
    return inconsistent_shapes(op);
  }
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return segment_reduce<decltype(value), R>(op, params, ndims, shapes, dtypes);
  });
}

template <Sddmm O>
int gsddmm_entry(const char *op, int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes) {
  int rc = check_args(op, nparam, 4, ndims, shapes, dtypes, {1, 4});
  if (rc != kOk) return rc;
  const int64_t F = feature_size(ndims[0], shapes[0]);
  const bool ok = shapes[2][0] == shapes[3][0] && F == feature_size(ndims[1], shapes[1]) &&
                  shapes[4][0] == shapes[2][0] && (O == Sddmm::kDot ? ndims[4] == 1 : feature_size(ndims[4], shapes[4]) == F);
  if (!ok) {
    return inconsistent_shapes(op);
  }
  return by_value_dtype(op, dtypes[0], [&](auto value) {
    return sddmm<decltype(value), O>(op, params, ndims, shapes, dtypes);
  });
}

}  // namespace message
}  // namespace ms_scatter

// X(entry, kind, tag): the fused entries, each with its shape and type inference.
// X(entry, kind, tag, op): the fused entries, each with its shape and type inference; `op` is the
// function its error messages name.
#define MSS_MESSAGE_ENTRIES(X)                                                \
  X(GspmmSum, gspmm, Spmm::kSum, "gspmm")                                     \
  X(GspmmMean, gspmm, Spmm::kMean, "gspmm")                                   \
  X(GspmmMax, gspmm, Spmm::kMax, "gspmm")                                     \
  X(GspmmMin, gspmm, Spmm::kMin, "gspmm")                                     \
  X(GsddmmAdd, gsddmm, Sddmm::kAdd, "gsddmm")                                 \
  X(GsddmmSub, gsddmm, Sddmm::kSub, "gsddmm")                                 \
  X(GsddmmMul, gsddmm, Sddmm::kMul, "gsddmm")                                 \
  X(GsddmmDot, gsddmm, Sddmm::kDot, "gsddmm")                                 \
  X(GspmmTieGrad, gspmm_grad, Ties::kX, "gspmm")                              \
  X(GspmmTieGradWeight, gspmm_grad, Ties::kWeight, "gspmm")                   \
  X(ScatterTieGradX, scatter_ties, Tied::kX, "scatter_max/min gradient")      \
  X(ScatterGradGather, gather, Gathered::kSlices, "scatter gradient")         \
  X(ScatterTieGradUpdates, scatter_ties, Tied::kUpdates, "scatter_max/min gradient") \
  X(SegmentArgMax, segment_arg, Spmm::kMax, "segment_argmax")                 \
  X(SegmentArgMin, segment_arg, Spmm::kMin, "segment_argmin")                 \
  X(SegmentArgValues, arg_values, Spmm::kMax, "segment_arg")                  \
  X(SegmentReduceSum, segment_reduce, Spmm::kSum, "segment_reduce")           \
  X(SegmentReduceMean, segment_reduce, Spmm::kMean, "segment_reduce")         \
  X(SegmentReduceMax, segment_reduce, Spmm::kMax, "segment_reduce")           \
  X(SegmentReduceMin, segment_reduce, Spmm::kMin, "segment_reduce")           \
  X(SegmentReduceProd, segment_reduce, Spmm::kProd, "segment_reduce")         \
  X(SegmentCsrSum, segment_csr, Spmm::kSum, "segment_csr")                   \
  X(SegmentCsrMean, segment_csr, Spmm::kMean, "segment_csr")                 \
  X(SegmentCsrMax, segment_csr, Spmm::kMax, "segment_csr")                   \
  X(SegmentCsrMin, segment_csr, Spmm::kMin, "segment_csr")                   \
  X(SegmentCsrProd, segment_csr, Spmm::kProd, "segment_csr")                 \
  X(SegmentSoftmax, segment_softmax, Softmax::kForward, "segment_softmax")    \
  X(SegmentSoftmaxGrad, segment_softmax, Softmax::kGrad, "segment_softmax")

#define MSS_MESSAGE_ENTRY(NAME, KIND, TAG, OP)                                                               \
  MSS_EXPORT int NAME(int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes,        \
                      void * /* stream */, void *extra) {                                                   \
    ms_scatter::entry_calls()[ms_scatter::kCalls_##NAME].fetch_add(1, std::memory_order_relaxed);          \
    const ms_scatter::CallerRaises caller_raises(extra == nullptr);                                        \
    try {                                                                                                  \
      return ms_scatter::message::KIND##_entry<ms_scatter::message::TAG>(OP, nparam, params, ndims,       \
                                                                         shapes, dtypes);                  \
    } catch (const std::exception &e) {                                                                    \
      ms_scatter::set_error(ms_scatter::kBadArguments, "For '%s', the kernel failed: %s.", OP, e.what());  \
      return ms_scatter::kBadArguments;                                                                    \
    }                                                                                                      \
  }                                                                                                        \
  MSS_EXPORT std::vector<int64_t> NAME##InferShape(int *ndims, int64_t **shapes, void * /* AotExtra */) {  \
    return ms_scatter::message::infer_##KIND(ms_scatter::message::TAG, ndims, shapes);                     \
  }                                                                                                        \
  MSS_EXPORT int NAME##InferType(std::vector<int> types, void * /* AotExtra */) {                          \
    if (types.empty()) throw std::invalid_argument("For '" OP "', no input types.");                       \
    return ms_scatter::message::type_##KIND(types[0]);                                                     \
  }

namespace ms_scatter {
namespace message {
// Output shapes (dimensions unknown at compile time stay -1; an unknown rank gives (-2)).
inline std::vector<int64_t> infer_gspmm(Spmm, int *ndims, int64_t **shapes) {
  if (ndims[0] < 0) return {-2};
  std::vector<int64_t> out(shapes[0], shapes[0] + ndims[0]);
  if (out.empty()) throw std::invalid_argument("For 'gspmm', 'x' must have rank >= 1.");
  out[0] = ndims[3] >= 1 ? shapes[3][0] : -1;
  return out;
}
inline std::vector<int64_t> infer_gspmm_grad(Ties g, int *ndims, int64_t **shapes) {
  if (g == Ties::kWeight) return {ndims[1] >= 1 ? shapes[1][0] : -1};
  if (ndims[0] < 0) return {-2};
  return std::vector<int64_t>(shapes[0], shapes[0] + ndims[0]);
}
// segment_arg*: (E, *F) -> (N, *F), N = rows.shape[0]; SegmentArgValues: arg's shape.
// ScatterTieGrad*: input_x's shape (out, params[0]) or the updates' (params[4]).
inline std::vector<int64_t> infer_scatter_ties(Tied g, int *ndims, int64_t **shapes) {
  const int a = g == Tied::kX ? 0 : 4;
  if (ndims[a] < 0) return {-2};
  return std::vector<int64_t>(shapes[a], shapes[a] + ndims[a]);
}
inline int type_scatter_ties(int first) { return first; }
// ScatterGradGather: indices.shape[:-1] + x.shape[d:].
inline std::vector<int64_t> infer_gather(Gathered, int *ndims, int64_t **shapes) {
  if (ndims[0] < 0 || ndims[1] < 1 || shapes[1][ndims[1] - 1] < 0) return {-2};
  const int64_t depth = shapes[1][ndims[1] - 1];
  if (depth > ndims[0]) throw std::invalid_argument("For 'gather', the index depth exceeds the rank of 'x'.");
  std::vector<int64_t> out(shapes[1], shapes[1] + ndims[1] - 1);
  out.insert(out.end(), shapes[0] + depth, shapes[0] + ndims[0]);
  return out;
}
inline int type_gather(int first) { return first; }
inline std::vector<int64_t> infer_segment_arg(Spmm, int *ndims, int64_t **shapes) {
  if (ndims[0] < 0) return {-2};
  std::vector<int64_t> out(shapes[0], shapes[0] + ndims[0]);
  if (out.empty()) throw std::invalid_argument("For 'segment_arg', 'src' must have rank >= 1.");
  out[0] = ndims[2] >= 1 ? shapes[2][0] : -1;
  return out;
}
inline std::vector<int64_t> infer_arg_values(Spmm, int *ndims, int64_t **shapes) {
  if (ndims[2] < 0) return {-2};
  return std::vector<int64_t>(shapes[2], shapes[2] + ndims[2]);
}
// The output's TypeId: the first input's, int64 for the arg.
inline int type_gspmm(int first) { return first; }
inline int type_gspmm_grad(int first) { return first; }
inline int type_gsddmm(int first) { return first; }
inline int type_arg_values(int first) { return first; }
inline int type_segment_softmax(int first) { return first; }
inline int type_segment_reduce(int first) { return first; }
inline int type_segment_csr(int first) { return first; }
inline std::vector<int64_t> infer_segment_csr(Spmm, int *ndims, int64_t **shapes) {
  if (ndims[0] < 0) return {-2};
  std::vector<int64_t> out(shapes[0], shapes[0] + ndims[0]);
  if (out.empty()) throw std::invalid_argument("For 'segment_csr', 'src' must have rank >= 1.");
  out[0] = ndims[1] >= 1 && shapes[1][0] >= 1 ? shapes[1][0] - 1 : -1;
  return out;
}
inline std::vector<int64_t> infer_segment_reduce(Spmm r, int *ndims, int64_t **shapes) {
  return infer_segment_arg(r, ndims, shapes);
}
inline std::vector<int64_t> infer_segment_softmax(Softmax, int *ndims, int64_t **shapes) {
  if (ndims[0] < 0) return {-2};
  return std::vector<int64_t>(shapes[0], shapes[0] + ndims[0]);
}
inline int type_segment_arg(int) { return int64_type_id().load(std::memory_order_relaxed); }
inline std::vector<int64_t> infer_gsddmm(Sddmm o, int *ndims, int64_t **shapes) {
  const int64_t edges = ndims[2] >= 1 ? shapes[2][0] : -1;
  if (o == Sddmm::kDot) return {edges};
  if (ndims[0] < 0) return {-2};
  std::vector<int64_t> out(shapes[0], shapes[0] + ndims[0]);
  if (out.empty()) throw std::invalid_argument("For 'gsddmm', 'x_u' must have rank >= 1.");
  out[0] = edges;
  return out;
}
}  // namespace message
}  // namespace ms_scatter

MSS_MESSAGE_ENTRIES(MSS_MESSAGE_ENTRY)
#undef MSS_MESSAGE_ENTRY

#endif  // MS_SCATTER_CPU_MESSAGE_H_
