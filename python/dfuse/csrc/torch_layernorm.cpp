// torch.ops.dfuse, LayerNorm ops of the normalization family (a fragment of the library
// torch_ops.cpp defines):
//   layernorm_modulate(x, scale, shift, eps=1e-6)
//     F.layer_norm(x, (x.size(-1),), eps=eps) * (1 + scale) + shift
//   layernorm_folded_modulate(x, scale, shift, eps=1e-6)     request-gated (quality "extra-high")
//     F.layer_norm(x, (D,), weight=(1 + scale).reshape(D), bias=shift.reshape(D), eps): close to the
//     layernorm_modulate chain (not rounded between the norm and the modulate), bit-exact against
//     this F.layer_norm call, which is its Gate reference; one scale/shift row, else the lossless chain
//   qk_head_layernorm(q, k, q_weight, q_bias, k_weight, k_bias, eps) -> (q_out, k_out)
//     F.layer_norm(q, (Dh,), q_weight, q_bias, eps), F.layer_norm(k, (Dh,), k_weight, k_bias, eps)
//   fp32_layernorm_bf16(x, weight, bias, eps)
//     F.layer_norm(x.float(), (D,), weight, bias, eps).to(x.dtype)    (diffusers FP32LayerNorm)
// Contract: bit-exact against the eager chain as model code writes it (at::layer_norm, then mul and
// add). The fused kernels reproduce the LayerNorm path aten 2.11 takes for each input (vectorized
// or generic, by the last dim % 4 and the operands' alignment), so every new signature (dtypes, shapes, strides,
// alignment, eps, device, SM) goes through the first-sight Gate: the first call runs the fused
// kernel and the chain and compares bits, a mismatch sends the signature to the chain for good.
// Inputs the kernels do not accept (dfuse::can_use_<op>: mixed dtypes, scale broadcasting x to a
// larger shape, ...) run the chain. The Meta implementation runs the chain on
// meta tensors, which gives the chain's exact shape and dtype.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <span>
#include <tuple>

#include "dfuse/ops/norm.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "tensor_views.h"

namespace {

using dfuse::TensorView;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::view_of;

// F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift, as model code writes it.
at::Tensor layernorm_modulate_chain(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                                    double eps) {
  const at::Tensor normalized = at::layer_norm_symint(x, {x.sym_size(-1)}, {}, {}, eps);
  return at::add(at::mul(normalized, at::add(scale, 1)), shift);
}

struct ModulateViews {
  TensorView x, scale, shift;
};

// x, scale and shift as dfuse views when a fused LayerNorm + modulate op can be asked about them
// (x of rank >= 1, scale and shift of x's dtype and device); nullopt: the caller keeps the chain.
std::optional<ModulateViews> modulate_views(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  const auto vx = input_view(x), vscale = input_view(scale), vshift = input_view(shift);
  if (!vx || !vscale || !vshift || x.dim() == 0 || scale.scalar_type() != x.scalar_type() ||
      shift.scalar_type() != x.scalar_type() || scale.device() != x.device() || shift.device() != x.device())
    return std::nullopt;
  return ModulateViews{*vx, *vscale, *vshift};
}

at::Tensor layernorm_modulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps) {
  const c10::OptionalDeviceGuard device_guard(x.device());
  const auto v = modulate_views(x, scale, shift);
  if (!v) return layernorm_modulate_chain(x, scale, shift, eps);
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  if (!vout || !dfuse::can_use_layernorm_modulate(v->x, v->scale, v->shift, eps, *vout))
    return layernorm_modulate_chain(x, scale, shift, eps);
  dfuse::Signature sig("diffusion.layernorm_modulate");
  sig.add(v->x).add(v->scale).add(v->shift).add(*vout).add_scalar("eps", eps);
  run_gated(
      "layernorm_modulate", sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::layernorm_modulate(v->x, v->scale, v->shift, eps, *vout, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(layernorm_modulate_chain(x, scale, shift, eps)); });
  return out;
}

// q = norm_q(q); k = norm_k(k) with nn.LayerNorm(head_dim) modules, as model code writes it.
std::tuple<at::Tensor, at::Tensor> qk_head_layernorm_chain(const at::Tensor& q, const at::Tensor& k,
                                                           const std::optional<at::Tensor>& q_weight,
                                                           const std::optional<at::Tensor>& q_bias,
                                                           const std::optional<at::Tensor>& k_weight,
                                                           const std::optional<at::Tensor>& k_bias, double eps) {
  return {at::layer_norm_symint(q, {q.sym_size(-1)}, q_weight, q_bias, eps),
          at::layer_norm_symint(k, {k.sym_size(-1)}, k_weight, k_bias, eps)};
}

// The view of an optional affine tensor: {present, view}; present and no view means "run the chain".
struct OptionalView {
  bool ok = true;
  std::optional<TensorView> view;
  const TensorView* ptr() const { return view ? &*view : nullptr; }
};

OptionalView optional_view(const std::optional<at::Tensor>& t, const at::Tensor& x) {
  if (!t || !t->defined()) return {};
  if (t->scalar_type() != x.scalar_type() || t->device() != x.device()) return {false, std::nullopt};
  const auto v = input_view(*t);
  return {v.has_value(), v};
}

std::tuple<at::Tensor, at::Tensor> qk_head_layernorm(const at::Tensor& q, const at::Tensor& k,
                                                     const std::optional<at::Tensor>& q_weight,
                                                     const std::optional<at::Tensor>& q_bias,
                                                     const std::optional<at::Tensor>& k_weight,
                                                     const std::optional<at::Tensor>& k_bias, double eps) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  const auto chain = [&] { return qk_head_layernorm_chain(q, k, q_weight, q_bias, k_weight, k_bias, eps); };
  const auto vq = input_view(q), vk = input_view(k);
  const OptionalView qw = optional_view(q_weight, q), qb = optional_view(q_bias, q), kw = optional_view(k_weight, k),
                     kb = optional_view(k_bias, k);
  if (!vq || !vk || q.dim() == 0 || k.dim() == 0 || k.scalar_type() != q.scalar_type() || k.device() != q.device() ||
      !qw.ok || !qb.ok || !kw.ok || !kb.ok)
    return chain();
  at::Tensor q_out = at::empty(q.sizes(), q.options().memory_format(at::MemoryFormat::Contiguous));
  at::Tensor k_out = at::empty(k.sizes(), k.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vq_out = view_of(q_out, q_out.mutable_data_ptr()), vk_out = view_of(k_out, k_out.mutable_data_ptr());
  if (!vq_out || !vk_out ||
      !dfuse::can_use_qk_head_layernorm(*vq, *vk, qw.ptr(), qb.ptr(), kw.ptr(), kb.ptr(), eps, *vq_out, *vk_out))
    return chain();
  dfuse::Signature sig("diffusion.qk_head_layernorm");
  sig.add(*vq).add(*vk);
  for (const OptionalView* v : {&qw, &qb, &kw, &kb}) {
    if (v->view) sig.add(*v->view);
    else sig.add_scalar("absent", 0.0);
  }
  sig.add(*vq_out).add(*vk_out).add_scalar("eps", eps);
  std::array<at::Tensor, 2> outs = {q_out, k_out};
  run_gated(
      "qk_head_layernorm", sig, outs,
      [&](dfuse::Stream s) {
        dfuse::qk_head_layernorm(*vq, *vk, qw.ptr(), qb.ptr(), kw.ptr(), kb.ptr(), eps, *vq_out, *vk_out, s);
      },
      [&](std::span<at::Tensor> dst) {
        const auto [qr, kr] = chain();
        dst[0].copy_(qr);
        dst[1].copy_(kr);
      });
  return {q_out, k_out};
}

std::tuple<at::Tensor, at::Tensor> qk_head_layernorm_meta(const at::Tensor& q, const at::Tensor& k,
                                                          const std::optional<at::Tensor>& q_weight,
                                                          const std::optional<at::Tensor>& q_bias,
                                                          const std::optional<at::Tensor>& k_weight,
                                                          const std::optional<at::Tensor>& k_bias, double eps) {
  return qk_head_layernorm_chain(q, k, q_weight, q_bias, k_weight, k_bias, eps);
}

// F.layer_norm(x.float(), (D,), weight, bias, eps).to(x.dtype), as diffusers' FP32LayerNorm writes it.
at::Tensor fp32_layernorm_chain(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                                const std::optional<at::Tensor>& bias, double eps) {
  const auto as_float = [](const std::optional<at::Tensor>& t) -> std::optional<at::Tensor> {
    if (!t || !t->defined()) return std::nullopt;
    return t->to(at::kFloat);
  };
  return at::layer_norm_symint(x.to(at::kFloat), {x.sym_size(-1)}, as_float(weight), as_float(bias), eps)
      .to(x.scalar_type());
}

at::Tensor fp32_layernorm_bf16(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                               const std::optional<at::Tensor>& bias, double eps) {
  const c10::OptionalDeviceGuard device_guard(x.device());
  const auto chain = [&] { return fp32_layernorm_chain(x, weight, bias, eps); };
  const auto vx = input_view(x);
  const auto affine = [&](const std::optional<at::Tensor>& t) -> OptionalView {
    if (!t || !t->defined()) return {};
    if (t->scalar_type() != at::kFloat || t->device() != x.device()) return {false, std::nullopt};
    const auto v = input_view(*t);
    return {v.has_value(), v};
  };
  const OptionalView w = affine(weight), b = affine(bias);
  if (!vx || x.dim() == 0 || !w.ok || !b.ok) return chain();
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  if (!vout || !dfuse::can_use_fp32_layernorm_bf16(*vx, w.ptr(), b.ptr(), eps, *vout)) return chain();
  dfuse::Signature sig("diffusion.fp32_layernorm_bf16");
  sig.add(*vx);
  for (const OptionalView* v : {&w, &b}) {
    if (v->view) sig.add(*v->view);
    else sig.add_scalar("absent", 0.0);
  }
  sig.add(*vout).add_scalar("eps", eps);
  run_gated(
      "fp32_layernorm_bf16", sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::fp32_layernorm_bf16(*vx, w.ptr(), b.ptr(), eps, *vout, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(chain()); });
  return out;
}

at::Tensor fp32_layernorm_bf16_meta(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                                    const std::optional<at::Tensor>& bias, double eps) {
  return fp32_layernorm_chain(x, weight, bias, eps);
}

// The request-gated fold as torch computes it: F.layer_norm(x, (D,), weight=(1 + scale).reshape(D),
// bias=shift.reshape(D), eps).
at::Tensor layernorm_folded_chain(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps) {
  const c10::SymInt d = x.sym_size(-1);
  return at::layer_norm_symint(x, {d}, at::add(scale, 1).reshape_symint({d}), shift.reshape_symint({d}), eps);
}

at::Tensor layernorm_folded_modulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                                     double eps) {
  const c10::OptionalDeviceGuard device_guard(x.device());
  const auto v = modulate_views(x, scale, shift);
  if (!v) return layernorm_modulate_chain(x, scale, shift, eps);
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  // Layouts the fold does not take (a scale/shift row per batch, ...) keep the lossless chain.
  if (!vout || !dfuse::can_use_layernorm_folded_modulate(v->x, v->scale, v->shift, eps, *vout))
    return layernorm_modulate_chain(x, scale, shift, eps);
  dfuse::Signature sig("diffusion.layernorm_folded_modulate");
  sig.add(v->x).add(v->scale).add(v->shift).add(*vout).add_scalar("eps", eps);
  run_gated(
      "layernorm_folded_modulate", sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::layernorm_folded_modulate(v->x, v->scale, v->shift, eps, *vout, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(layernorm_folded_chain(x, scale, shift, eps)); });
  return out;
}

at::Tensor layernorm_modulate_meta(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                                   double eps) {
  return layernorm_modulate_chain(x, scale, shift, eps);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("layernorm_modulate(Tensor x, Tensor scale, Tensor shift, float eps=1e-06) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("qk_head_layernorm(Tensor q, Tensor k, Tensor? q_weight, Tensor? q_bias, Tensor? k_weight, "
        "Tensor? k_bias, float eps) -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("layernorm_folded_modulate(Tensor x, Tensor scale, Tensor shift, float eps=1e-06) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("fp32_layernorm_bf16(Tensor x, Tensor? weight, Tensor? bias, float eps) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

// The same kernels serve CUDA and CPU tensors (the dfuse op picks its backend by device).
namespace {
void register_device_impls(torch::Library& m) {
  m.impl("layernorm_modulate", &layernorm_modulate);
  m.impl("qk_head_layernorm", &qk_head_layernorm);
  m.impl("fp32_layernorm_bf16", &fp32_layernorm_bf16);
  m.impl("layernorm_folded_modulate", &layernorm_folded_modulate);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("layernorm_modulate", &layernorm_modulate_meta);
  m.impl("qk_head_layernorm", &qk_head_layernorm_meta);
  m.impl("fp32_layernorm_bf16", &fp32_layernorm_bf16_meta);
  m.impl("layernorm_folded_modulate", &layernorm_modulate_meta);
}
