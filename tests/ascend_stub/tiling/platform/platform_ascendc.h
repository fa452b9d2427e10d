// ms-scatter test stand-in for CANN's tiling/platform/platform_ascendc.h (see register/op_def_registry.h).
#ifndef MS_SCATTER_TEST_ASCEND_STUB_PLATFORM_ASCENDC_H_
#define MS_SCATTER_TEST_ASCEND_STUB_PLATFORM_ASCENDC_H_

#include <cstdint>

#include "register/op_def_registry.h"

namespace platform_ascendc {
enum class CoreMemType { L0_A, L0_B, L0_C, L1, L2, UB, HBM };
class PlatformAscendC {
 public:
  explicit PlatformAscendC(fe::PlatFormInfos *p) : p_(p) {}
  void GetCoreMemSize(CoreMemType t, uint64_t &size) const { size = t == CoreMemType::UB ? p_->ub_bytes : 0; }
  uint32_t GetCoreNumAiv() const { return p_->aiv_cores; }
  uint32_t GetLibApiWorkSpaceSize() const { return p_->lib_workspace; }

 private:
  fe::PlatFormInfos *p_;
};
}  // namespace platform_ascendc

#endif  // MS_SCATTER_TEST_ASCEND_STUB_PLATFORM_ASCENDC_H_
