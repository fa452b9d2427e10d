// ms-scatter: runs kernels/ascend/op_host/ms_scatter_nd.cpp (staged and flattened by
// build_ascend.py) on the host against the stand-in CANN headers of tests/ascend_stub/, for
// tests/test_ascend_build.py. Prints what it registers, and the tiling and inference of one
// call given on the command line:  harness x_shape indices_shape dtype index_dtype cores ub
// (shapes as comma lists, "" for a 0-d shape).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "register/op_def_registry.h"

namespace {
std::vector<int64_t> parse(const char *s) {
  std::vector<int64_t> v;
  for (const char *p = s; *p;) {
    v.push_back(std::strtoll(p, nullptr, 10));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return v;
}
ge::DataType type_of(const std::string &n) {
  if (n == "float16") return ge::DT_FLOAT16;
  if (n == "float32") return ge::DT_FLOAT;
  if (n == "float64") return ge::DT_DOUBLE;
  if (n == "int8") return ge::DT_INT8;
  if (n == "int16") return ge::DT_INT16;
  if (n == "int32") return ge::DT_INT32;
  if (n == "int64") return ge::DT_INT64;
  return ge::DT_UINT8;
}
}  // namespace

int main(int argc, char **argv) {
  if (argc != 8) return 2;
  const std::string op_wanted = argv[1];
  for (auto &make : ops::registry()) {
    std::unique_ptr<ops::OpDef> op(make());
    std::printf("op %s", op->name.c_str());
    for (auto &p : op->inputs) std::printf(" in:%s:%zu:%d", p.name.c_str(), p.types.size(), p.option == ops::REQUIRED);
    for (auto &p : op->outputs) std::printf(" out:%s:%zu:%d", p.name.c_str(), p.types.size(), p.option == ops::REQUIRED);
    for (auto &s : op->aicore.socs) std::printf(" soc:%s", s.c_str());
    std::printf(" combos:");
    for (size_t i = 0; i < op->inputs[0].types.size(); ++i)
      std::printf("%d/%d/%d/%d/%d,", op->inputs[0].types[i], op->inputs[1].types[i], op->inputs[2].types[i],
                  op->outputs[0].types[i], op->outputs[1].types[i]);
    std::printf("\n");
    if (op->name != op_wanted) continue;
    gert::TilingContext ctx;
    const std::vector<int64_t> x = parse(argv[2]), idx = parse(argv[3]);
    std::vector<int64_t> upd(idx.begin(), idx.end() - 1);
    for (size_t d = static_cast<size_t>(idx.back()); d < x.size(); ++d) upd.push_back(x[d]);
    for (const std::vector<int64_t> *dims : {&x, &idx, static_cast<const std::vector<int64_t> *>(&upd)}) {
      gert::StorageShape s;
      s.shape.dims_ = *dims;
      ctx.inputs.push_back(s);
    }
    ctx.descs = {{type_of(argv[4])}, {type_of(argv[5])}, {type_of(argv[4])}};
    ctx.platform.aiv_cores = static_cast<uint32_t>(std::atoi(argv[6]));
    ctx.platform.ub_bytes = static_cast<uint64_t>(std::atoll(argv[7]));
    const ge::graphStatus rc = op->aicore.tiling(&ctx);
    std::printf("tiling %u block_dim %u workspace %zu words", rc, ctx.block_dim,
                ctx.workspace.empty() ? size_t(0) : ctx.workspace[0]);
    for (size_t i = 0; i + 8 <= ctx.raw.size_; i += 8) {
      int64_t w;
      std::memcpy(&w, ctx.raw.data_.data() + i, 8);
      std::printf(" %lld", static_cast<long long>(w));
    }
    std::printf("\n");
    gert::InferShapeContext is;
    is.in = {ctx.inputs[0].shape, ctx.inputs[1].shape, ctx.inputs[2].shape};
    is.out.resize(2);
    op->infer_shape(&is);
    gert::InferDataTypeContext it;
    it.in = {ctx.descs[0].type, ctx.descs[1].type, ctx.descs[2].type};
    it.out.resize(2);
    op->infer_dtype(&it);
    std::printf("infer y:");
    for (int64_t d : is.out[0].dims_) std::printf("%lld,", static_cast<long long>(d));
    std::printf(" status:");
    for (int64_t d : is.out[1].dims_) std::printf("%lld,", static_cast<long long>(d));
    std::printf(" types %d %d\n", it.out[0], it.out[1]);
  }
  return 0;
}
