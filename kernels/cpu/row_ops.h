// ms-scatter CPU: the row loops of the engine (one update slice at a time), with the
// 16-bit floats converted in registers as rows are loaded and stored.
//
// Every loop here computes exactly what reducer.h's scalar rule computes, lane by lane
// (the same IEEE operation on the same operands), so results are bit-identical at every
// build level. AVX-512 (x86-64-v4): the 16-bit floats widened and rounded 16 lanes at a
// time in registers, fused with the update. Elsewhere (x86-64-v2/v3, aarch64): the scalar
// loops, which the compiler vectorises, with F16C / NEON float16 conversions where the
// build has them. Rows of the storage type's own arithmetic (float32, float64, integers)
// take the scalar loop at every level: the compiler's vector loop is as fast.
#ifndef MS_SCATTER_CPU_ROW_OPS_H_
#define MS_SCATTER_CPU_ROW_OPS_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ms_scatter/reducer.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__)
#define MSS_ROWS_AVX512 1
#else
#define MSS_ROWS_AVX512 0
#endif
#if MSS_ROWS_AVX512 || (defined(__F16C__) && defined(__AVX__))
// GCC 12's AVX-512 intrinsics start some results from a self-initialised "undefined"
// vector, which -Wmaybe-uninitialized reports wherever they are inlined.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif
#if defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#endif

#if defined(__GNUC__)
#define MSS_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define MSS_ALWAYS_INLINE inline
#endif

namespace ms_scatter {
namespace rows {

template <typename T> using Acc = typename AccOf<T>::type;
template <typename T> constexpr bool kHalf = !std::is_same<Acc<T>, T>::value;

// ------------------------------------------------------------------ scalar forms

template <typename T, typename Op>
MSS_ALWAYS_INLINE void direct_scalar(T *__restrict d, const T *__restrict u, int64_t n) {
  for (int64_t j = 0; j < n; ++j) d[j] = Reducer<T, Op>::update(d[j], u[j]);
}

// Storage <-> accumulator conversion of n elements.
template <typename T>
inline void widen_scalar(const T *__restrict src, Acc<T> *__restrict dst, int64_t n) {
  int64_t j = 0;
#if defined(__F16C__) && defined(__AVX__)
  if constexpr (std::is_same<T, half_t>::value) {
    for (; j + 8 <= n; j += 8)
      _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + j))));
  }
#elif defined(__aarch64__) && defined(__ARM_NEON)
  if constexpr (std::is_same<T, half_t>::value) {
    for (; j + 4 <= n; j += 4) {
      uint16x4_t h;
      std::memcpy(&h, src + j, sizeof h);
      vst1q_f32(dst + j, vcvt_f32_f16(vreinterpret_f16_u16(h)));
    }
  }
#endif
  for (; j < n; ++j) dst[j] = to_acc<T>(src[j]);
}
template <typename T>
inline void narrow_scalar(const Acc<T> *__restrict src, T *__restrict dst, int64_t n) {
  int64_t j = 0;
#if defined(__F16C__) && defined(__AVX__)
  if constexpr (std::is_same<T, half_t>::value) {
    for (; j + 8 <= n; j += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i *>(dst + j),
                       _mm256_cvtps_ph(_mm256_loadu_ps(src + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
#elif defined(__aarch64__) && defined(__ARM_NEON)
  if constexpr (std::is_same<T, half_t>::value) {
    for (; j + 4 <= n; j += 4) {  // fcvtn: 4 lanes, rounding to nearest even
      const uint16x4_t h = vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + j)));
      std::memcpy(dst + j, &h, sizeof h);
    }
  }
#endif
  for (; j < n; ++j) dst[j] = from_acc<T>(src[j]);
}

#if MSS_ROWS_AVX512
// ------------------------------------------------------------------ AVX-512

// The reductions on 16 floats: reducer.h's rule per lane. Max/Min: acc where
// acc >= v (<= v) or acc is NaN, else v (a NaN update propagates).
template <typename Op> struct Lanes { static constexpr bool kHas = false; };
#define MSS_LANES(OP, PS)                                                \
  template <> struct Lanes<OP> {                                         \
    static constexpr bool kHas = true;                                   \
    static MSS_ALWAYS_INLINE __m512 f(__m512 a, __m512 b) { return PS; } \
  };
MSS_LANES(OpAdd, _mm512_add_ps(a, b))
MSS_LANES(OpSub, _mm512_sub_ps(a, b))
MSS_LANES(OpMul, _mm512_mul_ps(a, b))
MSS_LANES(OpDiv, _mm512_div_ps(a, b))
MSS_LANES(OpMax, _mm512_mask_blend_ps(static_cast<__mmask16>(_mm512_cmp_ps_mask(a, b, _CMP_GE_OQ) |
                                                             _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)), b, a))
MSS_LANES(OpMin, _mm512_mask_blend_ps(static_cast<__mmask16>(_mm512_cmp_ps_mask(a, b, _CMP_LE_OQ) |
                                                             _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)), b, a))
MSS_LANES(OpUpdate, b)
#undef MSS_LANES

// The 16-bit floats: 16 of them <-> 16 floats.
template <typename S> __m512 widen16(__m256i h);
template <> MSS_ALWAYS_INLINE __m512 widen16<half_t>(__m256i h) { return _mm512_cvtph_ps(h); }
template <> MSS_ALWAYS_INLINE __m512 widen16<bf16_t>(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
template <typename S> __m256i narrow16(__m512 f);
template <> MSS_ALWAYS_INLINE __m256i narrow16<half_t>(__m512 f) {
  return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
template <> MSS_ALWAYS_INLINE __m256i narrow16<bf16_t>(__m512 f) {
  // float_to_bf16 per lane: round to nearest even on the bits; a NaN keeps its upper bits, made quiet
  const __m512i b = _mm512_castps_si512(f);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i q = _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, q));
}
// The bits of 1.0: what masked-off update lanes hold (no lane then divides by zero).
template <typename S> constexpr short kOneBits = 0;
template <> constexpr short kOneBits<half_t> = 0x3c00;
template <> constexpr short kOneBits<bf16_t> = 0x3f80;

// 16 16-bit values (n < 16: the first n, the other lanes 1.0).
template <typename S>
MSS_ALWAYS_INLINE __m256i load16(const S *p, int64_t n) {
  if (n >= 16) return _mm256_loadu_si256(reinterpret_cast<const __m256i *>(p));
  return _mm256_mask_loadu_epi16(_mm256_set1_epi16(kOneBits<S>), static_cast<__mmask16>((1u << n) - 1), p);
}
MSS_ALWAYS_INLINE void store16(void *p, __m256i v, int64_t n) {
  if (n >= 16) _mm256_storeu_si256(reinterpret_cast<__m256i *>(p), v);
  else _mm256_mask_storeu_epi16(p, static_cast<__mmask16>((1u << n) - 1), v);
}
MSS_ALWAYS_INLINE __m512 loadf(const float *p, int64_t n) {
  return n >= 16 ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
MSS_ALWAYS_INLINE void storef(float *p, __m512 v, int64_t n) {
  if (n >= 16) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
}
#endif  // MSS_ROWS_AVX512

// ------------------------------------------------------------------ the row loops
// (AVX-512: 16 lanes at a time, unaligned loads and stores, the last lanes masked. Walking
// input_x's rows by aligned 64-byte lines with masked first and last lines, so that a row
// 16 bytes into a line costs no split access, measured slower on the 2-core Zen 4 machine:
// float32 medium 0.119 -> 0.139 ms aligned, 0.142 -> 0.159 ms 16 bytes off; the extra cost
// of such rows is their fifth cache line, not the split accesses.)

// d[j] = update(d[j], u[j]), j < n: the storage type's own arithmetic, or for a 16-bit
// float one step rounded once (widen both, update in float, round).
template <typename T, typename Op>
MSS_ALWAYS_INLINE void direct(T *__restrict d, const T *__restrict u, int64_t n) {
#if MSS_ROWS_AVX512
  if constexpr (kHalf<T> && Lanes<Op>::kHas) {
    for (int64_t j = 0; j < n; j += 16) {
      const int64_t c = n - j;
      const __m512 r = Lanes<Op>::f(widen16<T>(load16(d + j, c)), widen16<T>(load16(u + j, c)));
      store16(d + j, narrow16<T>(r), c);
    }
    return;
  }
#endif
  if constexpr (kHalf<T>) {
    for (int64_t j = 0; j < n; ++j)
      d[j] = Reducer<T, Op>::store(Reducer<T, Op>::update(to_acc<T>(d[j]), to_acc<T>(u[j])));
  } else {
    direct_scalar<T, Op>(d, u, n);
  }
}

// a[j] = update(a[j], u[j] widened), j < n: an update row into float accumulators.
template <typename T, typename Op>
MSS_ALWAYS_INLINE void accumulate(Acc<T> *__restrict a, const T *__restrict u, int64_t n) {
  using A = Acc<T>;
#if MSS_ROWS_AVX512
  if constexpr (kHalf<T> && Lanes<Op>::kHas) {
    for (int64_t j = 0; j < n; j += 16) {
      const int64_t c = n - j;
      storef(a + j, Lanes<Op>::f(loadf(a + j, c), widen16<T>(load16(u + j, c))), c);
    }
    return;
  }
#endif
  if constexpr (kHalf<T>) {
    constexpr int64_t kChunk = 64;  // widened a chunk at a time (F16C / NEON where the build has them)
    A val[kChunk];
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t c = n - j0 < kChunk ? n - j0 : kChunk;
      widen_scalar<T>(u + j0, val, c);
      for (int64_t j = 0; j < c; ++j) a[j0 + j] = Reducer<T, Op>::update(a[j0 + j], val[j]);
    }
  } else {
    direct_scalar<T, Op>(a, u, n);
  }
}

// a[j] = d[j] widened (a row of input_x into float accumulators).
template <typename T>
MSS_ALWAYS_INLINE void widen_row(const T *__restrict d, Acc<T> *__restrict a, int64_t n) {
#if MSS_ROWS_AVX512
  if constexpr (kHalf<T>) {
    for (int64_t j = 0; j < n; j += 16) storef(a + j, widen16<T>(load16(d + j, n - j)), n - j);
    return;
  }
#endif
  widen_scalar<T>(d, a, n);
}

// d[j] = a[j] rounded once (float accumulators back into a row of input_x).
template <typename T>
MSS_ALWAYS_INLINE void narrow_row(const Acc<T> *__restrict a, T *__restrict d, int64_t n) {
#if MSS_ROWS_AVX512
  if constexpr (kHalf<T>) {
    for (int64_t j = 0; j < n; j += 16) store16(d + j, narrow16<T>(loadf(a + j, n - j)), n - j);
    return;
  }
#endif
  narrow_scalar<T>(a, d, n);
}

#if MSS_ROWS_AVX512
// run_into's register block: V vectors of 16 lanes of d, from lane j on (n lanes left).
template <int V, typename T, typename Op, typename At>
MSS_ALWAYS_INLINE void run_block(T *__restrict d, const T *__restrict upd, At at, int64_t q0, int64_t c, int64_t slice,
                                 int64_t j, int64_t n) {
  __m512 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = 16 * v < n ? widen16<T>(load16(d + j + 16 * v, n - 16 * v)) : _mm512_setzero_ps();
  for (int64_t q = q0; q < q0 + c; ++q) {
    const T *u = upd + at(q) * slice + j;
    for (int v = 0; v < V; ++v)
      if (16 * v < n) acc[v] = Lanes<Op>::f(acc[v], widen16<T>(load16(u + 16 * v, n - 16 * v)));
  }
  for (int v = 0; v < V; ++v)
    if (16 * v < n) store16(d + j + 16 * v, narrow16<T>(acc[v]), n - 16 * v);
}
#endif

// A run of c updates onto one destination row: d = round(update(...update(widen(d), u_0)...,
// u_{c-1})), u_q = upd + at(q) * slice for q in [q0, q0 + c). On AVX-512 the accumulators
// stay in registers, 128 lanes of d at a time (64 for rows of up to 64 elements: the wider
// block measured 1.2x slower there); elsewhere they are `scratch` (slice floats). A run of
// one update is one rounded step (direct: the same value, without the accumulators).
template <typename T, typename Op, typename At>
MSS_ALWAYS_INLINE void run_into(T *__restrict d, const T *__restrict upd, At at, int64_t q0, int64_t c, int64_t slice,
                                Acc<T> *scratch) {
  if (c == 1) {
    direct<T, Op>(d, upd + at(q0) * slice, slice);
    return;
  }
#if MSS_ROWS_AVX512
  if constexpr (kHalf<T> && Lanes<Op>::kHas) {
    if (slice <= 64) {
      run_block<4, T, Op>(d, upd, at, q0, c, slice, 0, slice);
      return;
    }
    for (int64_t j = 0; j < slice; j += 128) run_block<8, T, Op>(d, upd, at, q0, c, slice, j, slice - j);
    return;
  }
#endif
  widen_row<T>(d, scratch, slice);
  for (int64_t q = q0; q < q0 + c; ++q) accumulate<T, Op>(scratch, upd + at(q) * slice, slice);
  narrow_row<T>(scratch, d, slice);
}

}  // namespace rows
}  // namespace ms_scatter

#endif  // MS_SCATTER_CPU_ROW_OPS_H_
