// SiLU of two 16-bit storage values packed in a 32-bit word (bf16x2, f16x2), each result the eager
// chain's T(x / (1 + exp(-x))) (ops/activation/silu.h), for the activation kernels on packed pairs
// (silu_mul, bias_silu, bias_glu; cuda/paired_arith.cuh holds the adds and multiplies around it).
//
// silu_f spends most of its instructions on libdevice's expf and on an IEEE division (a dozen
// instructions and a range check). Here an estimate of the quotient comes first:
//   bf16: q = x * rcp(1 + __expf(-x))   (__expf: ex2.approx of x * log2(e), two instructions)
//   f16:  q = x * rcp(1 + expf(-x))
// (x * rcp(d) is div.approx.f32, at most 2 ulp from x / d for d in [2^-126, 2^126], PTX ISA).
// Rounding a float to T is monotonic, so when the floats kSteps float steps below and above q round to
// the same T, so does silu_f's quotient if it lies within kSteps steps of q, and that T is the result.
// Otherwise (q near a rounding boundary of T: about 1 element in 500 for both types), for
// quotients of magnitude below 2^-120 (tiny x, NaN), and for bf16 where x < -16, silu_f itself runs.
// The distance: __expf(y) is within 2 + 1.173 |y| ulp of e^y and expf within 2 (CUDA C++ Programming
// Guide, math function accuracy). For -16 <= x the two exps differ by at most 22.8 ulp, so the two
// 1 + exp by at most 23.8 ulp of d (one rounding each; for x > 16 the exps are below 2^-23 and the sums
// differ by that rounding at most), and with the division's 2.5 the two quotients by 26.3 * 2^-23 of
// their value: at most 53 float steps, kSteps = 64. For f16 the two exps are the same and only the
// division differs: 2.5 ulp, at most 5 steps, kSteps = 8. The GPU suite runs every bf16 and every f16
// value through it (the every_value cases of the activation tests) against the eager chain.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common/arith.h"
#include "cuda/paired_arith.cuh"
#include "ops/activation/silu.h"

namespace dfuse::detail {

// Two floats rounded to T and packed (a in the low half), and the reverse.
template <typename T>
struct PairedFloats;
template <>
struct PairedFloats<bf16_t> {
  __device__ static uint32_t pack(float a, float b) { return PairedArith<bf16_t>::w(__floats2bfloat162_rn(a, b)); }
  __device__ static float2 unpack(uint32_t w) { return __bfloat1622float2(PairedArith<bf16_t>::v(w)); }
};
template <>
struct PairedFloats<f16_t> {
  __device__ static uint32_t pack(float a, float b) { return PairedArith<f16_t>::w(__floats2half2_rn(a, b)); }
  __device__ static float2 unpack(uint32_t w) { return __half22float2(PairedArith<f16_t>::v(w)); }
};

// silu_f(x), or a float that rounds to the same T (see above).
template <typename T>
__device__ __forceinline__ float silu_for_storage(float x) {
  constexpr bool kExpEstimate = std::is_same_v<T, bf16_t>;
  constexpr uint32_t kSteps = kExpEstimate ? 64 : 8;
  const float d = add_rn(1.0f, kExpEstimate ? __expf(-x) : exp_f(-x));
  const float q = __fdividef(x, d);
  const uint32_t b = __float_as_uint(q);
  const uint32_t ends = PairedFloats<T>::pack(__uint_as_float(b - kSteps), __uint_as_float(b + kSteps));
  // Non-short-circuit ands: one predicate, no branch per test. Under the d < 2^126 bound of div.approx
  // (x < -87 for f16), q is 0 or NaN (PTX ISA) and fails the magnitude test.
  const bool settled = (!kExpEstimate || x >= -16.0f) & (fabsf(q) >= 0x1p-120f) & ((ends >> 16) == (ends & 0xFFFFu));
  return settled ? q : silu_f(x);
}

// T(silu_f(x)) of both halves of x.
template <typename T>
__device__ __forceinline__ uint32_t paired_silu(uint32_t x) {
  const float2 v = PairedFloats<T>::unpack(x);
  return PairedFloats<T>::pack(silu_for_storage<T>(v.x), silu_for_storage<T>(v.y));
}

}  // namespace dfuse::detail
