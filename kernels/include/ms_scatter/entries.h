// ms-scatter: the exported aot entry points, generated from MS_SCATTER_REDUCTIONS for
// every backend. Include at the end of a backend's source, after it has defined
//   template <typename Op> int ms_scatter::dispatch(const char *op, IndexMode, OutputMode, bool sharded,
//       int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream);
//
//   Scatter<R>_token / ScatterNd<R>_token    in place on input_x, 1-element int32 output
//   Scatter<R>_return / ScatterNd<R>_return  in place, plus a copy of the result
//   TensorScatter<R>                         out of place (input_x untouched)
//   Scatter<R>_shard_token / ScatterNd<R>_shard_token / TensorScatter<R>_shard
//                                            the same on a row shard: a 4th input, int64
//                                            (row_begin, global_rows) (Plan::sharded)
#ifndef MS_SCATTER_ENTRIES_H_
#define MS_SCATTER_ENTRIES_H_

#include <exception>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/error.h"
#include "ms_scatter/plan.h"

#define MSS_EXPORT extern "C" __attribute__((visibility("default")))
#define MSS_AOT_ARGS \
  int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream, void *
#define MSS_ENTRY(NAME, OPNAME, OP, IM, OM, SHARDED)                                                       \
  MSS_EXPORT int NAME(MSS_AOT_ARGS) {                                                                      \
    try {                                                                                                  \
      return ms_scatter::dispatch<OP>(OPNAME, ms_scatter::IndexMode::IM, ms_scatter::OutputMode::OM, SHARDED, \
                                      nparam, params, ndims, shapes, dtypes, stream);                      \
    } catch (const std::exception &e) { /* e.g. bad_alloc: never let it cross the C ABI */                \
      ms_scatter::set_error(ms_scatter::kBadArguments, "For '%s', the kernel failed: %s.", OPNAME, e.what()); \
      return ms_scatter::kBadArguments;                                                                    \
    }                                                                                                      \
  }
#define MSS_ENTRIES(R, OP)                                                           \
  MSS_ENTRY(Scatter##R##_token, "Scatter" #R, OP, kFirstAxis, kToken, false)         \
  MSS_ENTRY(Scatter##R##_return, "Scatter" #R, OP, kFirstAxis, kReturn, false)       \
  MSS_ENTRY(ScatterNd##R##_token, "ScatterNd" #R, OP, kNd, kToken, false)            \
  MSS_ENTRY(ScatterNd##R##_return, "ScatterNd" #R, OP, kNd, kReturn, false)          \
  MSS_ENTRY(TensorScatter##R, "TensorScatter" #R, OP, kNd, kTensor, false)           \
  MSS_ENTRY(Scatter##R##_shard_token, "Scatter" #R, OP, kFirstAxis, kToken, true)    \
  MSS_ENTRY(ScatterNd##R##_shard_token, "ScatterNd" #R, OP, kNd, kToken, true)       \
  MSS_ENTRY(TensorScatter##R##_shard, "TensorScatter" #R, OP, kNd, kTensor, true)
MS_SCATTER_REDUCTIONS(MSS_ENTRIES)
#undef MSS_ENTRIES
#undef MSS_ENTRY
#undef MSS_AOT_ARGS

MSS_EXPORT int ms_scatter_last_error(char *buf, int len, unsigned long long *count) {
  return ms_scatter::copy_last_error(buf, len, count);
}

#endif  // MS_SCATTER_ENTRIES_H_
