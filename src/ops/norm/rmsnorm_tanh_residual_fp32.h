// diffusion.rmsnorm_tanh_residual_fp32 — the request-gated (quality "extra-high") replacement of
// rmsnorm_tanh_residual's chain (the spec's BF16-native gate RMSNorm)
//   residual + torch.tanh(gate) * RMSNorm(y),
//   RMSNorm(y) = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps) * weight   (9 kernels, each
//   rounded to y's dtype)
// in one pass with fp32 internals: the chain run on float copies of its operands and rounded once.
// The statistics are the float mean's (x.float().pow(2).mean(-1): Reduce.cuh's order for M rows of
// float squares, ops/norm/norm_fp32_rows.h mean_of_squares), then rsqrt, (y * r) * weight, tanh
// (libdevice tanhf; the C++ library's on the host), the product and the sum in float.
// Contract (dfuse/ops/rmsnorm.h): bit-exact against the float chain rounded once (and, in f32,
// against the chain itself); close to the bf16/f16 chain, |out - chain| <= 10u (|tanh(gate) n| +
// |residual|) + eta (3 |tanh(gate) n| / (m + eps) + 2 |tanh(gate)| (|weight| + 1) + 2 |n| + 4), m =
// mean(y^2), where m + eps >= 16 eta. Bound: the chain rounds the squares, the mean, + eps and rsqrt
// (rstd within 2.5u), y * rstd and * weight (n within 4.5u), tanh and the product (within 6.5u of
// tanh(gate) n) and the sum (u); the float reductions of the chain and of the fused op differ by at
// most D * 2^-24 <= 2^-11 relative (D <= 8192); the fused op rounds once (u): at most 7.6u
// |tanh(gate) n| + 2.1u |residual| with room to spare. Below the normal range a rounding errs by up
// to eta (half the smallest subnormal) instead: the squares, the mean and + eps add up to 3 eta to m
// + eps (at most 3/16 of it), rstd takes at most 0.6 of that relative error (rsqrt's slope, second-
// order terms included): under 2.2 eta |tanh(gate) n| / (m + eps) with n the chain's; y * rstd
// (times |weight tanh(gate)|), n (times |tanh(gate)|), tanh (times |n|), the product, the sum and the
// fused result add eta (|tanh(gate)| (|weight| + 1) + |n| + 3), within 2 eta (|tanh(gate)| (|weight|
// + 1) + |n| + 2) with the second-order terms.
#pragma once

#include "ops/norm/norm_fp32_rows.h"

namespace dfuse::detail {

template <typename T>
struct TanhResidualFp32 {
  DFUSE_HD T operator()(float normed, T residual, T gate) const {
    using S = Storage<T>;
    return S::store(add_rn(S::load(residual), mul_rn(tanh_f(S::load(gate)), normed)));
  }
};

}  // namespace dfuse::detail
