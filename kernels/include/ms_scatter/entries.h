// ms-scatter: the exported aot entry points, generated from MS_SCATTER_REDUCTIONS for
// every backend. Include at the end of a backend's source, after it has defined
//   template <typename Op> int ms_scatter::dispatch(const char *op, IndexMode, OutputMode,
//       int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream);
//
//   Scatter<R>_token / ScatterNd<R>_token    in place on input_x, 1-element int32 output
//   Scatter<R>_return / ScatterNd<R>_return  in place, plus a copy of the result
//   TensorScatter<R>                         out of place (input_x untouched)
// and for each entry E the shape inference MindSpore calls for dynamic-shape graphs
// (primitive attribute cpp_infer_shape): std::vector<int64_t> EInferShape(ndims, shapes, extra).
#ifndef MS_SCATTER_ENTRIES_H_
#define MS_SCATTER_ENTRIES_H_

#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/error.h"
#include "ms_scatter/plan.h"

#define MSS_EXPORT extern "C" __attribute__((visibility("default")))
#define MSS_AOT_ARGS \
  int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream, void *
#define MSS_ENTRY(NAME, OPNAME, OP, IM, OM)                                                                \
  MSS_EXPORT int NAME(MSS_AOT_ARGS) {                                                                      \
    try {                                                                                                  \
      return ms_scatter::dispatch<OP>(OPNAME, ms_scatter::IndexMode::IM, ms_scatter::OutputMode::OM, nparam, \
                                      params, ndims, shapes, dtypes, stream);                              \
    } catch (const std::exception &e) { /* e.g. bad_alloc: never let it cross the C ABI */                \
      ms_scatter::set_error(ms_scatter::kBadArguments, "For '%s', the kernel failed: %s.", OPNAME, e.what()); \
      return ms_scatter::kBadArguments;                                                                    \
    }                                                                                                      \
  }
namespace ms_scatter {

inline bool shape_known(int ndim, const int64_t *shape) {
  for (int i = 0; i < ndim; ++i)
    if (shape[i] < 0) return false;
  return true;
}

// The output shape of an entry from the shapes of its 3 inputs: (1,) for the token entries,
// input_x's shape for the others. MindSpore calls it (as <entry>InferShape) while compiling
// a dynamic-shape graph, where -1 marks an unknown dimension and (-2) an unknown rank, and
// again at each launch with the actual shapes. Shapes with unknown parts are not checked
// here: MindSpore runs our Python inference right after this call (infer/ checks what is
// known, with its ValueError). Known shapes are checked by the kernels' rule (check_shapes)
// and a mismatch returns kBadArguments with the message in *msg.
inline int infer_output_shape(const char *op, IndexMode im, OutputMode om, const int *ndims,
                              const int64_t *const *shapes, std::vector<int64_t> *out, std::string *msg) {
  bool known = true;
  for (int a = 0; a < 3; ++a) known = known && ndims[a] >= 0 && shape_known(ndims[a], shapes[a]);
  if (known) {
    for (int a = 0; a < 3; ++a) {
      if (!valid_shape(ndims[a], shapes[a])) {
        *msg = format_message("For '%s', argument %d has an invalid shape (negative or too large dimensions).", op, a);
        return kBadArguments;
      }
    }
    // TensorScatter* take indices of rank >= 2 (infer/); the kernels accept rank 1
    const int min_rank = om == OutputMode::kTensor ? 2 : (im == IndexMode::kNd ? 1 : 0);
    const int rc = check_shapes(op, im, min_rank, ndims, shapes, msg);
    if (rc != kOk) return rc;
  }
  if (om == OutputMode::kToken) {
    out->assign(1, 1);
  } else {
    out->assign(shapes[0], shapes[0] + (ndims[0] > 0 ? ndims[0] : 0));
  }
  return kOk;
}

}  // namespace ms_scatter

// MindSpore's shape-inference signature: a C++ exception becomes its RuntimeError
// ("... Error message is <what()>"), which names the op in our wording.
#define MSS_INFER(NAME, OPNAME, IM, OM)                                                                      \
  MSS_EXPORT std::vector<int64_t> NAME##InferShape(int *ndims, int64_t **shapes, void * /* AotExtra */) {    \
    std::vector<int64_t> out;                                                                                \
    std::string msg;                                                                                         \
    if (ms_scatter::infer_output_shape(OPNAME, ms_scatter::IndexMode::IM, ms_scatter::OutputMode::OM, ndims, \
                                       shapes, &out, &msg) != ms_scatter::kOk)                               \
      throw std::invalid_argument(msg);                                                                      \
    return out;                                                                                              \
  }
#define MSS_ENTRY_AND_INFER(NAME, OPNAME, OP, IM, OM) \
  MSS_ENTRY(NAME, OPNAME, OP, IM, OM)                 \
  MSS_INFER(NAME, OPNAME, IM, OM)
#define MSS_ENTRIES(R, OP)                                                        \
  MSS_ENTRY_AND_INFER(Scatter##R##_token, "Scatter" #R, OP, kFirstAxis, kToken)   \
  MSS_ENTRY_AND_INFER(Scatter##R##_return, "Scatter" #R, OP, kFirstAxis, kReturn) \
  MSS_ENTRY_AND_INFER(ScatterNd##R##_token, "ScatterNd" #R, OP, kNd, kToken)      \
  MSS_ENTRY_AND_INFER(ScatterNd##R##_return, "ScatterNd" #R, OP, kNd, kReturn)    \
  MSS_ENTRY_AND_INFER(TensorScatter##R, "TensorScatter" #R, OP, kNd, kTensor)
MS_SCATTER_REDUCTIONS(MSS_ENTRIES)
#undef MSS_ENTRIES

// <entry>InferShape with a C signature, by entry name (tests call it through ctypes):
// returns the output's rank with its dimensions in out[0..cap), or -1 with the message in
// msg (-2: no such entry).
MSS_EXPORT int ms_scatter_infer_shape(const char *entry, int *ndims, int64_t **shapes, int64_t *out, int cap,
                                      char *msg, int len) {
  std::vector<int64_t> shape;
  std::string error = "no such entry";
  int rc = -2;
#define MSS_INFER_CASE(NAME, OPNAME, IM, OM)                                                          \
  if (rc == -2 && std::strcmp(entry, #NAME) == 0)                                                    \
    rc = ms_scatter::infer_output_shape(OPNAME, ms_scatter::IndexMode::IM, ms_scatter::OutputMode::OM, \
                                        ndims, shapes, &shape, &error) == ms_scatter::kOk ? 0 : -1;
#define MSS_INFER_CASES(R, OP)                                           \
  MSS_INFER_CASE(Scatter##R##_token, "Scatter" #R, kFirstAxis, kToken)   \
  MSS_INFER_CASE(Scatter##R##_return, "Scatter" #R, kFirstAxis, kReturn) \
  MSS_INFER_CASE(ScatterNd##R##_token, "ScatterNd" #R, kNd, kToken)      \
  MSS_INFER_CASE(ScatterNd##R##_return, "ScatterNd" #R, kNd, kReturn)    \
  MSS_INFER_CASE(TensorScatter##R, "TensorScatter" #R, kNd, kTensor)
  MS_SCATTER_REDUCTIONS(MSS_INFER_CASES)
#undef MSS_INFER_CASES
#undef MSS_INFER_CASE
  if (rc != 0) {
    if (msg && len > 0) {
      std::strncpy(msg, error.c_str(), static_cast<size_t>(len) - 1);
      msg[len - 1] = '\0';
    }
    return rc;
  }
  for (size_t i = 0; i < shape.size() && static_cast<int>(i) < cap; ++i) out[i] = shape[i];
  return static_cast<int>(shape.size());
}
#undef MSS_ENTRY_AND_INFER
#undef MSS_INFER
#undef MSS_ENTRY
#undef MSS_AOT_ARGS

MSS_EXPORT int ms_scatter_last_error(char *buf, int len, unsigned long long *count) {
  return ms_scatter::copy_last_error(buf, len, count);
}

#endif  // MS_SCATTER_ENTRIES_H_
