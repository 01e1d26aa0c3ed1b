// Arithmetic helpers shared by host and CUDA code. Every rounding is explicit: on the device
// the IEEE intrinsics (__fadd_rn, __fmul_rn, __fmaf_rn, ...) which nvcc never re-contracts; on
// the host plain float operations, compiled with -ffp-contract=off.
#pragma once

#include <cmath>

#include "dfuse/core/dtype.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace dfuse::detail {

DFUSE_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
DFUSE_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
DFUSE_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
DFUSE_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
DFUSE_HD float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// Double-precision IEEE operations (aten's opmath for fp64 tensors), and the double -> float
// round to nearest even that aten's copy_ applies before narrowing further to bf16/f16.
// aten's add / sub of fp64 tensors, `self + alpha * other` (alpha = 1 or -1): one fused multiply-add, as
// aten's compiled kernel does it. The value equals self + other or self - other rounded once. Where both are
// NaNs the result is self's on the H200, as in torch (docs/BENCHMARKS.md, session 9); a DADD keeps its second
// source's, and nvcc orders an add's sources as it likes, so __dadd_rn(self, other) may keep either. (The
// H200's inf * 0 in fp64 is a negative NaN, 0xfff8...; input NaNs are usually positive.)
DFUSE_HD double dadd_alpha_rn(double self, double other, double alpha) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(other, alpha, self);
#else
  return std::fma(other, alpha, self);
#endif
}
DFUSE_HD double dmul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
DFUSE_HD float double_to_float_rn(double v) {
#if defined(__CUDA_ARCH__)
  return __double2float_rn(v);
#else
  return float(v);
#endif
}

// exp in float: the CUDA math library's expf (libdevice, as aten calls it) on the device, the C++
// library's on the host. The two agree on most but not all inputs, so a host result that uses
// it is bit-exact against the host eager replicas only.
DFUSE_HD float exp_f(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}

// torch.tanh in float: libdevice tanhf on the device, the C++ library's on the host (the two differ
// on some inputs, so host results that use it match the host eager replicas only).
DFUSE_HD float tanh_f(float x) {
#if defined(__CUDA_ARCH__)
  return tanhf(x);
#else
  return std::tanh(x);
#endif
}

// rsqrt in float: the CUDA math library's rsqrtf on the device (MUFU.RSQ, not correctly rounded;
// what aten's LayerNorm/RMSNorm call), on the host the correctly rounded value (computed in double).
// The two differ on many inputs, so a host result that uses it is bit-exact against the host eager
// replicas only.
DFUSE_HD float rsqrt_f(float x) {
#if defined(__CUDA_ARCH__)
  return rsqrtf(x);
#else
  return float(1.0 / std::sqrt(double(x)));
#endif
}

// Storage <-> float for the three floating storage types. On the device the conversion
// instructions; on the host the bit-exact software conversions of dfuse/core/dtype.h.
template <typename T>
struct Storage;

template <>
struct Storage<float> {
  DFUSE_HD static float load(float v) { return v; }
  DFUSE_HD static float round(float v) { return v; }
  DFUSE_HD static float store(float v) { return v; }
};

template <>
struct Storage<bf16_t> {
  DFUSE_HD static float load(bf16_t v) { return bf16_to_float(v); }
  DFUSE_HD static bf16_t store(float v) {
#if defined(__CUDA_ARCH__)
    return bf16_t{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
#else
    return float_to_bf16(v);
#endif
  }
  // The value the storage dtype would hold: float(T(v)).
  DFUSE_HD static float round(float v) { return load(store(v)); }
};

template <>
struct Storage<f16_t> {
  DFUSE_HD static float load(f16_t v) {
#if defined(__CUDA_ARCH__)
    return __half2float(__ushort_as_half(v.bits));
#else
    return f16_to_float(v);
#endif
  }
  DFUSE_HD static f16_t store(float v) {
#if defined(__CUDA_ARCH__)
    return f16_t{__half_as_ushort(__float2half_rn(v))};
#else
    return float_to_f16(v);
#endif
  }
  DFUSE_HD static float round(float v) { return load(store(v)); }
};

}  // namespace dfuse::detail
