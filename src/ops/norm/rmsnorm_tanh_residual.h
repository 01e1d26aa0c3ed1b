// diffusion.rmsnorm_tanh_residual — replaces the eager chain (Z-Image's gated residuals)
//   residual + torch.tanh(gate) * RMSNorm(y),
//   RMSNorm(y) = y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps) * weight
// with every op in y's dtype (RmsNormChain::storage_dtype, "bf16-native statistics"; 9 kernels).
// Contract: bit-exact against PyTorch 2.11 eager CUDA in bf16, f16 and f32: the RMSNorm as in
// ops/norm/rmsnorm_scale.h, tanh(gate) (libdevice tanhf) rounded to T, the product rounded to T,
// the sum rounded to T. One pass over y and residual. Limits as rmsnorm_scale; on the host tanh is
// the C++ library's, so host results match the host eager replicas only.
#pragma once

#include "ops/adaln/residual_gate_add.h"
#include "ops/norm/rmsnorm_rows.h"

namespace dfuse::detail {

// torch.tanh(gate), rounded to T.
template <typename T>
DFUSE_HD T tanh_gate(T gate) {
  return Storage<T>::store(tanh_f(Storage<T>::load(gate)));
}

// The epilogue with tanh(gate) given in T: residual + tanh_gate * normed, the product and the sum each
// rounded to T (residual_gate_add's chain).
template <typename T>
struct RmsNormGatedResidual {
  DFUSE_HD T operator()(T normed, T residual, T tanh_of_gate) const {
    return ResidualGateAdd<T>{}(residual, tanh_of_gate, normed);
  }
};

template <typename T>
struct RmsNormTanhResidual {
  DFUSE_HD T operator()(T normed, T residual, T gate) const {
    return RmsNormGatedResidual<T>{}(normed, residual, tanh_gate(gate));
  }
};

}  // namespace dfuse::detail
