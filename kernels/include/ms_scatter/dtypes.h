// ms-scatter: the one list of value dtypes, index dtypes, reductions and index modes.
// Every instantiation (CPU and GPU) and every exported entry point comes from these
// X-macros; nothing is written out per dtype or per operator.
#ifndef MS_SCATTER_DTYPES_H_
#define MS_SCATTER_DTYPES_H_

#include <cstdint>

#include "ms_scatter/half.h"

namespace ms_scatter {
// A 16-byte element that is only ever copied (complex128 under Update).
struct bits128_t {
  uint64_t lo, hi;
};
}  // namespace ms_scatter

// X(MindSpore dtype name, C++ storage type)
#define MS_SCATTER_VALUE_DTYPES(X)  \
  X(float16, ::ms_scatter::half_t)  \
  X(float32, float)                 \
  X(float64, double)                \
  X(bfloat16, ::ms_scatter::bf16_t) \
  X(int8, int8_t)                   \
  X(int16, int16_t)                 \
  X(int32, int32_t)                 \
  X(int64, int64_t)                 \
  X(uint8, uint8_t)                 \
  X(uint16, uint16_t)               \
  X(uint32, uint32_t)               \
  X(uint64, uint64_t)

// Update only (it does no arithmetic): bool and the complex types, each a bit copy of an
// unsigned word of its width (complex128: two 64-bit words). MindSpore's own Update ops
// take them, and its Tensor index assignment (mask[i] = True) is TensorScatterUpdate.
#define MS_SCATTER_COPY_DTYPES(X) \
  X(bool, uint8_t)                \
  X(complex64, uint64_t)          \
  X(complex128, ::ms_scatter::bits128_t)

// The subset the Ascend C kernels are registered for (kernels/ascend/op_host): the AI core
// has no double arithmetic, and bfloat16 and the wide unsigned types are not registered.
#define MS_SCATTER_ASCEND_VALUE_DTYPES(X) \
  X(float16, ::ms_scatter::half_t)        \
  X(float32, float)                       \
  X(int8, int8_t)                         \
  X(int16, int16_t)                       \
  X(int32, int32_t)                       \
  X(int64, int64_t)                       \
  X(uint8, uint8_t)

#define MS_SCATTER_INDEX_DTYPES(X) \
  X(int32, int32_t)                \
  X(int64, int64_t)

// X(operator suffix, reduction tag)
#define MS_SCATTER_REDUCTIONS(X) \
  X(Add, ::ms_scatter::OpAdd)    \
  X(Sub, ::ms_scatter::OpSub)    \
  X(Mul, ::ms_scatter::OpMul)    \
  X(Div, ::ms_scatter::OpDiv)    \
  X(Max, ::ms_scatter::OpMax)    \
  X(Min, ::ms_scatter::OpMin)    \
  X(Update, ::ms_scatter::OpUpdate)

// The segment operators on the engine: X(MindSpore's suffix, reduction tag). UnsortedSegment<S>
// is an out-of-place first-axis scatter of input_x's rows into a tensor of num_segments rows
// filled with the reduction's identity, negative segment ids dropped (IndexMode::kSegment).
#define MS_SCATTER_SEGMENT_REDUCTIONS(X) \
  X(Sum, ::ms_scatter::OpAdd)            \
  X(Prod, ::ms_scatter::OpMul)           \
  X(Max, ::ms_scatter::OpMax)            \
  X(Min, ::ms_scatter::OpMin)

#endif  // MS_SCATTER_DTYPES_H_
