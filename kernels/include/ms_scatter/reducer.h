// ms-scatter: the reductions, shared by the CPU (C++), GPU (CUDA) and Ascend (Ascend C) kernels.
//
// A reduction is a compile-time tag (OpAdd, OpSub, ...). Reducer<T, Op> says how a
// destination element of type T is loaded into its accumulator type (float for half),
// updated with one value, and stored back. Adding a reduction is one tag here and one
// line in MS_SCATTER_REDUCTIONS (dtypes.h).
#ifndef MS_SCATTER_REDUCER_H_
#define MS_SCATTER_REDUCER_H_

// The AI core compiler (Ascend C device code, __CCE_AICORE__) gets no standard library and
// no half_t (it has its own half type): the traits below are our own for that reason.
#if defined(__CUDACC__)
#define MSS_HD __host__ __device__ __forceinline__
#elif defined(__CCE_AICORE__)
#define MSS_HD __aicore__ inline
#else
#define MSS_HD inline
#endif

#if !defined(__CCE_AICORE__)
#include <cstdint>

#include "ms_scatter/half.h"
#endif

namespace ms_scatter {

// Integer traits of the value dtypes: whether a type is an integer, whether it is signed,
// and the unsigned type its arithmetic wraps in (at least as wide as unsigned int:
// uint16_t * uint16_t would otherwise be promoted to signed int and could overflow).
template <typename A> struct IntTraits { static constexpr bool integral = false, is_signed = true; using U = A; };
#define MSS_INT_TRAITS(T, S, UT) \
  template <> struct IntTraits<T> { static constexpr bool integral = true, is_signed = S; using U = UT; };
MSS_INT_TRAITS(signed char, true, unsigned)
MSS_INT_TRAITS(unsigned char, false, unsigned)
MSS_INT_TRAITS(short, true, unsigned)
MSS_INT_TRAITS(unsigned short, false, unsigned)
MSS_INT_TRAITS(int, true, unsigned)
MSS_INT_TRAITS(unsigned, false, unsigned)
MSS_INT_TRAITS(long, true, unsigned long)
MSS_INT_TRAITS(unsigned long, false, unsigned long)
MSS_INT_TRAITS(long long, true, unsigned long long)
MSS_INT_TRAITS(unsigned long long, false, unsigned long long)
#undef MSS_INT_TRAITS

// Accumulator type: the 16-bit floats (float16, bfloat16) accumulate in float, everything
// else in itself. (The Ascend kernel adds the same rule for the AI core's own half type.)
template <typename T> struct AccOf { using type = T; };
template <typename T> MSS_HD typename AccOf<T>::type to_acc(T v) { return v; }
template <typename T> MSS_HD T from_acc(typename AccOf<T>::type v) { return v; }
#if !defined(__CCE_AICORE__)
template <> struct AccOf<half_t> { using type = float; };
template <> MSS_HD float to_acc<half_t>(half_t v) { return half_to_float(v); }
template <> MSS_HD half_t from_acc<half_t>(float v) { return float_to_half(v); }
template <> struct AccOf<bf16_t> { using type = float; };
template <> MSS_HD float to_acc<bf16_t>(bf16_t v) { return bf16_to_float(v); }
template <> MSS_HD bf16_t from_acc<bf16_t>(float v) { return float_to_bf16(v); }
#endif

// Integer arithmetic wraps as the dtype does (two's complement, like numpy): do it in
// the unsigned type so that no signed overflow (undefined behaviour) ever happens.
template <typename A, bool = IntTraits<A>::integral> struct Arith {
  MSS_HD static A add(A a, A b) { return a + b; }
  MSS_HD static A sub(A a, A b) { return a - b; }
  MSS_HD static A mul(A a, A b) { return a * b; }
  MSS_HD static A div(A a, A b) { return a / b; }  // IEEE: x/0 = inf or nan
};
template <typename A> struct Arith<A, true> {
  using U = typename IntTraits<A>::U;
  MSS_HD static A add(A a, A b) { return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))); }
  MSS_HD static A sub(A a, A b) { return static_cast<A>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b))); }
  MSS_HD static A mul(A a, A b) { return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))); }
  // Truncates toward zero. MIN / -1 wraps to MIN. b == 0 is rejected before any write; the
  // guard (a stays) only makes sure that no input can ever trap the process (SIGFPE).
  MSS_HD static A div(A a, A b) {
    if (IntTraits<A>::is_signed && b == static_cast<A>(-1)) return sub(A(0), a);
    if (b == A(0)) return a;
    return static_cast<A>(a / b);
  }
};

template <typename A> MSS_HD bool is_nan(A v) { return v != v; }  // false for integers

// Reduction tags. update(acc, v) is the new destination value after applying v.
// Max/Min follow numpy.maximum/minimum: a NaN on either side propagates.
struct OpAdd { static constexpr const char *name = "Add";
  template <typename A> MSS_HD static A update(A acc, A v) { return Arith<A>::add(acc, v); } };
struct OpSub { static constexpr const char *name = "Sub";
  template <typename A> MSS_HD static A update(A acc, A v) { return Arith<A>::sub(acc, v); } };
struct OpMul { static constexpr const char *name = "Mul";
  template <typename A> MSS_HD static A update(A acc, A v) { return Arith<A>::mul(acc, v); } };
struct OpDiv { static constexpr const char *name = "Div";
  template <typename A> MSS_HD static A update(A acc, A v) { return Arith<A>::div(acc, v); } };
struct OpMax { static constexpr const char *name = "Max";
  template <typename A> MSS_HD static A update(A acc, A v) { return (acc >= v || is_nan(acc)) ? acc : v; } };
struct OpMin { static constexpr const char *name = "Min";
  template <typename A> MSS_HD static A update(A acc, A v) { return (acc <= v || is_nan(acc)) ? acc : v; } };
struct OpUpdate { static constexpr const char *name = "Update";
  template <typename A> MSS_HD static A update(A, A v) { return v; } };

// Does this reduction reject a zero in `updates` for integer dtypes?
template <typename Op> struct RejectsZero { static constexpr bool value = false; };
template <> struct RejectsZero<OpDiv> { static constexpr bool value = true; };

// The finalize step of a mean: a sum of `count` (> 0) values divided by the count; the
// integers truncate toward zero, the division in 64 bits (a count need not fit the dtype).
template <typename A, bool = IntTraits<A>::integral, bool = IntTraits<A>::is_signed> struct MeanOf {
  MSS_HD static A of(A sum, int64_t count) { return sum / static_cast<A>(count); }
};
template <typename A> struct MeanOf<A, true, true> {
  MSS_HD static A of(A sum, int64_t count) { return static_cast<A>(static_cast<int64_t>(sum) / count); }
};
template <typename A> struct MeanOf<A, true, false> {
  MSS_HD static A of(A sum, int64_t count) {
    return static_cast<A>(static_cast<uint64_t>(sum) / static_cast<uint64_t>(count));
  }
};
template <typename A> MSS_HD A mean_of(A sum, int64_t count) { return MeanOf<A>::of(sum, count); }

// A mean's sum: the integers in 64 bits, so that the mean of any number of values (which
// always fits the dtype) is exact where their sum would wrap; the floats as AccOf.
template <typename T, bool = IntTraits<T>::integral, bool = IntTraits<T>::is_signed> struct MeanAccOf {
  using type = typename AccOf<T>::type;
};
template <typename T> struct MeanAccOf<T, true, true> { using type = int64_t; };
template <typename T> struct MeanAccOf<T, true, false> { using type = uint64_t; };

template <typename T, typename Op> struct Reducer {
  using acc_t = typename AccOf<T>::type;
  MSS_HD static acc_t load(T v) { return to_acc<T>(v); }
  MSS_HD static T store(acc_t v) { return from_acc<T>(v); }
  MSS_HD static acc_t update(acc_t acc, acc_t v) { return Op::template update<acc_t>(acc, v); }
  // One step on a destination element, rounding once (used when an element sees one update).
  MSS_HD static void apply(T *dst, T v) { *dst = store(update(load(*dst), load(v))); }
};

}  // namespace ms_scatter

#endif  // MS_SCATTER_REDUCER_H_
