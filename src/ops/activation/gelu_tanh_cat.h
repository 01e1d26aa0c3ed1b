// diffusion.gelu_tanh_cat — replaces the tail of FLUX.1's single-stream block
//   torch.cat([attn_output, F.gelu(mlp_hidden_states, approximate="tanh")], dim=2)
// whose eager form writes the GELU to a temporary and the cat copies both halves again (and, with
// the attention output given as its [B, S, H, D] heads, the reshape before the cat copies it once
// more). Here the attention half is copied straight from its view (common/strided_copy.h) and the
// GELU written straight into its half of the output (cuda/rowwise.cuh). Contract: bit-exact in
// bf16, f16 and f32 (the copy moves bytes; the GELU element is aten's GeluCUDAKernelImpl):
//   inner = fma(x * (x * x), 0.044715, x) * sqrt(2 / pi);  y = T((0.5 x) * (tanh(inner) + 1))
// tanh is libdevice tanhf on CUDA and std::tanh on the host (common/arith.h), so host results are
// bit-exact against the host eager replicas only.
#pragma once

#include "common/arith.h"
#include "common/rows.h"
#include "common/strided_copy.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

DFUSE_HD float gelu_tanh_f(float x) {
  const float inner = mul_rn(fma_rn(mul_rn(x, mul_rn(x, x)), 0.044715f, x), 0.79788458347320556641f);
  return mul_rn(mul_rn(0.5f, x), add_rn(tanh_f(inner), 1.0f));
}

template <typename T>
struct GeluTanh {
  DFUSE_HD T operator()(T x) const {
    using S = Storage<T>;
    return S::store(gelu_tanh_f(S::load(x)));
  }
};

// Kernel entry: the attention half's copy, then the GELU half (in = {mlp}, out = its half).
using GeluTanhCatEntry = void (*)(const StridedCopyParams& attn, const RowwiseParams& gelu, Stream stream);

}  // namespace dfuse::detail
