// ms-scatter test stand-in for CANN's register/op_def_registry.h (and the gert/ge types it
// brings): only what kernels/ascend/op_host/ms_scatter_nd.cpp uses, so that the op_host source
// compiles with g++ and its tiling and inference run on the host (tests/test_ascend_build.py).
// Signatures as we read CANN's documentation; NOT CANN: a mismatch shows only on an Ascend
// host (kernels/ascend/check_ascend.py builds the real thing).
#ifndef MS_SCATTER_TEST_ASCEND_STUB_OP_DEF_REGISTRY_H_
#define MS_SCATTER_TEST_ASCEND_STUB_OP_DEF_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ge {
enum DataType { DT_FLOAT = 0, DT_FLOAT16 = 1, DT_INT8 = 2, DT_INT32 = 3, DT_UINT8 = 4, DT_INT16 = 6, DT_INT64 = 9,
                DT_DOUBLE = 11, DT_BOOL = 12 };
enum Format { FORMAT_ND = 2 };
using graphStatus = uint32_t;
constexpr graphStatus GRAPH_SUCCESS = 0;
constexpr graphStatus GRAPH_FAILED = 0xFFFFFFFF;
}  // namespace ge

namespace fe {
struct PlatFormInfos {
  uint64_t ub_bytes = 192 * 1024;
  uint32_t aiv_cores = 40;
  uint32_t lib_workspace = 16 * 1024 * 1024;
};
}  // namespace fe

namespace gert {
class Shape {
 public:
  size_t GetDimNum() const { return dims_.size(); }
  int64_t GetDim(size_t i) const { return dims_[i]; }
  void SetDimNum(size_t n) { dims_.resize(n); }
  void SetDim(size_t i, int64_t v) { dims_[i] = v; }
  std::vector<int64_t> dims_;
};
struct StorageShape {
  Shape shape;
  const Shape &GetStorageShape() const { return shape; }
};
struct CompileTimeTensorDesc {
  ge::DataType type;
  ge::DataType GetDataType() const { return type; }
};
class TilingData {
 public:
  explicit TilingData(size_t capacity) : data_(capacity) {}
  void *GetData() { return data_.data(); }
  size_t GetCapacity() const { return data_.size(); }
  void SetDataSize(size_t n) { size_ = n; }
  std::vector<uint8_t> data_;
  size_t size_ = 0;
};
struct TilingContext {
  std::vector<StorageShape> inputs;
  std::vector<CompileTimeTensorDesc> descs;
  fe::PlatFormInfos platform;
  TilingData raw{4096};
  uint32_t block_dim = 0;
  std::vector<size_t> workspace;
  const StorageShape *GetInputShape(int i) const { return i < static_cast<int>(inputs.size()) ? &inputs[i] : nullptr; }
  const CompileTimeTensorDesc *GetInputDesc(int i) const { return &descs[i]; }
  fe::PlatFormInfos *GetPlatformInfo() { return &platform; }
  TilingData *GetRawTilingData() { return &raw; }
  void SetBlockDim(uint32_t n) { block_dim = n; }
  size_t *GetWorkspaceSizes(size_t n) {
    workspace.assign(n, 0);
    return workspace.data();
  }
};
struct InferShapeContext {
  std::vector<Shape> in, out;
  const Shape *GetInputShape(int i) const { return &in[i]; }
  Shape *GetOutputShape(int i) { return &out[i]; }
};
struct InferDataTypeContext {
  std::vector<ge::DataType> in, out;
  ge::DataType GetInputDataType(int i) const { return in[i]; }
  void SetOutputDataType(int i, ge::DataType t) { out[i] = t; }
};
struct OpImplRegisterV2 {
  using TilingKernelFunc = ge::graphStatus (*)(TilingContext *);
};
}  // namespace gert

namespace ops {
enum Option { REQUIRED, OPTIONAL, DYNAMIC };
class OpParamDef {
 public:
  explicit OpParamDef(const char *n) : name(n) {}
  OpParamDef &ParamType(Option o) { option = o; return *this; }
  OpParamDef &DataType(std::vector<ge::DataType> t) { types = std::move(t); return *this; }
  OpParamDef &Format(std::vector<ge::Format> f) { formats = std::move(f); return *this; }
  std::string name;
  Option option = OPTIONAL;
  std::vector<ge::DataType> types;
  std::vector<ge::Format> formats;
};
class OpAICoreDef {
 public:
  OpAICoreDef &SetTiling(gert::OpImplRegisterV2::TilingKernelFunc f) { tiling = f; return *this; }
  OpAICoreDef &AddConfig(const char *soc) { socs.push_back(soc); return *this; }
  gert::OpImplRegisterV2::TilingKernelFunc tiling = nullptr;
  std::vector<std::string> socs;
};
class OpDef {
 public:
  explicit OpDef(const char *n) : name(n) {}
  virtual ~OpDef() = default;
  OpParamDef &Input(const char *n) { inputs.emplace_back(n); return inputs.back(); }
  OpParamDef &Output(const char *n) { outputs.emplace_back(n); return outputs.back(); }
  OpDef &SetInferShape(ge::graphStatus (*f)(gert::InferShapeContext *)) { infer_shape = f; return *this; }
  OpDef &SetInferDataType(ge::graphStatus (*f)(gert::InferDataTypeContext *)) { infer_dtype = f; return *this; }
  OpAICoreDef &AICore() { return aicore; }
  std::string name;
  std::vector<OpParamDef> inputs, outputs;
  ge::graphStatus (*infer_shape)(gert::InferShapeContext *) = nullptr;
  ge::graphStatus (*infer_dtype)(gert::InferDataTypeContext *) = nullptr;
  OpAICoreDef aicore;
};
inline std::vector<std::function<OpDef *()>> &registry() {
  static std::vector<std::function<OpDef *()>> r;
  return r;
}
struct Registrar {
  explicit Registrar(std::function<OpDef *()> f) { registry().push_back(std::move(f)); }
};
}  // namespace ops

#define OP_ADD(NAME) static ::ops::Registrar g_register_##NAME([] { return new NAME(#NAME); })

#endif  // MS_SCATTER_TEST_ASCEND_STUB_OP_DEF_REGISTRY_H_
