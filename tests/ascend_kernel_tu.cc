// ms-scatter: the Ascend C kernel layer (kernels/ascend/op_kernel/ms_scatter_kernel.h) compiled
// as device code (__CCE_AICORE__ defined, so reducer.h and scatter_core.h take their AI core
// branches) against the host stand-ins of tests/ascend_stub/kernel_operator.h, for
// tests/test_ascend_kernel.py. Linked with tests/ascend_core_driver.cc, which runs the host
// tiling and launches the cores (mss_ascend_kernel_run).
#include "kernel_operator.h"  // the stand-in

#include <cstring>

#include "ms_scatter/dtypes.h"

// One kernel entry exactly as build_ascend.py generates it, for one registered dtype pair.
#define DTYPE_X float
#define DTYPE_INDICES int32_t
#include "ms_scatter_kernel.h"
MSS_ASCEND_KERNEL(ms_scatter_nd_add, ::ms_scatter::OpAdd)

namespace {
template <typename T> struct Dev { using type = T; };
template <> struct Dev<ms_scatter::half_t> { using type = half; };  // the AI core's half
}  // namespace

#define MSS_EXPORT extern "C" __attribute__((visibility("default")))

MSS_EXPORT void mss_stub_reset(int64_t ub_bytes) {
  mss_stub::State &s = mss_stub::state();
  s.ub_bytes = ub_bytes;
  s.ub.assign(static_cast<size_t>(ub_bytes), 0xA5);
  s.ub_used = 0;
  s.gm.clear();
  s.problem.clear();
  s.core = 0;
}

MSS_EXPORT void mss_stub_register(void *base, int64_t bytes, int is_output) {
  mss_stub::state().gm.push_back(mss_stub::GmTensor{static_cast<uint8_t *>(base), bytes,
                                                    is_output ? mss_stub::Kind::kOutput : mss_stub::Kind::kInput,
                                                    std::vector<int>(static_cast<size_t>(bytes / 32 + 1), -1)});
}

MSS_EXPORT void mss_stub_set_core(int core) {
  mss_stub::State &s = mss_stub::state();
  s.core = core;
  std::memset(s.ub.data(), 0xA5, s.ub.size());  // a core finds garbage in its UB, never another core's data
}

MSS_EXPORT int mss_stub_problem(char *buf, int len) {
  const std::string &p = mss_stub::state().problem;
  if (buf && len > 0) {
    std::strncpy(buf, p.c_str(), static_cast<size_t>(len) - 1);
    buf[len - 1] = '\0';
  }
  return static_cast<int>(p.size());
}

// Runs the current core's share of the kernel of (reduction, dtype, index dtype); 1 if there
// is no such kernel. (Add/float32/int32 goes through the generated entry point.)
MSS_EXPORT int mss_kernel_launch(const char *reduction, const char *dtype, const char *index_dtype, GM_ADDR x,
                                 GM_ADDR indices, GM_ADDR updates, GM_ADDR y, GM_ADDR status, GM_ADDR workspace,
                                 GM_ADDR tiling) {
  if (!std::strcmp(reduction, "Add") && !std::strcmp(dtype, "float32") && !std::strcmp(index_dtype, "int32")) {
    ms_scatter_nd_add(x, indices, updates, y, status, workspace, tiling);
    return 0;
  }
#define MSS_INDEX_CASE(IN, IT)                                                                               \
  if (!std::strcmp(index_dtype, #IN)) {                                                                      \
    ms_scatter::ascend::run_kernel<OP, typename Dev<VT>::type, IT>(x, indices, updates, y, status, workspace, \
                                                                   tiling);                                  \
    return 0;                                                                                                \
  }
#define MSS_VALUE_CASE(VN, VT_)                                           \
  if (!std::strcmp(dtype, #VN)) {                                          \
    using VT = VT_;                                                       \
    MS_SCATTER_INDEX_DTYPES(MSS_INDEX_CASE)                               \
  }
#define MSS_REDUCTION_CASE(R, OP_)         \
  if (!std::strcmp(reduction, #R)) {       \
    using OP = OP_;                        \
    MS_SCATTER_ASCEND_VALUE_DTYPES(MSS_VALUE_CASE) \
  }
  MS_SCATTER_REDUCTIONS(MSS_REDUCTION_CASE)
#undef MSS_REDUCTION_CASE
#undef MSS_VALUE_CASE
#undef MSS_INDEX_CASE
  return 1;
}
