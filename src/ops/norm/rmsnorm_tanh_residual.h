// diffusion.rmsnorm_tanh_residual — replaces the eager chain (Z-Image's gated residuals)
//   residual + torch.tanh(gate) * RMSNorm(y),
//   RMSNorm(y) = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps) * weight
// with every op in y's dtype (RmsNormChain::storage_dtype, "bf16-native statistics"; 9 kernels).
// Contract: bit-exact against PyTorch 2.11 eager CUDA in bf16, f16 and f32: the RMSNorm as in
// ops/norm/rmsnorm_scale.h, tanh(gate) (libdevice tanhf) rounded to T, the product rounded to T,
// the sum rounded to T. One pass over y and residual. Limits as rmsnorm_scale; on the host tanh is
// the C++ library's, so host results match the host eager replicas only.
#pragma once

#include "ops/norm/rmsnorm_rows.h"

namespace dfuse::detail {

template <typename T>
struct RmsNormTanhResidual {
  DFUSE_HD T operator()(T normed, T residual, T gate) const {
    using S = Storage<T>;
    const float tanh_gate = S::round(tanh_f(S::load(gate)));
    const float gated = S::round(mul_rn(tanh_gate, S::load(normed)));
    return S::store(add_rn(S::load(residual), gated));
  }
};

}  // namespace dfuse::detail
