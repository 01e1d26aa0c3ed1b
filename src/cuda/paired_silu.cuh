// SiLU of two 16-bit storage values packed in a 32-bit word (bf16x2, f16x2), each result the eager
// chain's T(x / (1 + exp(-x))) bit for bit (silu_f, ops/activation/silu.h), for the activation kernels
// on packed pairs (silu_mul, bias_silu, bias_glu; cuda/paired_arith.cuh holds the adds and multiplies
// around it).
//
// silu_f's IEEE division ends in a branch to a slow path for operands near the ends of the float range,
// which cuts a kernel's straight-line code into one block per element. Here the division is the
// refinement nvcc's IEEE division runs on its fast path:
//   r = rcp(d) (MUFU.RCP), r' = fma(r, fma(-d, r, 1), r), q = x * r', q' = fma(r', fma(-d, q, x), q)
// whose q' is the correctly rounded quotient (Markstein) when no intermediate is subnormal or overflows.
// With 2^-100 <= |x| and -69 <= x <= 2^126, d = 1 + exp(-x) lies in [1, 2^100] and every intermediate is a
// normal float or an exact zero (the FMAs do not flush). Below 2^-100 in magnitude, where x is a 16-bit
// value (bf16's and f16's smallest subnormals are 2^-133 and 2^-24): exp(-x) rounds to 1, d = 2, r = r' = 1/2
// exactly, q = x / 2 exactly (x's lowest set bit is at least 2^-133), fma(-d, q, x) = +0 and q' = q, the
// correctly rounded quotient; for x = -0 that is +0, so the result takes x's sign (a no-op wherever q' is
// nonzero: the quotient has x's sign). Zeros are common in 16-bit data (x + bias cancels exactly about once
// in a thousand elements of N(0, 3) activations against an N(0, 1) bias), and each sent a warp to the
// fallback. Outside -69 <= x <= 2^126 (and for NaN and infinities) the pair sets `fallback` and the caller
// runs silu_f. d is silu_f's own (silu_denominator). The GPU suite runs every bf16 and every f16 value
// through it (the every_value cases of the activation tests) against the eager chain.
#pragma once

#include <cstdint>

#include "common/arith.h"
#include "cuda/paired_arith.cuh"
#include "ops/activation/silu.h"

namespace dfuse::detail {

// silu_f(x) of a 16-bit value x in the range above (`in_range`), without a branch.
__device__ __forceinline__ float silu_in_range(float x, bool& in_range) {
  in_range = (x >= -69.0f) & (x <= 0x1p126f);
  const float d = silu_denominator(x);
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d));
  r = fma_rn(r, fma_rn(-d, r, 1.0f), r);
  const float q = mul_rn(x, r);
  return copysignf(fma_rn(r, fma_rn(-d, q, x), q), x);
}

// T(silu_f(x)) of both halves of x; sets `fallback` where an element is outside the range above.
template <typename T>
__device__ __forceinline__ uint32_t paired_silu(uint32_t x, bool& fallback) {
  const float2 v = PairedArith<T>::unpack(x);
  bool lo_in, hi_in;
  const float lo = silu_in_range(v.x, lo_in), hi = silu_in_range(v.y, hi_in);
  fallback |= !(lo_in & hi_in);
  return PairedArith<T>::pack(lo, hi);
}

}  // namespace dfuse::detail
