// IEEE adds and multiplies on two 16-bit storage values packed in a 32-bit word (bf16x2, f16x2), for
// row-wise ops whose eager chain is only such ops on storage values.
//
// Why the bits are the eager chain's: an eager bf16/f16 add or multiply computes in float and rounds to
// the storage dtype. The product of two p-bit significands (p = 8 for bf16, 11 for f16) has at most 2p
// bits and is exact in float; a sum is rounded to float first, but float's 24 bits are at least 2p + 2, so
// rounding that float to the storage dtype gives the correctly rounded sum (double rounding is innocuous).
// A packed add.rn / mul.rn rounds the exact result once, to nearest even: the same value, subnormals kept.
// One packed instruction does the work of two conversions, one float op and one rounding per element.
// The _rn intrinsics carry an explicit rounding mode, which keeps ptxas from contracting a multiply and
// an add into one fma (a single rounding the eager chain does not have).
// What this leaves to check on the GPU: the NaN a packed op returns (the canonical NaN, as the float ->
// storage conversion returns it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>

#include "dfuse/core/dtype.h"

namespace dfuse::detail {

// The packed type of two T and the word holding (1, 1).
template <typename T>
struct PairedType;
template <>
struct PairedType<bf16_t> {
  using V = __nv_bfloat162;
  static constexpr uint32_t kOnes = 0x3F803F80u;
  __device__ static float2 floats(V v) { return __bfloat1622float2(v); }
  __device__ static V rounded(float a, float b) { return __floats2bfloat162_rn(a, b); }
};
template <>
struct PairedType<f16_t> {
  using V = __half2;
  static constexpr uint32_t kOnes = 0x3C003C00u;
  __device__ static float2 floats(V v) { return __half22float2(v); }
  __device__ static V rounded(float a, float b) { return __floats2half2_rn(a, b); }
};

template <typename T>
struct PairedArith {
  using V = typename PairedType<T>::V;
  static constexpr uint32_t kOnes = PairedType<T>::kOnes;
  __device__ static V v(uint32_t w) {
    V r;
    memcpy(&r, &w, sizeof(w));
    return r;
  }
  __device__ static uint32_t w(V v) {
    uint32_t r;
    memcpy(&r, &v, sizeof(r));
    return r;
  }
  __device__ static uint32_t add(uint32_t a, uint32_t b) { return w(__hadd2_rn(v(a), v(b))); }
  __device__ static uint32_t mul(uint32_t a, uint32_t b) { return w(__hmul2_rn(v(a), v(b))); }
  // Both halves as floats, and two floats rounded to T and packed (a in the low half).
  __device__ static float2 unpack(uint32_t a) { return PairedType<T>::floats(v(a)); }
  __device__ static uint32_t pack(float a, float b) { return w(PairedType<T>::rounded(a, b)); }
};

// A row-wise functor Op<T>'s arithmetic on word pairs, where the chain allows it (see above): an op
// specializes RowwisePair<Op<T>> with `static uint32_t apply(bool& fallback, uint32_t...)` taking one
// word of each input in the functor's argument order; it sets `fallback` where its result may differ
// from the functor's (the kernel then recomputes that whole vector with the functor). Unspecialized:
// the element-wise functor runs.
template <typename Fn>
struct RowwisePair {
  static constexpr bool kDefined = false;
};

}  // namespace dfuse::detail
