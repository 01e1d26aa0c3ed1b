// diffusion.rmsnorm_scale — replaces the eager chain (Z-Image's attention/FFN input norms, scale
// being the materialized 1 + scale_msa)
//   RMSNorm(x) * scale,  RMSNorm(x) = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
// with every op in x's dtype (RmsNormChain::storage_dtype, "bf16-native statistics"; 7 kernels).
// Contract: bit-exact against PyTorch 2.11 eager CUDA in bf16, f16 and f32: squares rounded to T,
// the mean of the T squares in Reduce.cuh's order (16-byte vectors) rounded to T, + eps, rsqrt,
// x * rstd and * weight each rounded to T (common/rms_norm_arith.h), then the product with scale
// rounded to T. One pass over x. Limits: rows of at most 8192 elements; the head-alignment step of
// the mean (D not a multiple of 8 for bf16/f16, of 4 for f32, D >= 128) is implemented from
// Reduce.cuh's source and not verified against torch.
#pragma once

#include "ops/norm/rmsnorm_rows.h"

namespace dfuse::detail {

template <typename T>
struct RmsNormScale {
  DFUSE_HD T operator()(T normed, T scale) const {
    using S = Storage<T>;
    return S::store(mul_rn(S::load(normed), S::load(scale)));
  }
};

}  // namespace dfuse::detail
