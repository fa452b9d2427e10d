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
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/plan.h"
#include "ms_scatter/reducer.h"

namespace ms_scatter {
namespace {

// Calls on the same input_x serialise (striped locks keyed by its address), so two
// concurrent in-place calls on one Parameter never lose an update.
std::mutex &lock_for(const void *p) {
  static std::mutex stripes[64];
  return stripes[(reinterpret_cast<uintptr_t>(p) >> 6) % 64];
}

template <typename T>
int check_nonzero(const Plan &p, const T *upd) {
  const int64_t total = p.n * p.slice;
  for (int64_t i = 0; i < total; ++i) {
    if (upd[i] == T(0)) {
      set_error(kDivisionByZero,
                "For '%s', integer division by zero: 'updates' must not contain 0 for dtype of 'input_x', "
                "but got 0 at position %s of 'updates' (shape %s).",
                p.op, position_str(i, p.upd_ndim, p.upd_shape).c_str(), shape_str(p.upd_ndim, p.upd_shape).c_str());
      return kDivisionByZero;
    }
  }
  return kOk;
}

// Accumulator == storage type: apply the updates in index order, one slice at a time.
template <typename T, typename Op>
void apply_direct(T *dst, const T *upd, const int64_t *off, int64_t n, int64_t slice) {
  using R = Reducer<T, Op>;
  for (int64_t k = 0; k < n; ++k) {
    T *__restrict d = dst + off[k];
    const T *__restrict u = upd + k * slice;
    for (int64_t j = 0; j < slice; ++j) d[j] = R::update(d[j], u[j]);
  }
}

// Half precision: group the updates by destination (keeping index order inside a
// group), accumulate each destination slice in float and round once.
template <typename T, typename Op>
void apply_grouped(T *dst, const T *upd, const int64_t *off, int64_t n, int64_t slice) {
  using R = Reducer<T, Op>;
  using A = typename R::acc_t;
  std::vector<std::pair<int64_t, int64_t>> order(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) order[k] = {off[k], k};
  std::sort(order.begin(), order.end());  // (offset, position): index order within a destination
  std::vector<A> acc(static_cast<size_t>(slice));
  for (int64_t g = 0; g < n;) {
    const int64_t o = order[g].first;
    T *d = dst + o;
    for (int64_t j = 0; j < slice; ++j) acc[j] = R::load(d[j]);
    for (; g < n && order[g].first == o; ++g) {
      const T *u = upd + order[g].second * slice;
      for (int64_t j = 0; j < slice; ++j) acc[j] = R::update(acc[j], R::load(u[j]));
    }
    for (int64_t j = 0; j < slice; ++j) d[j] = R::store(acc[j]);
  }
}

template <typename T, typename I, typename Op>
int run(const Plan &p, OutputMode om, void **params) {
  T *x = static_cast<T *>(params[0]);
  const I *idx = static_cast<const I *>(params[1]);
  const T *upd = static_cast<const T *>(params[2]);
  std::vector<int64_t> off;
  int rc = index_offsets<I>(p, idx, &off);
  if (rc != kOk) return rc;
  if constexpr (RejectsZero<Op>::value && std::is_integral<T>::value) {
    rc = check_nonzero<T>(p, upd);
    if (rc != kOk) return rc;
  }
  const size_t x_bytes = static_cast<size_t>(p.x_numel) * sizeof(T);
  T *dst = x;
  if (om == OutputMode::kTensor) {
    dst = static_cast<T *>(params[3]);
    if (x_bytes) std::memcpy(dst, x, x_bytes);
  }
  {
    std::unique_lock<std::mutex> lock(lock_for(x), std::defer_lock);
    if (om != OutputMode::kTensor) lock.lock();
    if constexpr (std::is_same<typename Reducer<T, Op>::acc_t, T>::value)
      apply_direct<T, Op>(dst, upd, off.data(), p.n, p.slice);
    else
      apply_grouped<T, Op>(dst, upd, off.data(), p.n, p.slice);
    if (om == OutputMode::kReturn && x_bytes) std::memcpy(params[3], x, x_bytes);
  }
  if (om == OutputMode::kToken) *static_cast<int32_t *>(params[3]) = 0;
  return kOk;
}

template <typename Op>
int dispatch(const char *op, IndexMode im, OutputMode om, int nparam, void **params, int *ndims,
             int64_t **shapes, const char **dtypes) {
  Plan p;
  int rc = make_plan(op, im, nparam, ndims, shapes, &p);
  if (rc != kOk) return rc;
  if (std::strcmp(dtypes[0], dtypes[2]) != 0) {
    set_error(kBadArguments, "For '%s', 'updates' must have the dtype of 'input_x' (%s), but got %s.", op,
              dtypes[0], dtypes[2]);
    return kBadArguments;
  }
#define MSS_INDEX_CASE(IN, IT)                                   \
  if (std::strcmp(dtypes[1], #IN) == 0) return run<T, IT, Op>(p, om, params);
#define MSS_VALUE_CASE(VN, VT)                                   \
  if (std::strcmp(dtypes[0], #VN) == 0) {                        \
    using T = VT;                                                \
    MS_SCATTER_INDEX_DTYPES(MSS_INDEX_CASE)                      \
    set_error(kBadArguments, "For '%s', 'indices' must be int32 or int64, but got %s.", op, dtypes[1]); \
    return kBadArguments;                                        \
  }
  MS_SCATTER_VALUE_DTYPES(MSS_VALUE_CASE)
#undef MSS_VALUE_CASE
#undef MSS_INDEX_CASE
  set_error(kBadArguments, "For '%s', the dtype of 'input_x' is not supported, but got %s.", op, dtypes[0]);
  return kBadArguments;
}

}  // namespace
}  // namespace ms_scatter

#define MSS_EXPORT extern "C" __attribute__((visibility("default")))
#define MSS_AOT_ARGS int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *, void *
#define MSS_ENTRY(NAME, OPNAME, OP, IM, OM)                                                   \
  MSS_EXPORT int NAME(MSS_AOT_ARGS) {                                                         \
    return ms_scatter::dispatch<OP>(OPNAME, ms_scatter::IndexMode::IM, ms_scatter::OutputMode::OM, nparam, \
                                    params, ndims, shapes, dtypes);                           \
  }
#define MSS_ENTRIES(R, OP)                                                  \
  MSS_ENTRY(Scatter##R##_token, "Scatter" #R, OP, kFirstAxis, kToken)       \
  MSS_ENTRY(Scatter##R##_return, "Scatter" #R, OP, kFirstAxis, kReturn)     \
  MSS_ENTRY(ScatterNd##R##_token, "ScatterNd" #R, OP, kNd, kToken)          \
  MSS_ENTRY(ScatterNd##R##_return, "ScatterNd" #R, OP, kNd, kReturn)        \
  MSS_ENTRY(TensorScatter##R, "TensorScatter" #R, OP, kNd, kTensor)
MS_SCATTER_REDUCTIONS(MSS_ENTRIES)

MSS_EXPORT int ms_scatter_last_error(char *buf, int len, unsigned long long *count) {
  return ms_scatter::copy_last_error(buf, len, count);
}
