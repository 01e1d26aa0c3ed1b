// torch.ops.dfuse, the gated residual step fused with the next block's modulated norm
// (normalization family; a fragment of the library torch_ops.cpp defines):
//   scale_residual_norm_scale_shift(residual, gate, update, scale, shift, norm="layer_norm",
//                                   weight=None, eps=1e-6) -> (r, out)
//     r = residual + gate * update
//     out = F.layer_norm(r, (D,), eps=eps) * (1 + scale) + shift        norm="layer_norm"
//     out = F.rms_norm(r, (D,), weight, eps) * (1 + scale) + shift      norm="rms_norm"
// Contract: bit-exact against that chain as model code writes it (both outputs). The kernel
// reproduces the norm path aten 2.11 takes for the chain's fresh r (vectorized or generic, by
// D % 4 and, for rms_norm, the weight's alignment), so every new signature (dtypes, shapes, strides,
// alignment, norm, eps, device, SM) goes through the first-sight Gate (gate_runner.h): the first
// call runs the kernel and the chain and compares the bits of both outputs; a mismatch sends the
// signature to the chain for good. Inputs the kernel does not accept (mixed dtypes, operands that
// broadcast residual to a larger shape, rows over 8192, a weight with layer_norm, ...) run the
// chain; CPU tensors always run the chain. The Meta implementation runs the chain on meta tensors.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <span>
#include <string>
#include <tuple>

#include "dfuse/ops/norm.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "tensor_views.h"

namespace {

using dfuse::ResidualNorm;
using dfuse::TensorView;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::view_of;

ResidualNorm parse_norm(c10::string_view norm) {
  if (norm == "layer_norm") return ResidualNorm::layer_norm;
  if (norm == "rms_norm") return ResidualNorm::rms_norm;
  TORCH_CHECK(false, "dfuse::scale_residual_norm_scale_shift: norm must be \"layer_norm\" or \"rms_norm\", got \"",
              std::string(norm), "\"");
}

// The eager chain as model code writes it.
std::tuple<at::Tensor, at::Tensor> scale_residual_norm_chain(const at::Tensor& residual, const at::Tensor& gate,
                                                             const at::Tensor& update, const at::Tensor& scale,
                                                             const at::Tensor& shift, ResidualNorm norm,
                                                             const std::optional<at::Tensor>& weight, double eps) {
  at::Tensor r = at::add(residual, at::mul(gate, update));
  const at::Tensor normed = norm == ResidualNorm::layer_norm
                                ? at::layer_norm_symint(r, {r.sym_size(-1)}, weight, {}, eps)
                                : at::rms_norm_symint(r, {r.sym_size(-1)}, weight, eps);
  at::Tensor out = at::add(at::mul(normed, at::add(scale, 1)), shift);
  return {std::move(r), std::move(out)};
}

bool same_dtype_and_device(const at::Tensor& x, const at::Tensor& t) {
  return t.scalar_type() == x.scalar_type() && t.device() == x.device();
}

std::tuple<at::Tensor, at::Tensor> scale_residual_norm_scale_shift(const at::Tensor& residual, const at::Tensor& gate,
                                                                   const at::Tensor& update, const at::Tensor& scale,
                                                                   const at::Tensor& shift, c10::string_view norm_name,
                                                                   const std::optional<at::Tensor>& weight,
                                                                   double eps) {
  const ResidualNorm norm = parse_norm(norm_name);
  const c10::OptionalDeviceGuard device_guard(residual.device());
  const auto chain = [&] {
    return scale_residual_norm_chain(residual, gate, update, scale, shift, norm, weight, eps);
  };
  const bool has_weight = weight && weight->defined();
  const auto vres = input_view(residual), vgate = input_view(gate), vupd = input_view(update),
             vscale = input_view(scale), vshift = input_view(shift);
  const std::optional<TensorView> vweight = has_weight ? input_view(*weight) : std::nullopt;
  if (!vres || !vgate || !vupd || !vscale || !vshift || (has_weight && !vweight) || residual.dim() == 0 ||
      !same_dtype_and_device(residual, gate) || !same_dtype_and_device(residual, update) ||
      !same_dtype_and_device(residual, scale) || !same_dtype_and_device(residual, shift) ||
      (has_weight && !same_dtype_and_device(residual, *weight)))
    return chain();
  const auto options = residual.options().memory_format(at::MemoryFormat::Contiguous);
  at::Tensor r = at::empty(residual.sizes(), options), out = at::empty(residual.sizes(), options);
  const auto vr = view_of(r, r.mutable_data_ptr()), vout = view_of(out, out.mutable_data_ptr());
  const TensorView* w = vweight ? &*vweight : nullptr;
  if (!vr || !vout ||
      !dfuse::can_use_scale_residual_norm_scale_shift(norm, *vres, *vgate, *vupd, w, eps, *vscale, *vshift, *vr,
                                                      *vout))
    return chain();
  dfuse::Signature sig("diffusion.scale_residual_norm_scale_shift");
  sig.add(*vres).add(*vgate).add(*vupd).add(*vscale).add(*vshift);
  if (w) sig.add(*w);
  else sig.add_scalar("absent", 0.0);
  sig.add(*vr).add(*vout).add_scalar("norm", double(int(norm))).add_scalar("eps", eps);
  std::array<at::Tensor, 2> outs = {r, out};
  run_gated(
      "scale_residual_norm_scale_shift", sig, outs,
      [&](dfuse::Stream s) {
        dfuse::scale_residual_norm_scale_shift(norm, *vres, *vgate, *vupd, w, eps, *vscale, *vshift, *vr, *vout, s);
      },
      [&](std::span<at::Tensor> dst) {
        const auto [rc, oc] = chain();
        dst[0].copy_(rc);
        dst[1].copy_(oc);
      });
  return {r, out};
}

std::tuple<at::Tensor, at::Tensor> scale_residual_norm_scale_shift_meta(
    const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& update, const at::Tensor& scale,
    const at::Tensor& shift, c10::string_view norm_name, const std::optional<at::Tensor>& weight, double eps) {
  return scale_residual_norm_chain(residual, gate, update, scale, shift, parse_norm(norm_name), weight, eps);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("scale_residual_norm_scale_shift(Tensor residual, Tensor gate, Tensor update, Tensor scale, Tensor shift, "
        "str norm=\"layer_norm\", Tensor? weight=None, float eps=1e-06) -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { m.impl("scale_residual_norm_scale_shift", &scale_residual_norm_scale_shift); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { m.impl("scale_residual_norm_scale_shift", &scale_residual_norm_scale_shift); }
TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("scale_residual_norm_scale_shift", &scale_residual_norm_scale_shift_meta);
}
