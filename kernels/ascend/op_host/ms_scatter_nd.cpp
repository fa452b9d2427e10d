// ms-scatter: the host side of the CANN ops MsScatterNd<R> (R = Add Sub Mul Div Max Min Update,
// from MS_SCATTER_REDUCTIONS): the op definitions (inputs x, indices, updates; outputs y,
// status), shape and dtype inference, and the tiling. The tiling is scatter_core.h's
// tiling_for_call (tested on CPU by tests/test_ascend_core.py); this file only reads shapes,
// dtypes and the platform from CANN and hands the result back. Never compiled here (no CANN
// toolkit on the project's machines): build_ascend.py builds it where one is installed.
#include <cstdint>
#include <cstring>
#include <vector>

#include "register/op_def_registry.h"
#include "tiling/platform/platform_ascendc.h"

#include "ms_scatter/dtypes.h"
#include "ms_scatter/plan.h"
#include "scatter_core.h"

namespace ms_scatter_ascend {

// UB the tiling leaves to Ascend C itself (TPipe bookkeeping, alignment).
constexpr uint64_t kUbKept = 8 * 1024;
constexpr int kMaxRank = 8;  // of any argument; ops/_ascend.py ASCEND_MAX_RANK checks it first (a ValueError)

const char *dtype_name(ge::DataType t) {
  switch (t) {
    case ge::DT_FLOAT16: return "float16";
    case ge::DT_FLOAT: return "float32";
    case ge::DT_DOUBLE: return "float64";
    case ge::DT_INT8: return "int8";
    case ge::DT_INT16: return "int16";
    case ge::DT_INT32: return "int32";
    case ge::DT_INT64: return "int64";
    case ge::DT_UINT8: return "uint8";
    default: return "unsupported";
  }
}

// The registered (x, indices) combinations: every Ascend value dtype with both index dtypes
// (the order of dtypes.h's lists).
struct Combinations {
  std::vector<ge::DataType> values, indices, status;
  Combinations() {
    const ge::DataType all[] = {ge::DT_FLOAT16, ge::DT_FLOAT, ge::DT_DOUBLE, ge::DT_INT8,
                                ge::DT_INT16, ge::DT_INT32, ge::DT_INT64, ge::DT_UINT8};
    const ge::DataType index_types[] = {ge::DT_INT32, ge::DT_INT64};
    for (ge::DataType v : all) {
      ms_scatter::ascend::DtypeInfo info;
      if (!ms_scatter::ascend::ascend_value_dtype(dtype_name(v), &info)) continue;  // float64
      for (ge::DataType i : index_types) {
        values.push_back(v);
        indices.push_back(i);
        status.push_back(ge::DT_INT64);
      }
    }
  }
};

ge::graphStatus tiling(gert::TilingContext *context, const char *op, bool is_div) {
  int ndims[3];
  int64_t dims[3][kMaxRank > ms_scatter::ascend::kMaxDepth ? kMaxRank : ms_scatter::ascend::kMaxDepth];
  int64_t *shapes[3];
  for (int a = 0; a < 3; ++a) {
    const gert::StorageShape *s = context->GetInputShape(a);
    if (s == nullptr) return ge::GRAPH_FAILED;
    const gert::Shape &shape = s->GetStorageShape();
    ndims[a] = static_cast<int>(shape.GetDimNum());
    if (ndims[a] > kMaxRank) return ge::GRAPH_FAILED;
    for (int d = 0; d < ndims[a]; ++d) dims[a][d] = shape.GetDim(d);
    shapes[a] = dims[a];
  }
  const char *x_dtype = dtype_name(context->GetInputDesc(0)->GetDataType());
  const char *index_dtype = dtype_name(context->GetInputDesc(1)->GetDataType());
  auto platform = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
  uint64_t ub = 0;
  platform.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
  const int64_t cores = static_cast<int64_t>(platform.GetCoreNumAiv());
  if (ub <= kUbKept || cores <= 0) return ge::GRAPH_FAILED;
  ms_scatter::ascend::Tiling t;
  if (ms_scatter::ascend::tiling_for_call(op, is_div, ndims, shapes, x_dtype, index_dtype, cores,
                                          static_cast<int64_t>(ub - kUbKept), 0, &t) != ms_scatter::kOk)
    return ge::GRAPH_FAILED;  // the reason is on stderr, in plan.h's wording
  gert::TilingData *raw = context->GetRawTilingData();
  if (raw == nullptr || raw->GetCapacity() < sizeof t) return ge::GRAPH_FAILED;
  std::memcpy(raw->GetData(), &t, sizeof t);
  raw->SetDataSize(sizeof t);
  context->SetBlockDim(static_cast<uint32_t>(t.cores));
  size_t *workspace = context->GetWorkspaceSizes(1);
  workspace[0] = static_cast<size_t>(platform.GetLibApiWorkSpaceSize()) + static_cast<size_t>(t.workspace_bytes);
  return ge::GRAPH_SUCCESS;
}

ge::graphStatus infer_shape(gert::InferShapeContext *context) {
  *context->GetOutputShape(0) = *context->GetInputShape(0);
  gert::Shape *status = context->GetOutputShape(1);
  status->SetDimNum(1);
  status->SetDim(0, ms_scatter::ascend::kStatusWords);
  return ge::GRAPH_SUCCESS;
}

ge::graphStatus infer_dtype(gert::InferDataTypeContext *context) {
  context->SetOutputDataType(0, context->GetInputDataType(0));
  context->SetOutputDataType(1, ge::DT_INT64);
  return ge::GRAPH_SUCCESS;
}

// Inputs, outputs, inference and tiling of one op type; every op type is the same but for
// its name, tiling function and kernel.
void define(ops::OpDef &op, gert::OpImplRegisterV2::TilingKernelFunc tiling_func) {
  static const Combinations c;
  const std::vector<ge::Format> nd(c.values.size(), ge::FORMAT_ND);
  op.Input("x").ParamType(ops::REQUIRED).DataType(c.values).Format(nd);
  op.Input("indices").ParamType(ops::REQUIRED).DataType(c.indices).Format(nd);
  op.Input("updates").ParamType(ops::REQUIRED).DataType(c.values).Format(nd);
  op.Output("y").ParamType(ops::REQUIRED).DataType(c.values).Format(nd);
  op.Output("status").ParamType(ops::REQUIRED).DataType(c.status).Format(nd);
  op.SetInferShape(infer_shape).SetInferDataType(infer_dtype);
  op.AICore().SetTiling(tiling_func);
  // Atlas A2 / A3 training chips (DataCopyPad needs them; MindSpore 2.10 trains on them)
  op.AICore().AddConfig("ascend910b");
  op.AICore().AddConfig("ascend910_93");
}

#define MSS_TILING_FUNC(R, OP)                                                  \
  ge::graphStatus tiling_##R(gert::TilingContext *context) {                    \
    return tiling(context, "MsScatterNd" #R, ms_scatter::RejectsZero<OP>::value); \
  }
MS_SCATTER_REDUCTIONS(MSS_TILING_FUNC)
#undef MSS_TILING_FUNC

}  // namespace ms_scatter_ascend

namespace ops {
#define MSS_OP_DEF(R, OP)                                                                  \
  class MsScatterNd##R : public OpDef {                                                    \
   public:                                                                                 \
    explicit MsScatterNd##R(const char *name) : OpDef(name) {                               \
      ms_scatter_ascend::define(*this, ms_scatter_ascend::tiling_##R);                     \
    }                                                                                      \
  };                                                                                       \
  OP_ADD(MsScatterNd##R);
MS_SCATTER_REDUCTIONS(MSS_OP_DEF)
#undef MSS_OP_DEF
}  // namespace ops
