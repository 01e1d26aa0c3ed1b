// torch.ops.dfuse.gelu_tanh_cat(attn, mlp) (a fragment of the library torch_ops.cpp defines): the tail of
// FLUX.1's single-stream block,
//   torch.cat([attn.reshape(B, S, -1), F.gelu(mlp, approximate="tanh")], dim=2)
// with attn either [B, S, Da] or the attention's heads [B, S, H, D] (the processor's output before its
// reshape). Contract: bit-exact against that chain. Inputs the kernel accepts run through the first-sight
// Gate (dfuse/policy/gate.h); everything else, and CPU tensors, run the ATen chain.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <span>

#include "dfuse/ops/activation.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "tensor_views.h"

namespace {

using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::view_of;

at::Tensor merged_heads(const at::Tensor& attn) {
  return attn.dim() == 4 ? attn.reshape({attn.size(0), attn.size(1), -1}) : attn;
}

at::Tensor gelu_tanh_cat_eager(const at::Tensor& attn, const at::Tensor& mlp) {
  return at::cat({merged_heads(attn), at::gelu(mlp, "tanh")}, 2);
}

at::Tensor gelu_tanh_cat(const at::Tensor& attn, const at::Tensor& mlp) {
  if (attn.scalar_type() != mlp.scalar_type() || (attn.dim() != 3 && attn.dim() != 4) || mlp.dim() != 3)
    return gelu_tanh_cat_eager(attn, mlp);  // torch's promotion, or torch's own error
  const c10::OptionalDeviceGuard device_guard(mlp.device());
  const int64_t width = attn.dim() == 4 ? attn.size(2) * attn.size(3) : attn.size(2);
  at::Tensor out = at::empty({mlp.size(0), mlp.size(1), width + mlp.size(2)}, mlp.options());
  const auto va = input_view(attn), vm = input_view(mlp), vo = view_of(out, out.mutable_data_ptr());
  if (!va || !vm || !vo || !dfuse::can_use_gelu_tanh_cat(*va, *vm, *vo)) {
    out.copy_(gelu_tanh_cat_eager(attn, mlp));
    return out;
  }
  dfuse::Signature sig("diffusion.gelu_tanh_cat");
  sig.add(*va).add(*vm).add(*vo);
  run_gated(
      sig.op().c_str(), sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::gelu_tanh_cat(*va, *vm, *vo, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(gelu_tanh_cat_eager(attn, mlp)); });
  return out;
}

at::Tensor gelu_tanh_cat_meta(const at::Tensor& attn, const at::Tensor& mlp) {
  TORCH_CHECK(attn.dim() == 3 || attn.dim() == 4, "dfuse gelu_tanh_cat: attn must be [B, S, D] or [B, S, H, D]");
  TORCH_CHECK(mlp.dim() == 3, "dfuse gelu_tanh_cat: mlp must be [B, S, D]");
  const c10::SymInt width = attn.dim() == 4 ? attn.sym_size(2) * attn.sym_size(3) : attn.sym_size(2);
  return at::empty_symint({mlp.sym_size(0), mlp.sym_size(1), width + mlp.sym_size(2)},
                          mlp.options().dtype(at::promote_types(attn.scalar_type(), mlp.scalar_type())));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("gelu_tanh_cat(Tensor attn, Tensor mlp) -> Tensor", {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { m.impl("gelu_tanh_cat", &gelu_tanh_cat); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { m.impl("gelu_tanh_cat", &gelu_tanh_cat); }
TORCH_LIBRARY_IMPL(dfuse, Meta, m) { m.impl("gelu_tanh_cat", &gelu_tanh_cat_meta); }
