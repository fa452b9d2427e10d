// ms-scatter test stand-in for CANN's kernel_operator.h: just the Ascend C calls that
// kernels/ascend/op_kernel/ms_scatter_kernel.h makes, implemented on host memory, so that the
// kernel layer itself compiles with g++ and runs (tests/test_ascend_kernel.py). It follows the
// documented meaning of each call as we read it (DataCopyPad moves blockLen bytes, Cast
// converts element-wise, Get/SetValue are scalar UB accesses, TPipe::InitBuffer carves the
// UB) and enforces the device's rules a host run would not notice: UB buffers inside the UB
// size, 32-byte aligned UB addresses for moves and casts, every access inside its buffer and
// every GM move inside a registered tensor, and no 32-byte block of an output written by two
// cores. It is NOT CANN: a mismatch between it and the real API is only found on an Ascend
// host (kernels/ascend/check_ascend.py).
#ifndef MS_SCATTER_TEST_ASCEND_STUB_KERNEL_OPERATOR_H_
#define MS_SCATTER_TEST_ASCEND_STUB_KERNEL_OPERATOR_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if __has_include("half.h")  // the flattened layout of a staged op project (build_ascend.py)
#include "half.h"
#else
#include "ms_scatter/half.h"
#endif

#define __aicore__
#define __global__
#define __gm__
#define GM_ADDR uint8_t *

struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(ms_scatter::float_to_half(f).bits) {}  // NOLINT: as the device type converts
  operator float() const { return ms_scatter::half_to_float(ms_scatter::half_t{bits}); }
};

enum pipe_t { PIPE_S, PIPE_V, PIPE_MTE2, PIPE_MTE3, PIPE_ALL };

namespace mss_stub {

enum class Kind { kInput, kOutput };

struct GmTensor {
  uint8_t *base;
  int64_t bytes;
  Kind kind;
  std::vector<int> owner;  // per 32-byte block: the core that wrote it, or -1
};

struct State {
  int core = 0;
  int64_t ub_bytes = 0;
  std::vector<uint8_t> ub;
  int64_t ub_used = 0;
  std::vector<GmTensor> gm;
  std::string problem;
  void fail(const std::string &what) {
    if (problem.empty()) problem = what;
  }
};

inline State &state() {
  static State s;
  return s;
}

inline GmTensor *find_gm(const uint8_t *p, int64_t bytes) {
  for (GmTensor &t : state().gm)
    if (p >= t.base && p + bytes <= t.base + t.bytes) return &t;
  return nullptr;
}

inline bool ub_aligned(const void *p) {
  const int64_t off = static_cast<const uint8_t *>(p) - state().ub.data();
  return off % 32 == 0;
}

}  // namespace mss_stub

namespace AscendC {

enum class TPosition { VECIN, VECOUT, VECCALC };
enum class RoundMode { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };

template <pipe_t P> inline void PipeBarrier() {}

inline int64_t GetBlockIdx() { return mss_stub::state().core; }
inline GM_ADDR GetUserWorkspace(GM_ADDR workspace) { return workspace; }  // no system workspace on the host

template <typename T> class LocalTensor {
 public:
  LocalTensor() = default;
  LocalTensor(T *p, int64_t count) : p_(p), count_(count) {}
  T GetValue(int64_t i) const {
    check(i);
    return i >= 0 && i < count_ ? p_[i] : T();
  }
  void SetValue(int64_t i, T v) const {
    check(i);
    if (i >= 0 && i < count_) p_[i] = v;
  }
  LocalTensor operator[](int64_t off) const {
    if (off < 0 || off > count_) mss_stub::state().fail("LocalTensor offset outside its buffer");
    return LocalTensor(p_ + off, count_ - off);
  }
  template <typename U> LocalTensor<U> ReinterpretCast() const {
    return LocalTensor<U>(reinterpret_cast<U *>(p_), count_ * static_cast<int64_t>(sizeof(T)) /
                                                          static_cast<int64_t>(sizeof(U)));
  }
  T *addr() const { return p_; }
  int64_t count() const { return count_; }

 private:
  void check(int64_t i) const {
    if (i < 0 || i >= count_) mss_stub::state().fail("scalar UB access outside its buffer");
  }
  T *p_ = nullptr;
  int64_t count_ = 0;
};

template <typename T> class GlobalTensor {
 public:
  void SetGlobalBuffer(__gm__ T *p) { p_ = p; }
  GlobalTensor operator[](int64_t off) const {
    GlobalTensor g;
    g.p_ = p_ + off;
    return g;
  }
  T *addr() const { return p_; }

 private:
  T *p_ = nullptr;
};

template <TPosition P> class TBuf {
 public:
  template <typename T> LocalTensor<T> Get() const {
    return LocalTensor<T>(reinterpret_cast<T *>(p_), bytes_ / static_cast<int64_t>(sizeof(T)));
  }
  uint8_t *p_ = nullptr;
  int64_t bytes_ = 0;
};

class TPipe {
 public:
  TPipe() { mss_stub::state().ub_used = 0; }
  template <TPosition P> void InitBuffer(TBuf<P> &buf, uint32_t bytes) {
    mss_stub::State &s = mss_stub::state();
    if (bytes % 32 != 0) s.fail("InitBuffer size not a whole number of 32-byte blocks");
    if (s.ub_used + bytes > s.ub_bytes) {
      s.fail("UB buffers exceed the UB (" + std::to_string(s.ub_used + bytes) + " > " + std::to_string(s.ub_bytes) +
             " bytes)");
      bytes = 0;
    }
    buf.p_ = s.ub.data() + s.ub_used;
    buf.bytes_ = bytes;
    s.ub_used += bytes;
  }
};

struct DataCopyExtParams {
  uint16_t blockCount;
  uint32_t blockLen;  // bytes
  uint32_t srcStride;
  uint32_t dstStride;
  uint32_t rsv;
};

template <typename T> struct DataCopyPadExtParams {
  bool isPad;
  uint8_t leftPadding;
  uint8_t rightPadding;
  T paddingValue;
};

template <typename T>
void DataCopyPad(const LocalTensor<T> &dst, const GlobalTensor<T> &src, const DataCopyExtParams &p,
                 const DataCopyPadExtParams<T> &) {
  mss_stub::State &s = mss_stub::state();
  const int64_t bytes = static_cast<int64_t>(p.blockCount) * p.blockLen;
  if (p.blockCount != 1 || p.srcStride || p.dstStride) s.fail("DataCopyPad: only one contiguous block is emulated");
  if (!mss_stub::ub_aligned(dst.addr())) s.fail("DataCopyPad GM->UB: UB address not 32-byte aligned");
  if (bytes > dst.count() * static_cast<int64_t>(sizeof(T))) s.fail("DataCopyPad GM->UB overflows the UB buffer");
  const uint8_t *from = reinterpret_cast<const uint8_t *>(src.addr());
  if (!mss_stub::find_gm(from, bytes)) s.fail("DataCopyPad GM->UB reads outside every GM tensor");
  if (s.problem.empty()) std::memcpy(dst.addr(), from, static_cast<size_t>(bytes));
}

template <typename T>
void DataCopyPad(const GlobalTensor<T> &dst, const LocalTensor<T> &src, const DataCopyExtParams &p) {
  mss_stub::State &s = mss_stub::state();
  const int64_t bytes = static_cast<int64_t>(p.blockCount) * p.blockLen;
  if (p.blockCount != 1 || p.srcStride || p.dstStride) s.fail("DataCopyPad: only one contiguous block is emulated");
  if (!mss_stub::ub_aligned(src.addr())) s.fail("DataCopyPad UB->GM: UB address not 32-byte aligned");
  if (bytes > src.count() * static_cast<int64_t>(sizeof(T))) s.fail("DataCopyPad UB->GM reads past the UB buffer");
  uint8_t *to = reinterpret_cast<uint8_t *>(dst.addr());
  mss_stub::GmTensor *g = mss_stub::find_gm(to, bytes);
  if (!g) {
    s.fail("DataCopyPad UB->GM writes outside every GM tensor");
    return;
  }
  if (g->kind != mss_stub::Kind::kOutput) s.fail("DataCopyPad UB->GM writes an input");
  const int64_t first = (to - g->base) / 32, last = (to - g->base + bytes - 1) / 32;
  for (int64_t b = first; bytes > 0 && b <= last; ++b) {
    int &o = g->owner[static_cast<size_t>(b)];
    if (o < 0) o = s.core;
    if (o != s.core) s.fail("two cores write one 32-byte block of an output");
  }
  if (s.problem.empty()) std::memcpy(to, src.addr(), static_cast<size_t>(bytes));
}

// Element-wise conversion; float -> half rounds to nearest even (CAST_RINT), half -> float is
// exact (CAST_NONE). Other modes are not used by the kernel and fail here.
template <typename D, typename S>
void Cast(const LocalTensor<D> &dst, const LocalTensor<S> &src, const RoundMode &mode, uint32_t count) {
  mss_stub::State &s = mss_stub::state();
  if (!mss_stub::ub_aligned(dst.addr()) || !mss_stub::ub_aligned(src.addr())) s.fail("Cast: UB address not aligned");
  if (count > dst.count() || count > src.count()) s.fail("Cast outside its buffers");
  if (mode != RoundMode::CAST_NONE && mode != RoundMode::CAST_RINT) s.fail("Cast: rounding mode not emulated");
  if (!s.problem.empty()) return;
  for (uint32_t i = 0; i < count; ++i) dst.addr()[i] = static_cast<D>(static_cast<float>(src.addr()[i]));
}

}  // namespace AscendC

#endif  // MS_SCATTER_TEST_ASCEND_STUB_KERNEL_OPERATOR_H_
