// ms-scatter CPU: the row loops of the engine (one update slice at a time), with the
// 16-bit floats converted in registers as rows are loaded and stored.
//
// Every loop here computes exactly what reducer.h's scalar rule computes, lane by lane
// (the same IEEE operation on the same operands), so results are bit-identical at every
// build level. AVX-512 (x86-64-v4) and AVX2 + F16C (x86-64-v3): the 16-bit floats widened
// and rounded 16 or 8 lanes at a time in registers, fused with the update (one code path
// over rows::F, rows::kW). Elsewhere (x86-64-v2, aarch64): the scalar loops, which the
// compiler vectorises, with NEON float16 conversions where the build has them. (On v3 the
// scalar loops ran 2-5x slower on float16: GCC 12 turns the NaN test of a widened float16
// into a libgcc call, __eqhf2, and the loop then stays scalar.) Rows of the storage type's
// own arithmetic (float32, float64, integers) take the scalar loop at every level: the
// compiler's vector loop is as fast.
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
// vector lanes for the 16-bit floats: AVX-512 (x86-64-v4) or AVX2 + F16C (x86-64-v3)
#if MSS_ROWS_AVX512 || (defined(__AVX2__) && defined(__F16C__))
#define MSS_ROWS_VEC 1
#else
#define MSS_ROWS_VEC 0
#endif
#if MSS_ROWS_VEC || (defined(__F16C__) && defined(__AVX__))
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

#if MSS_ROWS_VEC
// ------------------------------------------------------------------ vector lanes
// kW floats to a register: 16 (AVX-512) or 8 (AVX2 + F16C). F: kW floats; H: kW 16-bit floats.
#if MSS_ROWS_AVX512
constexpr int64_t kW = 16;
using F = __m512;
using H = __m256i;
MSS_ALWAYS_INLINE F add_f(F a, F b) { return _mm512_add_ps(a, b); }
MSS_ALWAYS_INLINE F sub_f(F a, F b) { return _mm512_sub_ps(a, b); }
MSS_ALWAYS_INLINE F mul_f(F a, F b) { return _mm512_mul_ps(a, b); }
MSS_ALWAYS_INLINE F div_f(F a, F b) { return _mm512_div_ps(a, b); }
// a where (a >= b) (a <= b for Min) or a is NaN, else b
MSS_ALWAYS_INLINE F max_f(F a, F b) {
  return _mm512_mask_blend_ps(static_cast<__mmask16>(_mm512_cmp_ps_mask(a, b, _CMP_GE_OQ) |
                                                     _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)), b, a);
}
MSS_ALWAYS_INLINE F min_f(F a, F b) {
  return _mm512_mask_blend_ps(static_cast<__mmask16>(_mm512_cmp_ps_mask(a, b, _CMP_LE_OQ) |
                                                     _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)), b, a);
}
MSS_ALWAYS_INLINE F zero_f() { return _mm512_setzero_ps(); }
MSS_ALWAYS_INLINE F half_to_f(H h) { return _mm512_cvtph_ps(h); }
MSS_ALWAYS_INLINE H f_to_half(F f) { return _mm512_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
MSS_ALWAYS_INLINE F bf16_to_f(H h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
MSS_ALWAYS_INLINE H f_to_bf16(F f) {
  // float_to_bf16 per lane: round to nearest even on the bits; a NaN keeps its upper bits, made quiet
  const __m512i b = _mm512_castps_si512(f);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(b, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  const __m512i q = _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, r, q));
}
// n < kW: the first n lanes (16-bit loads: the others `fill`; float loads: the others 0)
MSS_ALWAYS_INLINE H load_h(const void *p, int64_t n, short fill) {
  if (n >= kW) return _mm256_loadu_si256(static_cast<const __m256i *>(p));
  return _mm256_mask_loadu_epi16(_mm256_set1_epi16(fill), static_cast<__mmask16>((1u << n) - 1), p);
}
MSS_ALWAYS_INLINE void store_h(void *p, H v, int64_t n) {
  if (n >= kW) _mm256_storeu_si256(static_cast<__m256i *>(p), v);
  else _mm256_mask_storeu_epi16(p, static_cast<__mmask16>((1u << n) - 1), v);
}
MSS_ALWAYS_INLINE F load_f(const float *p, int64_t n) {
  return n >= kW ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
MSS_ALWAYS_INLINE void store_f(float *p, F v, int64_t n) {
  if (n >= kW) _mm512_storeu_ps(p, v);
  else _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
}
#else  // AVX2 + F16C (x86-64-v3)
constexpr int64_t kW = 8;
using F = __m256;
using H = __m128i;
MSS_ALWAYS_INLINE F add_f(F a, F b) { return _mm256_add_ps(a, b); }
MSS_ALWAYS_INLINE F sub_f(F a, F b) { return _mm256_sub_ps(a, b); }
MSS_ALWAYS_INLINE F mul_f(F a, F b) { return _mm256_mul_ps(a, b); }
MSS_ALWAYS_INLINE F div_f(F a, F b) { return _mm256_div_ps(a, b); }
MSS_ALWAYS_INLINE F max_f(F a, F b) {
  return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GE_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
}
MSS_ALWAYS_INLINE F min_f(F a, F b) {
  return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LE_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q)));
}
MSS_ALWAYS_INLINE F zero_f() { return _mm256_setzero_ps(); }
MSS_ALWAYS_INLINE F half_to_f(H h) { return _mm256_cvtph_ps(h); }
MSS_ALWAYS_INLINE H f_to_half(F f) { return _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
MSS_ALWAYS_INLINE F bf16_to_f(H h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
MSS_ALWAYS_INLINE H f_to_bf16(F f) {
  // as the AVX-512 form; the NaN test a signed compare of the magnitude (both below 2^31)
  const __m256i b = _mm256_castps_si256(f);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                                         _mm256_set1_epi32(0x7f800000));
  const __m256i q = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
  const __m256i w = _mm256_blendv_epi8(r, q, nan);  // 8 values below 2^16
  return _mm_packus_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
}
// AVX2 has no 16-bit masked loads: a short row goes through a register-sized copy.
MSS_ALWAYS_INLINE H load_h(const void *p, int64_t n, short fill) {
  if (n >= kW) return _mm_loadu_si128(static_cast<const __m128i *>(p));
  alignas(16) short t[kW];
  for (int64_t j = 0; j < kW; ++j) t[j] = fill;
  std::memcpy(t, p, static_cast<size_t>(n) * sizeof(short));
  return _mm_load_si128(reinterpret_cast<const __m128i *>(t));
}
MSS_ALWAYS_INLINE void store_h(void *p, H v, int64_t n) {
  if (n >= kW) {
    _mm_storeu_si128(static_cast<__m128i *>(p), v);
    return;
  }
  alignas(16) short t[kW];
  _mm_store_si128(reinterpret_cast<__m128i *>(t), v);
  std::memcpy(p, t, static_cast<size_t>(n) * sizeof(short));
}
MSS_ALWAYS_INLINE __m256i lanes_below(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
MSS_ALWAYS_INLINE F load_f(const float *p, int64_t n) {
  return n >= kW ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes_below(n));
}
MSS_ALWAYS_INLINE void store_f(float *p, F v, int64_t n) {
  if (n >= kW) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, lanes_below(n), v);
}
#endif

// The reductions on kW floats: reducer.h's rule per lane (Max/Min: a NaN in acc stays, a
// NaN update propagates).
template <typename Op> struct Lanes { static constexpr bool kHas = false; };
#define MSS_LANES(OP, EXPR)                                    \
  template <> struct Lanes<OP> {                               \
    static constexpr bool kHas = true;                         \
    static MSS_ALWAYS_INLINE F f(F a, F b) { return EXPR; }    \
  };
MSS_LANES(OpAdd, add_f(a, b))
MSS_LANES(OpSub, sub_f(a, b))
MSS_LANES(OpMul, mul_f(a, b))
MSS_LANES(OpDiv, div_f(a, b))
MSS_LANES(OpMax, max_f(a, b))
MSS_LANES(OpMin, min_f(a, b))
MSS_LANES(OpUpdate, b)
#undef MSS_LANES

// The bits of 1.0: what the lanes past a short row hold (no lane then divides by zero).
template <typename S> constexpr short kOneBits = 0;
template <> constexpr short kOneBits<half_t> = 0x3c00;
template <> constexpr short kOneBits<bf16_t> = 0x3f80;

// kW 16-bit floats (n < kW: the first n) <-> kW floats.
template <typename S>
MSS_ALWAYS_INLINE F load16(const S *p, int64_t n) {
  const H h = load_h(p, n, kOneBits<S>);
  if constexpr (std::is_same<S, half_t>::value) return half_to_f(h);
  else return bf16_to_f(h);
}
template <typename S>
MSS_ALWAYS_INLINE void store16(S *p, F f, int64_t n) {
  if constexpr (std::is_same<S, half_t>::value) store_h(p, f_to_half(f), n);
  else store_h(p, f_to_bf16(f), n);
}

// body(j, c) for each vector of a row of n lanes: c = kW (a constant, so the loads' short-row
// branch folds away) and then, for the last n % kW lanes, c = n % kW.
template <typename Body>
MSS_ALWAYS_INLINE void each_vector(int64_t n, Body body) {
  int64_t j = 0;
  for (; j + kW <= n; j += kW) body(j, kW);
  if (j < n) body(j, n - j);
}
#endif  // MSS_ROWS_VEC

// ------------------------------------------------------------------ the row loops
// (With vector lanes: kW lanes at a time, unaligned loads and stores, the last lanes
// masked. Walking input_x's rows by aligned 64-byte lines with masked first and last
// lines, so that a row 16 bytes into a line costs no split access, measured slower on the
// 2-core Zen 4 machine: float32 medium 0.119 -> 0.139 ms aligned, 0.142 -> 0.159 ms 16
// bytes off; the extra cost of such rows is their fifth cache line, not the split accesses.)

// d[j] = update(d[j], u[j]), j < n: the storage type's own arithmetic, or for a 16-bit
// float one step rounded once (widen both, update in float, round).
template <typename T, typename Op>
MSS_ALWAYS_INLINE void direct(T *__restrict d, const T *__restrict u, int64_t n) {
#if MSS_ROWS_VEC
  if constexpr (kHalf<T> && Lanes<Op>::kHas) {
    each_vector(n, [&](int64_t j, int64_t c) { store16(d + j, Lanes<Op>::f(load16(d + j, c), load16(u + j, c)), c); });
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
#if MSS_ROWS_VEC
  if constexpr (kHalf<T> && Lanes<Op>::kHas) {
    each_vector(n, [&](int64_t j, int64_t c) { store_f(a + j, Lanes<Op>::f(load_f(a + j, c), load16(u + j, c)), c); });
    return;
  }
#endif
  if constexpr (kHalf<T>) {
    constexpr int64_t kChunk = 64;  // widened a chunk at a time (NEON where the build has it)
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
#if MSS_ROWS_VEC
  if constexpr (kHalf<T>) {
    each_vector(n, [&](int64_t j, int64_t c) { store_f(a + j, load16(d + j, c), c); });
    return;
  }
#endif
  widen_scalar<T>(d, a, n);
}

// d[j] = a[j] rounded once (float accumulators back into a row of input_x).
template <typename T>
MSS_ALWAYS_INLINE void narrow_row(const Acc<T> *__restrict a, T *__restrict d, int64_t n) {
#if MSS_ROWS_VEC
  if constexpr (kHalf<T>) {
    each_vector(n, [&](int64_t j, int64_t c) { store16(d + j, load_f(a + j, c), c); });
    return;
  }
#endif
  narrow_scalar<T>(a, d, n);
}

#if MSS_ROWS_VEC
// run_into's register block: V vectors of kW lanes of d, from lane j on (n lanes left; a
// whole block, n >= V * kW, takes the Full form, whose lane counts are all the constant kW).
template <int V, bool Full, typename T, typename Op, typename At>
MSS_ALWAYS_INLINE void run_block(T *__restrict d, const T *__restrict upd, At at, int64_t q0, int64_t c, int64_t slice,
                                 int64_t j, int64_t n) {
  auto has = [n](int v) { return Full || kW * v < n; };
  auto lanes = [n](int v) { return Full ? kW : n - kW * v; };
  F acc[V];
  for (int v = 0; v < V; ++v) acc[v] = has(v) ? load16(d + j + kW * v, lanes(v)) : zero_f();
  for (int64_t q = q0; q < q0 + c; ++q) {
    const T *u = upd + at(q) * slice + j;
    for (int v = 0; v < V; ++v)
      if (has(v)) acc[v] = Lanes<Op>::f(acc[v], load16(u + kW * v, lanes(v)));
  }
  for (int v = 0; v < V; ++v)
    if (has(v)) store16(d + j + kW * v, acc[v], lanes(v));
}
// A whole row in blocks of V vectors: the whole blocks, then the rest (as each_vector).
template <int V, typename T, typename Op, typename At>
MSS_ALWAYS_INLINE void run_blocks(T *__restrict d, const T *__restrict upd, At at, int64_t q0, int64_t c,
                                  int64_t slice) {
  int64_t j = 0;
  for (; j + V * kW <= slice; j += V * kW) run_block<V, true, T, Op>(d, upd, at, q0, c, slice, j, slice - j);
  if (j < slice) run_block<V, false, T, Op>(d, upd, at, q0, c, slice, j, slice - j);
}
#endif

// A run of c updates onto one destination row: d = round(update(...update(widen(d), u_0)...,
// u_{c-1})), u_q = upd + at(q) * slice for q in [q0, q0 + c). With vector lanes the
// accumulators stay in registers, 8 vectors at a time (4 for rows of up to 4 vectors: on
// AVX-512 the wider block measured 1.2x slower on rows of 64 elements); elsewhere they are
// `scratch` (slice floats). A run of one update is one rounded step (direct: the same value,
// without the accumulators).
template <typename T, typename Op, typename At>
MSS_ALWAYS_INLINE void run_into(T *__restrict d, const T *__restrict upd, At at, int64_t q0, int64_t c, int64_t slice,
                                Acc<T> *scratch) {
  if (c == 1) {
    direct<T, Op>(d, upd + at(q0) * slice, slice);
    return;
  }
#if MSS_ROWS_VEC
  if constexpr (kHalf<T> && Lanes<Op>::kHas) {
    if (slice <= 4 * kW) run_blocks<4, T, Op>(d, upd, at, q0, c, slice);
    else run_blocks<8, T, Op>(d, upd, at, q0, c, slice);
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
