// ms-scatter: the exported aot entry points, generated from MS_SCATTER_REDUCTIONS for
// every backend. Include at the end of a backend's source, after it has defined
//   template <typename Op> int ms_scatter::dispatch(const char *op, IndexMode, OutputMode, bool sharded,
//       int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream);
//
//   Scatter<R>_token / ScatterNd<R>_token    in place on input_x, 1-element int32 output
//   Scatter<R>_return / ScatterNd<R>_return  in place, plus a copy of the result (the graph
//                                            result of float64 and bfloat16 calls)
//   TensorScatter<R>                         out of place (input_x untouched)
//   UnsortedSegment<S>                       out of place, first axis, negative ids dropped
//                                            (MS_SCATTER_SEGMENT_REDUCTIONS: Sum Prod Max Min)
//   ScatterNd                                TensorScatterAdd under MindSpore's ScatterNd name
//                                            (scatter_nd: input_x is the zeros of `shape`)
//   Scatter<R>_shard_token / ScatterNd<R>_shard_token / TensorScatter<R>_shard
//                                            the same on a row shard: a 4th input, int64
//                                            (row_begin, global_rows) (Plan::sharded)
// and ms_scatter_call_counts: how often each entry point was launched (what
// `python -m ms_scatter.patch --report` prints; one relaxed atomic add per call);
// for each entry E the shape inference MindSpore calls for dynamic-shape graphs (primitive
// attribute cpp_infer_shape): std::vector<int64_t> EInferShape(ndims, shapes, extra).
#ifndef MS_SCATTER_ENTRIES_H_
#define MS_SCATTER_ENTRIES_H_

#include <atomic>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "ms_scatter/dtypes.h"
#include "ms_scatter/error.h"
#include "ms_scatter/plan.h"

#define MSS_EXPORT extern "C" __attribute__((visibility("default")))

namespace ms_scatter {
#define MSS_IDS(R, OP) \
  kCalls_Scatter##R##_token, kCalls_Scatter##R##_return, kCalls_ScatterNd##R##_token, kCalls_ScatterNd##R##_return, \
      kCalls_TensorScatter##R, kCalls_Scatter##R##_shard_token, kCalls_ScatterNd##R##_shard_token,                  \
      kCalls_TensorScatter##R##_shard,
#define MSS_SEGMENT_IDS(S, OP) kCalls_UnsortedSegment##S,
// The fused message-passing entries (CPU only: kernels/cpu/message.h) are counted here too.
#define MS_SCATTER_MESSAGE_ENTRY_NAMES(X) \
  X(GspmmSum) X(GspmmMean) X(GspmmMax) X(GspmmMin) X(GsddmmAdd) X(GsddmmSub) X(GsddmmMul) X(GsddmmDot) \
  X(GspmmTieGrad) X(GspmmTieGradWeight) X(ScatterTieGradX) X(ScatterTieGradUpdates) X(ScatterGradGather) X(SegmentArgMax) X(SegmentArgMin) X(SegmentArgValues) \
  X(SegmentSoftmax) X(SegmentSoftmaxGrad) X(SegmentReduceSum) X(SegmentReduceMean) X(SegmentReduceMax) \
  X(SegmentReduceMin) X(SegmentReduceProd) X(SegmentCsrSum) X(SegmentCsrMean) X(SegmentCsrMax) X(SegmentCsrMin) \
  X(SegmentCsrProd)
#define MSS_MESSAGE_IDS(NAME) kCalls_##NAME,
enum EntryId {
  MS_SCATTER_REDUCTIONS(MSS_IDS) MS_SCATTER_SEGMENT_REDUCTIONS(MSS_SEGMENT_IDS) kCalls_ScatterNd,
  MS_SCATTER_MESSAGE_ENTRY_NAMES(MSS_MESSAGE_IDS) kEntryCount
};
#undef MSS_MESSAGE_IDS
#undef MSS_SEGMENT_IDS
#undef MSS_IDS
inline std::atomic<unsigned long long> *entry_calls() {
  static std::atomic<unsigned long long> calls[kEntryCount];  // static storage: zero-initialised
  return calls;
}
}  // namespace ms_scatter

// extra: MindSpore's AotExtra; null when ms_scatter's Python side calls the entry itself (a
// PYNATIVE direct call, the tests), which raises the message: then it is not also printed.
#define MSS_AOT_ARGS \
  int nparam, void **params, int *ndims, int64_t **shapes, const char **dtypes, void *stream, void *extra
#define MSS_ENTRY(NAME, OPNAME, OP, IM, OM, SHARDED)                                                       \
  MSS_EXPORT int NAME(MSS_AOT_ARGS) {                                                                      \
    ms_scatter::entry_calls()[ms_scatter::kCalls_##NAME].fetch_add(1, std::memory_order_relaxed);          \
    const ms_scatter::CallerRaises caller_raises(extra == nullptr);                                        \
    try {                                                                                                  \
      return ms_scatter::dispatch<OP>(OPNAME, ms_scatter::IndexMode::IM, ms_scatter::OutputMode::OM, SHARDED, \
                                      nparam, params, ndims, shapes, dtypes, stream);                      \
    } catch (const std::exception &e) { /* e.g. bad_alloc: never let it cross the C ABI */                \
      ms_scatter::set_error(ms_scatter::kBadArguments, "For '%s', the kernel failed: %s.", OPNAME, e.what()); \
      return ms_scatter::kBadArguments;                                                                    \
    }                                                                                                      \
  }
namespace ms_scatter {

// The output shape of an entry from the shapes of its inputs (x, indices, updates[, shard]):
// (1,) for the token entries, input_x's shape for the others. MindSpore calls it (as
// <entry>InferShape) while compiling a dynamic-shape graph, where -1 marks an unknown
// dimension and (-2) an unknown rank, and again at each launch with the actual shapes.
// Shapes with unknown parts are not checked here: MindSpore runs our Python inference right
// after this call (infer/ checks what is known, with its ValueError). Known shapes get the
// kernels' own checks (check_plan) and infer/'s rank rule of TensorScatter*; a failure
// returns kBadArguments with the message in *why.
inline int infer_output_shape(const char *op, IndexMode im, OutputMode om, bool sharded, const int *ndims,
                              int64_t *const *shapes, std::vector<int64_t> *out, std::string *why) {
  const int inputs = sharded ? 4 : 3;
  bool known = true;
  for (int a = 0; a < inputs; ++a) {
    known = known && ndims[a] >= 0;
    for (int i = 0; known && i < ndims[a]; ++i) known = shapes[a][i] >= 0;
  }
  if (known) {
    if (om == OutputMode::kTensor && im == IndexMode::kNd && ndims[1] < 2) {
      *why = format_message("For '%s', the rank of 'indices' must be >= 2, but got %d (shape %s).", op, ndims[1],
                            shape_str(ndims[1], shapes[1]).c_str());
      return kBadArguments;
    }
    int64_t one[1] = {1};
    int nd[5];
    int64_t *sh[5];
    for (int a = 0; a < inputs; ++a) {
      nd[a] = ndims[a];
      sh[a] = shapes[a];
    }
    nd[inputs] = om == OutputMode::kToken ? 1 : ndims[0];  // the output the kernel will be given
    sh[inputs] = om == OutputMode::kToken ? one : shapes[0];
    Plan p;
    const int rc = check_plan(op, im, nd, sh, &p, sharded, why);
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

namespace ms_scatter {
// MindSpore's TypeId of int32 (the token entries' output dtype): 34 in MindSpore 2.10; the
// Python side sets it from mindspore._c_expression.typing at import.
inline std::atomic<int> &int32_type_id() {
  static std::atomic<int> id{34};
  return id;
}
// ... and of int64 (the arg outputs of message.h): 35 in MindSpore 2.10.
inline std::atomic<int> &int64_type_id() {
  static std::atomic<int> id{35};
  return id;
}
}  // namespace ms_scatter

// MindSpore's shape- and type-inference signatures (attributes cpp_infer_shape and
// cpp_infer_type; the type one takes the inputs' TypeIds by value). A C++ exception becomes
// MindSpore's RuntimeError ("... Error message is <what()>"), which names the op in our
// wording. The dtype rules themselves are checked on the Python side before the node.
#define MSS_INFER(NAME, OPNAME, IM, OM, SHARDED)                                                           \
  MSS_EXPORT std::vector<int64_t> NAME##InferShape(int *ndims, int64_t **shapes, void * /* AotExtra */) {  \
    std::vector<int64_t> out;                                                                              \
    std::string why;                                                                                       \
    if (ms_scatter::infer_output_shape(OPNAME, ms_scatter::IndexMode::IM, ms_scatter::OutputMode::OM, SHARDED, \
                                       ndims, shapes, &out, &why) != ms_scatter::kOk)                      \
      throw std::invalid_argument(why);                                                                    \
    return out;                                                                                            \
  }                                                                                                        \
  MSS_EXPORT int NAME##InferType(std::vector<int> types, void * /* AotExtra */) {                          \
    if (ms_scatter::OutputMode::OM == ms_scatter::OutputMode::kToken)                                      \
      return ms_scatter::int32_type_id().load(std::memory_order_relaxed);                                  \
    if (types.empty()) throw std::invalid_argument(std::string("For '") + OPNAME + "', no input types.");  \
    return types[0];                                                                                       \
  }
#define MSS_ENTRY_AND_INFER(NAME, OPNAME, OP, IM, OM, SHARDED) \
  MSS_ENTRY(NAME, OPNAME, OP, IM, OM, SHARDED)                 \
  MSS_INFER(NAME, OPNAME, IM, OM, SHARDED)
#define MSS_ENTRIES(R, OP)                                                                     \
  MSS_ENTRY_AND_INFER(Scatter##R##_token, "Scatter" #R, OP, kFirstAxis, kToken, false)         \
  MSS_ENTRY_AND_INFER(Scatter##R##_return, "Scatter" #R, OP, kFirstAxis, kReturn, false)       \
  MSS_ENTRY_AND_INFER(ScatterNd##R##_token, "ScatterNd" #R, OP, kNd, kToken, false)            \
  MSS_ENTRY_AND_INFER(ScatterNd##R##_return, "ScatterNd" #R, OP, kNd, kReturn, false)          \
  MSS_ENTRY_AND_INFER(TensorScatter##R, "TensorScatter" #R, OP, kNd, kTensor, false)           \
  MSS_ENTRY_AND_INFER(Scatter##R##_shard_token, "Scatter" #R, OP, kFirstAxis, kToken, true)    \
  MSS_ENTRY_AND_INFER(ScatterNd##R##_shard_token, "ScatterNd" #R, OP, kNd, kToken, true)       \
  MSS_ENTRY_AND_INFER(TensorScatter##R##_shard, "TensorScatter" #R, OP, kNd, kTensor, true)
MS_SCATTER_REDUCTIONS(MSS_ENTRIES)
#define MSS_SEGMENT_ENTRIES(S, OP) \
  MSS_ENTRY_AND_INFER(UnsortedSegment##S, "UnsortedSegment" #S, OP, kSegment, kTensor, false)
MS_SCATTER_SEGMENT_REDUCTIONS(MSS_SEGMENT_ENTRIES)
MSS_ENTRY_AND_INFER(ScatterNd, "ScatterNd", ::ms_scatter::OpAdd, kNd, kTensor, false)
#undef MSS_SEGMENT_ENTRIES
#undef MSS_ENTRIES
#undef MSS_ENTRY_AND_INFER
#undef MSS_INFER

MSS_EXPORT void ms_scatter_set_int32_type_id(int id) {
  ms_scatter::int32_type_id().store(id, std::memory_order_relaxed);
}
MSS_EXPORT void ms_scatter_set_int64_type_id(int id) {
  ms_scatter::int64_type_id().store(id, std::memory_order_relaxed);
}

// <entry>InferShape with a C signature, by entry name (tests call it through ctypes):
// returns the output's rank with its dimensions in out[0..cap), or -1 with the message in
// msg (-2: no such entry).
MSS_EXPORT int ms_scatter_infer_shape(const char *entry, int *ndims, int64_t **shapes, int64_t *out, int cap,
                                      char *msg, int len) {
  std::vector<int64_t> shape;
  std::string why = "no such entry";
  int rc = -2;
#define MSS_INFER_CASE(NAME, OPNAME, OP, IM, OM, SHARDED)                                                \
  if (rc == -2 && std::strcmp(entry, #NAME) == 0)                                                       \
    rc = ms_scatter::infer_output_shape(OPNAME, ms_scatter::IndexMode::IM, ms_scatter::OutputMode::OM,   \
                                        SHARDED, ndims, shapes, &shape, &why) == ms_scatter::kOk ? 0 : -1;
#define MSS_INFER_CASES(R, OP)                                                        \
  MSS_INFER_CASE(Scatter##R##_token, "Scatter" #R, OP, kFirstAxis, kToken, false)     \
  MSS_INFER_CASE(Scatter##R##_return, "Scatter" #R, OP, kFirstAxis, kReturn, false)   \
  MSS_INFER_CASE(ScatterNd##R##_token, "ScatterNd" #R, OP, kNd, kToken, false)        \
  MSS_INFER_CASE(ScatterNd##R##_return, "ScatterNd" #R, OP, kNd, kReturn, false)      \
  MSS_INFER_CASE(TensorScatter##R, "TensorScatter" #R, OP, kNd, kTensor, false)       \
  MSS_INFER_CASE(Scatter##R##_shard_token, "Scatter" #R, OP, kFirstAxis, kToken, true) \
  MSS_INFER_CASE(ScatterNd##R##_shard_token, "ScatterNd" #R, OP, kNd, kToken, true)   \
  MSS_INFER_CASE(TensorScatter##R##_shard, "TensorScatter" #R, OP, kNd, kTensor, true)
  MS_SCATTER_REDUCTIONS(MSS_INFER_CASES)
#define MSS_SEGMENT_INFER_CASES(S, OP) \
  MSS_INFER_CASE(UnsortedSegment##S, "UnsortedSegment" #S, OP, kSegment, kTensor, false)
  MS_SCATTER_SEGMENT_REDUCTIONS(MSS_SEGMENT_INFER_CASES)
  MSS_INFER_CASE(ScatterNd, "ScatterNd", ::ms_scatter::OpAdd, kNd, kTensor, false)
#undef MSS_SEGMENT_INFER_CASES
#undef MSS_INFER_CASES
#undef MSS_INFER_CASE
  if (rc != 0) {
    if (msg && len > 0) {
      std::strncpy(msg, why.c_str(), static_cast<size_t>(len) - 1);
      msg[len - 1] = '\0';
    }
    return rc;
  }
  for (size_t i = 0; i < shape.size() && static_cast<int>(i) < cap; ++i) out[i] = shape[i];
  return static_cast<int>(shape.size());
}
#undef MSS_ENTRY
#undef MSS_AOT_ARGS

// Fills names[k] / counts[k] for the first `cap` entry points (either may be null);
// returns how many entry points there are.
MSS_EXPORT int ms_scatter_call_counts(const char **names, unsigned long long *counts, int cap) {
#define MSS_NAMES(R, OP)                                                                                          \
  "Scatter" #R "_token", "Scatter" #R "_return", "ScatterNd" #R "_token", "ScatterNd" #R "_return", "TensorScatter" #R, \
      "Scatter" #R "_shard_token", "ScatterNd" #R "_shard_token", "TensorScatter" #R "_shard",
#define MSS_SEGMENT_NAMES(S, OP) "UnsortedSegment" #S,
#define MSS_MESSAGE_NAMES(NAME) #NAME,
  static const char *const kNames[] = {MS_SCATTER_REDUCTIONS(MSS_NAMES) MS_SCATTER_SEGMENT_REDUCTIONS(MSS_SEGMENT_NAMES)
                                           "ScatterNd", MS_SCATTER_MESSAGE_ENTRY_NAMES(MSS_MESSAGE_NAMES)};
#undef MSS_MESSAGE_NAMES
#undef MSS_SEGMENT_NAMES
#undef MSS_NAMES
  static_assert(sizeof kNames / sizeof kNames[0] == ms_scatter::kEntryCount, "one name per entry point");
  for (int k = 0; k < ms_scatter::kEntryCount && k < cap; ++k) {
    if (names) names[k] = kNames[k];
    if (counts) counts[k] = ms_scatter::entry_calls()[k].load(std::memory_order_relaxed);
  }
  return ms_scatter::kEntryCount;
}

MSS_EXPORT int ms_scatter_last_error(char *buf, int len, unsigned long long *count) {
  return ms_scatter::copy_last_error(buf, len, count);
}

// The message of a data error that a device reported as a status instead of a message (the
// Ascend kernels: [code, flat position, value]), in plan.h's one wording. `first_axis`: 1
// for Scatter* (index the first axis), 0 for ScatterNd*/TensorScatter*; ndims/shapes: input_x,
// indices, updates (as an aot call passes them, without the output). Returns the message's
// length, or -1 if the call is not valid (nothing is written to the error channel then).
MSS_EXPORT int ms_scatter_format_error(const char *op, int first_axis, int code, long long flat, long long value,
                                       int *ndims, int64_t **shapes, char *buf, int len) {
  if (!op || !ndims || !shapes || !buf || len <= 0) return -1;
  for (int a = 0; a < 3; ++a)
    if (!ms_scatter::valid_shape(ndims[a], shapes[a])) return -1;
  int nd[4] = {ndims[0], ndims[1], ndims[2], ndims[0]};
  int64_t *sh[4] = {shapes[0], shapes[1], shapes[2], shapes[0]};
  ms_scatter::Plan p;
  const auto mode = first_axis ? ms_scatter::IndexMode::kFirstAxis : ms_scatter::IndexMode::kNd;
  if (ms_scatter::check_plan(op, mode, nd, sh, &p) != ms_scatter::kOk) return -1;
  if (code == ms_scatter::kIndexOutOfRange && p.depth > 0 && flat >= 0 && flat < p.n * p.depth)
    ms_scatter::format_index_message(buf, static_cast<size_t>(len), p, flat, value);
  else if (code == ms_scatter::kDivisionByZero && flat >= 0 && flat < p.n * p.slice)
    ms_scatter::format_zero_message(buf, static_cast<size_t>(len), p, flat);
  else
    return -1;
  return static_cast<int>(std::strlen(buf));
}

#endif  // MS_SCATTER_ENTRIES_H_
