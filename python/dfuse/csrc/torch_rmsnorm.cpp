// torch.ops.dfuse, RMSNorm ops of the normalization family (a fragment of the library torch_ops.cpp
// defines):
//   rmsnorm_scale_shift(x, weight, scale, shift, eps=1e-6)
//     F.rms_norm(x, (x.size(-1),), weight, eps) * (1 + scale) + shift
//   rmsnorm_decomposed_scale_shift(x, weight, scale, shift, eps=1e-6)
//     diffusers RMSNorm(x) * (1 + scale) + shift, RMSNorm being
//       variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
//       h = x * torch.rsqrt(variance + eps)
//       h = h.to(weight.dtype) * weight    (weight f16/bf16; an f32 weight multiplies without a cast;
//                                           no weight: h.to(x.dtype))
//   qk_rmsnorm_native(q, k, q_weight, k_weight, eps=1e-6) -> (q_out, k_out)
//     (RMSNorm_q(q), RMSNorm_k(k)) with diffusers' RMSNorm(head_dim) modules (norm_q / norm_k)
//   qk_rmsnorm_storage_dtype(q, k, q_weight, k_weight, eps=1e-6) -> (q_out, k_out)
//     the same with Z-Image's RMSNorm (every op in q's dtype; head dim 128)
//   qk_rmsnorm(q, k, q_weight, k_weight, eps=1e-6) -> (q_out, k_out)
//     (F.rms_norm(q, (Dh,), q_weight, eps), F.rms_norm(k, (Dh,), k_weight, eps))  (torch.nn.RMSNorm)
//   rmsnorm_scale(x, weight, scale, eps=1e-6)
//     RMSNorm(x) * scale, RMSNorm = Z-Image's x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight
//     (every op in x's dtype)
//   rmsnorm_tanh_residual(residual, gate, y, weight, eps=1e-6)
//     residual + torch.tanh(gate) * RMSNorm(y)
// Contract: bit-exact against these chains as model code writes them (ATen calls below). The fused
// kernel reproduces aten 2.11's RMSNorm dispatch (F.rms_norm's vectorized or generic path; the mean's
// Reduce.cuh configuration for the row count), so every new signature (dtypes, shapes, strides,
// alignment, eps, device, SM) goes through the first-sight Gate: the first call runs the fused
// kernel and the chain and compares bits, a mismatch sends the signature to the chain for good.
// Inputs the kernel does not accept (mixed dtypes, scale broadcasting x to a larger shape, rows over
// 8192, ...) run the chain. The Meta implementation runs the chain on meta tensors.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <span>
#include <tuple>

#include "dfuse/ops/rmsnorm.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "tensor_views.h"

namespace {

using dfuse::RmsNormChain;
using dfuse::TensorView;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::view_of;

// F.rms_norm(x, (D,), weight, eps).
at::Tensor torch_rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  return at::rms_norm_symint(x, {x.sym_size(-1)}, weight, eps);
}

// diffusers' RMSNorm.forward.
at::Tensor diffusers_rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const at::Tensor variance = x.to(at::kFloat).pow(2).mean(-1, /*keepdim=*/true);
  at::Tensor h = at::mul(x, at::rsqrt(at::add(variance, eps)));
  if (!weight) return h.to(x.scalar_type());
  const at::ScalarType w = weight->scalar_type();
  if (w == at::kHalf || w == at::kBFloat16) h = h.to(w);
  return at::mul(h, *weight);
}

at::Tensor scale_shift_chain(RmsNormChain chain, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                             const at::Tensor& scale, const at::Tensor& shift, double eps) {
  const at::Tensor normed =
      chain == RmsNormChain::torch_rms_norm ? torch_rms_norm(x, weight, eps) : diffusers_rms_norm(x, weight, eps);
  return at::add(at::mul(normed, at::add(scale, 1)), shift);
}

const char* op_id(RmsNormChain chain) {
  return chain == RmsNormChain::torch_rms_norm ? "diffusion.rmsnorm_scale_shift"
                                               : "diffusion.rmsnorm_decomposed_scale_shift";
}

bool same_dtype_and_device(const at::Tensor& x, const at::Tensor& t) {
  return t.scalar_type() == x.scalar_type() && t.device() == x.device();
}

at::Tensor scale_shift(RmsNormChain chain, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                       const at::Tensor& scale, const at::Tensor& shift, double eps) {
  const c10::OptionalDeviceGuard device_guard(x.device());
  const auto vx = input_view(x), vscale = input_view(scale), vshift = input_view(shift);
  const std::optional<TensorView> vweight = weight ? input_view(*weight) : std::nullopt;
  if (!vx || !vscale || !vshift || (weight && !vweight) || x.dim() == 0 || !same_dtype_and_device(x, scale) ||
      !same_dtype_and_device(x, shift) || (weight && !same_dtype_and_device(x, *weight)))
    return scale_shift_chain(chain, x, weight, scale, shift, eps);
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  const TensorView* w = vweight ? &*vweight : nullptr;
  if (!vout || !dfuse::can_use_rmsnorm_scale_shift(chain, *vx, w, eps, *vscale, *vshift, *vout))
    return scale_shift_chain(chain, x, weight, scale, shift, eps);
  dfuse::Signature sig(op_id(chain));
  sig.add(*vx);
  if (w) sig.add(*w);
  sig.add(*vscale).add(*vshift).add(*vout).add_scalar("eps", eps);
  run_gated(
      op_id(chain), sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::rmsnorm_scale_shift(chain, *vx, w, eps, *vscale, *vshift, *vout, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(scale_shift_chain(chain, x, weight, scale, shift, eps)); });
  return out;
}

at::Tensor rmsnorm_scale_shift(const at::Tensor& x, const std::optional<at::Tensor>& weight, const at::Tensor& scale,
                               const at::Tensor& shift, double eps) {
  return scale_shift(RmsNormChain::torch_rms_norm, x, weight, scale, shift, eps);
}

at::Tensor rmsnorm_decomposed_scale_shift(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                                          const at::Tensor& scale, const at::Tensor& shift, double eps) {
  return scale_shift(RmsNormChain::diffusers_decomposed, x, weight, scale, shift, eps);
}

// ---- storage-dtype (bf16-native) RMSNorm ops -------------------------------------------------------

// Z-Image's RMSNorm: every op in x's dtype.
at::Tensor storage_rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const at::Tensor h = at::mul(x, at::rsqrt(at::add(x.pow(2).mean(-1, /*keepdim=*/true), eps)));
  return weight ? at::mul(h, *weight) : h;
}

at::Tensor rmsnorm_scale_chain(const at::Tensor& x, const std::optional<at::Tensor>& weight, const at::Tensor& scale,
                               double eps) {
  return at::mul(storage_rms_norm(x, weight, eps), scale);
}

at::Tensor rmsnorm_tanh_residual_chain(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& y,
                                       const std::optional<at::Tensor>& weight, double eps) {
  return at::add(residual, at::mul(at::tanh(gate), storage_rms_norm(y, weight, eps)));
}

at::Tensor rmsnorm_scale(const at::Tensor& x, const std::optional<at::Tensor>& weight, const at::Tensor& scale,
                         double eps) {
  const c10::OptionalDeviceGuard device_guard(x.device());
  const auto vx = input_view(x), vscale = input_view(scale);
  const std::optional<TensorView> vweight = weight ? input_view(*weight) : std::nullopt;
  if (!vx || !vscale || (weight && !vweight) || x.dim() == 0 || !same_dtype_and_device(x, scale) ||
      (weight && !same_dtype_and_device(x, *weight)))
    return rmsnorm_scale_chain(x, weight, scale, eps);
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  const TensorView* w = vweight ? &*vweight : nullptr;
  if (!vout || !dfuse::can_use_rmsnorm_scale(*vx, w, eps, *vscale, *vout))
    return rmsnorm_scale_chain(x, weight, scale, eps);
  dfuse::Signature sig("diffusion.rmsnorm_scale");
  sig.add(*vx);
  if (w) sig.add(*w);
  sig.add(*vscale).add(*vout).add_scalar("eps", eps);
  run_gated(
      "rmsnorm_scale", sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::rmsnorm_scale(*vx, w, eps, *vscale, *vout, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(rmsnorm_scale_chain(x, weight, scale, eps)); });
  return out;
}

at::Tensor rmsnorm_tanh_residual(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& y,
                                 const std::optional<at::Tensor>& weight, double eps) {
  const c10::OptionalDeviceGuard device_guard(y.device());
  const auto vres = input_view(residual), vgate = input_view(gate), vy = input_view(y);
  const std::optional<TensorView> vweight = weight ? input_view(*weight) : std::nullopt;
  if (!vres || !vgate || !vy || (weight && !vweight) || y.dim() == 0 || !same_dtype_and_device(y, residual) ||
      !same_dtype_and_device(y, gate) || (weight && !same_dtype_and_device(y, *weight)))
    return rmsnorm_tanh_residual_chain(residual, gate, y, weight, eps);
  at::Tensor out = at::empty(y.sizes(), y.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  const TensorView* w = vweight ? &*vweight : nullptr;
  if (!vout || !dfuse::can_use_rmsnorm_tanh_residual(*vres, *vgate, *vy, w, eps, *vout))
    return rmsnorm_tanh_residual_chain(residual, gate, y, weight, eps);
  dfuse::Signature sig("diffusion.rmsnorm_tanh_residual");
  sig.add(*vres).add(*vgate).add(*vy);
  if (w) sig.add(*w);
  sig.add(*vout).add_scalar("eps", eps);
  run_gated(
      "rmsnorm_tanh_residual", sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::rmsnorm_tanh_residual(*vres, *vgate, *vy, w, eps, *vout, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(rmsnorm_tanh_residual_chain(residual, gate, y, weight, eps)); });
  return out;
}

at::Tensor rmsnorm_scale_meta(const at::Tensor& x, const std::optional<at::Tensor>& weight, const at::Tensor& scale,
                              double eps) {
  return rmsnorm_scale_chain(x, weight, scale, eps);
}

at::Tensor rmsnorm_tanh_residual_meta(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& y,
                                      const std::optional<at::Tensor>& weight, double eps) {
  return rmsnorm_tanh_residual_chain(residual, gate, y, weight, eps);
}

// ---- per-head QK RMSNorm -------------------------------------------------------------------------

at::Tensor rms_norm_chain(RmsNormChain chain, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                          double eps) {
  switch (chain) {
    case RmsNormChain::torch_rms_norm: return torch_rms_norm(x, weight, eps);
    case RmsNormChain::diffusers_decomposed: return diffusers_rms_norm(x, weight, eps);
    case RmsNormChain::storage_dtype: break;
  }
  return storage_rms_norm(x, weight, eps);
}

std::tuple<at::Tensor, at::Tensor> qk_chain(RmsNormChain chain, const at::Tensor& q, const at::Tensor& k,
                                            const std::optional<at::Tensor>& q_weight,
                                            const std::optional<at::Tensor>& k_weight, double eps) {
  return {rms_norm_chain(chain, q, q_weight, eps), rms_norm_chain(chain, k, k_weight, eps)};
}

const char* qk_op_id(RmsNormChain chain) {
  switch (chain) {
    case RmsNormChain::torch_rms_norm: return "diffusion.qk_rmsnorm";
    case RmsNormChain::diffusers_decomposed: return "diffusion.qk_rmsnorm_native";
    case RmsNormChain::storage_dtype: return "diffusion.qk_rmsnorm_storage_dtype";
  }
  return "";
}

std::tuple<at::Tensor, at::Tensor> qk(RmsNormChain chain, const at::Tensor& q, const at::Tensor& k,
                                      const std::optional<at::Tensor>& q_weight,
                                      const std::optional<at::Tensor>& k_weight, double eps) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  const auto vq = input_view(q), vk = input_view(k);
  const std::optional<TensorView> vqw = q_weight ? input_view(*q_weight) : std::nullopt;
  const std::optional<TensorView> vkw = k_weight ? input_view(*k_weight) : std::nullopt;
  if (!vq || !vk || (q_weight && !vqw) || (k_weight && !vkw) || q.dim() == 0 || !same_dtype_and_device(q, k) ||
      q.sizes() != k.sizes() || (q_weight && !same_dtype_and_device(q, *q_weight)) ||
      (k_weight && !same_dtype_and_device(q, *k_weight)))
    return qk_chain(chain, q, k, q_weight, k_weight, eps);
  at::Tensor q_out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor k_out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vqo = view_of(q_out, q_out.mutable_data_ptr()), vko = view_of(k_out, k_out.mutable_data_ptr());
  const TensorView* qw = vqw ? &*vqw : nullptr;
  const TensorView* kw = vkw ? &*vkw : nullptr;
  if (!vqo || !vko || !dfuse::can_use_qk_rmsnorm(chain, *vq, *vk, qw, kw, eps, *vqo, *vko))
    return qk_chain(chain, q, k, q_weight, k_weight, eps);
  dfuse::Signature sig(qk_op_id(chain));
  sig.add(*vq).add(*vk);
  if (qw) sig.add(*qw);
  if (kw) sig.add(*kw);
  sig.add(*vqo).add_scalar("eps", eps);
  std::array<at::Tensor, 2> outs = {q_out, k_out};
  run_gated(
      qk_op_id(chain), sig, outs,
      [&](dfuse::Stream s) { dfuse::qk_rmsnorm(chain, *vq, *vk, qw, kw, eps, *vqo, *vko, s); },
      [&](std::span<at::Tensor> dst) {
        const auto [qn, kn] = qk_chain(chain, q, k, q_weight, k_weight, eps);
        dst[0].copy_(qn);
        dst[1].copy_(kn);
      });
  return {q_out, k_out};
}

std::tuple<at::Tensor, at::Tensor> qk_rmsnorm_native(const at::Tensor& q, const at::Tensor& k,
                                                     const std::optional<at::Tensor>& q_weight,
                                                     const std::optional<at::Tensor>& k_weight, double eps) {
  return qk(RmsNormChain::diffusers_decomposed, q, k, q_weight, k_weight, eps);
}

std::tuple<at::Tensor, at::Tensor> qk_rmsnorm(const at::Tensor& q, const at::Tensor& k,
                                              const std::optional<at::Tensor>& q_weight,
                                              const std::optional<at::Tensor>& k_weight, double eps) {
  return qk(RmsNormChain::torch_rms_norm, q, k, q_weight, k_weight, eps);
}

std::tuple<at::Tensor, at::Tensor> qk_rmsnorm_storage_dtype(const at::Tensor& q, const at::Tensor& k,
                                                            const std::optional<at::Tensor>& q_weight,
                                                            const std::optional<at::Tensor>& k_weight, double eps) {
  return qk(RmsNormChain::storage_dtype, q, k, q_weight, k_weight, eps);
}

std::tuple<at::Tensor, at::Tensor> qk_rmsnorm_storage_dtype_meta(const at::Tensor& q, const at::Tensor& k,
                                                                 const std::optional<at::Tensor>& q_weight,
                                                                 const std::optional<at::Tensor>& k_weight,
                                                                 double eps) {
  return qk_chain(RmsNormChain::storage_dtype, q, k, q_weight, k_weight, eps);
}

std::tuple<at::Tensor, at::Tensor> qk_rmsnorm_native_meta(const at::Tensor& q, const at::Tensor& k,
                                                          const std::optional<at::Tensor>& q_weight,
                                                          const std::optional<at::Tensor>& k_weight, double eps) {
  return qk_chain(RmsNormChain::diffusers_decomposed, q, k, q_weight, k_weight, eps);
}

std::tuple<at::Tensor, at::Tensor> qk_rmsnorm_meta(const at::Tensor& q, const at::Tensor& k,
                                                   const std::optional<at::Tensor>& q_weight,
                                                   const std::optional<at::Tensor>& k_weight, double eps) {
  return qk_chain(RmsNormChain::torch_rms_norm, q, k, q_weight, k_weight, eps);
}

at::Tensor rmsnorm_scale_shift_meta(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                                    const at::Tensor& scale, const at::Tensor& shift, double eps) {
  return scale_shift_chain(RmsNormChain::torch_rms_norm, x, weight, scale, shift, eps);
}

at::Tensor rmsnorm_decomposed_scale_shift_meta(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                                               const at::Tensor& scale, const at::Tensor& shift, double eps) {
  return scale_shift_chain(RmsNormChain::diffusers_decomposed, x, weight, scale, shift, eps);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("rmsnorm_scale_shift(Tensor x, Tensor? weight, Tensor scale, Tensor shift, float eps=1e-06) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def(
      "rmsnorm_decomposed_scale_shift(Tensor x, Tensor? weight, Tensor scale, Tensor shift, float eps=1e-06) -> "
      "Tensor",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "qk_rmsnorm_native(Tensor q, Tensor k, Tensor? q_weight, Tensor? k_weight, float eps=1e-06) -> (Tensor, "
      "Tensor)",
      {at::Tag::pt2_compliant_tag});
  m.def("rmsnorm_scale(Tensor x, Tensor? weight, Tensor scale, float eps=1e-06) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def(
      "rmsnorm_tanh_residual(Tensor residual, Tensor gate, Tensor y, Tensor? weight, float eps=1e-06) -> Tensor",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "qk_rmsnorm_storage_dtype(Tensor q, Tensor k, Tensor? q_weight, Tensor? k_weight, float eps=1e-06) -> "
      "(Tensor, Tensor)",
      {at::Tag::pt2_compliant_tag});
  m.def("qk_rmsnorm(Tensor q, Tensor k, Tensor? q_weight, Tensor? k_weight, float eps=1e-06) -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
}

// The same kernels serve CUDA and CPU tensors (the dfuse op picks its backend by device).
namespace {
void register_device_impls(torch::Library& m) {
  m.impl("qk_rmsnorm_storage_dtype", &qk_rmsnorm_storage_dtype);
  m.impl("rmsnorm_scale", &rmsnorm_scale);
  m.impl("rmsnorm_tanh_residual", &rmsnorm_tanh_residual);
  m.impl("rmsnorm_scale_shift", &rmsnorm_scale_shift);
  m.impl("rmsnorm_decomposed_scale_shift", &rmsnorm_decomposed_scale_shift);
  m.impl("qk_rmsnorm_native", &qk_rmsnorm_native);
  m.impl("qk_rmsnorm", &qk_rmsnorm);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("qk_rmsnorm_storage_dtype", &qk_rmsnorm_storage_dtype_meta);
  m.impl("rmsnorm_scale", &rmsnorm_scale_meta);
  m.impl("rmsnorm_tanh_residual", &rmsnorm_tanh_residual_meta);
  m.impl("rmsnorm_scale_shift", &rmsnorm_scale_shift_meta);
  m.impl("rmsnorm_decomposed_scale_shift", &rmsnorm_decomposed_scale_shift_meta);
  m.impl("qk_rmsnorm_native", &qk_rmsnorm_native_meta);
  m.impl("qk_rmsnorm", &qk_rmsnorm_meta);
}
