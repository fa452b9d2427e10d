// ms-scatter: the 16-bit float storage types (IEEE binary16 and bfloat16) with float
// conversion (round to nearest even), usable on the host and in CUDA device code.
#ifndef MS_SCATTER_HALF_H_
#define MS_SCATTER_HALF_H_

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define MSS_HALF_HD __host__ __device__ __forceinline__
#else
#define MSS_HALF_HD inline
#endif

namespace ms_scatter {

struct half_t {
  uint16_t bits;
};

MSS_HALF_HD float half_to_float(half_t h) {
#if defined(__CUDA_ARCH__)
  __half_raw r; r.x = h.bits; return __half2float(__half(r));
#elif defined(__F16C__) && defined(__FLT16_MAX__)
  _Float16 f;  // the compiler vectorises _Float16 conversions (vcvtph2ps)
  std::memcpy(&f, &h.bits, sizeof f);
  return static_cast<float>(f);
#elif defined(__aarch64__)
  __fp16 f;  // IEEE binary16 on AArch64: fcvt, baseline ARMv8-A (GCC 12's C++ has no _Float16 there)
  std::memcpy(&f, &h.bits, sizeof f);
  return static_cast<float>(f);
#else
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  uint32_t exp = (h.bits >> 10) & 0x1fu;
  uint32_t man = h.bits & 0x3ffu;
  uint32_t f;
  if (exp == 0) {
    if (man == 0) {
      f = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((man & 0x400u) == 0) { man <<= 1; --exp; }
      man &= 0x3ffu;
      f = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 0x1f) {
    f = sign | 0x7f800000u | (man << 13);
  } else {
    f = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float out;
  std::memcpy(&out, &f, sizeof out);
  return out;
#endif
}

MSS_HALF_HD half_t float_to_half(float v) {
  half_t h;
#if defined(__CUDA_ARCH__)
  __half_raw r = __half_raw(__float2half_rn(v)); h.bits = r.x;
#elif defined(__F16C__) && defined(__FLT16_MAX__)
  const _Float16 f = static_cast<_Float16>(v);  // round to nearest even
  std::memcpy(&h.bits, &f, sizeof f);
#elif defined(__aarch64__)
  const __fp16 f = static_cast<__fp16>(v);  // fcvt, round to nearest even (FPCR's default mode)
  std::memcpy(&h.bits, &f, sizeof f);
#else
  uint32_t f;
  std::memcpy(&f, &v, sizeof f);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  const uint32_t absf = f & 0x7fffffffu;
  if (absf >= 0x7f800000u) {  // inf or nan (keep nan quiet)
    h.bits = sign | 0x7c00u | (absf > 0x7f800000u ? (0x200u | ((absf >> 13) & 0x3ffu)) : 0u);
    return h;
  }
  if (absf >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    h.bits = sign | 0x7c00u;
    return h;
  }
  if (absf < 0x38800000u) {  // below the smallest normal half: subnormal or zero
    if (absf < 0x33000000u) { h.bits = sign; return h; }  // < 2^-25 rounds to 0
    const uint32_t exp = absf >> 23;
    const uint32_t man = (absf & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14 + (113 - exp) ... into 10-bit subnormal
    uint32_t res = man >> (shift);
    const uint32_t rem = man & ((1u << shift) - 1u);
    const uint32_t half_way = 1u << (shift - 1);
    if (rem > half_way || (rem == half_way && (res & 1u))) ++res;
    h.bits = sign | static_cast<uint16_t>(res);
    return h;
  }
  uint32_t res = ((absf >> 13) - (112u << 10));
  const uint32_t rem = absf & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (res & 1u))) ++res;
  h.bits = sign | static_cast<uint16_t>(res);
#endif
  return h;
}

// bfloat16: the upper half of an IEEE binary32 (MindSpore's bfloat16), converted through
// float with round to nearest even; a NaN stays a (quiet) NaN of the same sign.
struct bf16_t {
  uint16_t bits;
};

MSS_HALF_HD float bf16_to_float(bf16_t h) {
  const uint32_t f = static_cast<uint32_t>(h.bits) << 16;
  float out;
  std::memcpy(&out, &f, sizeof out);
  return out;
}

MSS_HALF_HD bf16_t float_to_bf16(float v) {
  uint32_t f;
  std::memcpy(&f, &v, sizeof f);
  bf16_t h;
  if ((f & 0x7fffffffu) > 0x7f800000u) {
    h.bits = static_cast<uint16_t>((f >> 16) | 0x0040u);
    return h;
  }
  f += 0x7fffu + ((f >> 16) & 1u);
  h.bits = static_cast<uint16_t>(f >> 16);
  return h;
}

}  // namespace ms_scatter

#endif  // MS_SCATTER_HALF_H_
