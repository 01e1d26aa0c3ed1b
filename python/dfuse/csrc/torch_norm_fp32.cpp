// torch.ops.dfuse, the request-gated (quality "extra-high") norm + epilogue ops with fp32
// internals (a fragment of the library torch_ops.cpp defines):
//   norm_scale_shift(x, scale, shift, norm, weight=None, bias=None, eps=1e-6)
//     norm(x) * (1 + scale) + shift, norm "layer_norm" (F.layer_norm(x, (D,), weight, bias, eps)) or
//     "rms_norm" (F.rms_norm(x, (D,), weight, eps)); scale/shift per batch, per token, per frame,
//     0-d / [1] scalars, chunk(6) views
//   rmsnorm_modulate_fp32(x, scale, shift, weight=None, eps=1e-6)
//     LTX-2's RMSNorm(x) * (1 + scale) + shift, RMSNorm diffusers' module (x * torch.rsqrt(
//     x.float().pow(2).mean(-1, keepdim=True) + eps), .to(weight.dtype) * weight)
//   rmsnorm_tanh_residual_fp32(residual, gate, y, weight=None, eps=1e-6)
//     residual + torch.tanh(gate) * RMSNorm(y), RMSNorm = Z-Image's y * torch.rsqrt(y.pow(2).mean(-1,
//     keepdim=True) + eps) * weight
// Contract: close to the lossless chains (each op rounded to the storage dtype; bounds in
// dfuse/ops/norm.h and dfuse/ops/rmsnorm.h), and bit-exact against the op's definition, the chain on
// float copies rounded once (the *_fp32_chain functions below; Wan's form for norm_scale_shift).
// That definition is the Gate's reference: the first call per signature compares the kernel with it
// bit for bit (aten's LayerNorm/RMSNorm path for a misaligned bf16 x differs from its float copy's,
// so such signatures run the definition from then on). Inputs the kernels do not take (mixed dtypes:
// an fp32 scale with a bf16 x, as Wan hands it over; rows over 8192) and CPU tensors run the
// definition, which accepts them. The Meta implementation runs it on meta tensors.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <span>
#include <string_view>

#include "dfuse/ops/norm.h"
#include "dfuse/ops/rmsnorm.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "tensor_views.h"

namespace {

using dfuse::NormKind;
using dfuse::TensorView;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::view_of;

NormKind parse_norm(c10::string_view norm) {
  if (norm == "layer_norm") return NormKind::layer_norm;
  if (norm == "rms_norm") return NormKind::rms_norm;
  TORCH_CHECK(false, "dfuse norm_scale_shift: norm must be \"layer_norm\" or \"rms_norm\", got \"", norm, "\"");
}

std::optional<at::Tensor> to_float(const std::optional<at::Tensor>& t) {
  if (!t || !t->defined()) return std::nullopt;
  return t->to(at::kFloat);
}

// v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * weight on a float v: diffusers' RMSNorm
// module and Z-Image's RMSNorm, both on float tensors.
at::Tensor float_rms_norm(const at::Tensor& v, const std::optional<at::Tensor>& weight, double eps) {
  at::Tensor n = at::mul(v, at::rsqrt(at::add(at::mean(at::pow(v, 2), {-1}, /*keepdim=*/true), eps)));
  if (const auto w = to_float(weight)) n = at::mul(n, *w);
  return n;
}

// (n * (1 + scale.float()) + shift.float()).to(dtype)
at::Tensor modulate_float(const at::Tensor& n, const at::Tensor& scale, const at::Tensor& shift, at::ScalarType dtype) {
  return at::add(at::mul(n, at::add(scale.to(at::kFloat), 1)), shift.to(at::kFloat)).to(dtype);
}

// (norm(x.float(), (D,), weight.float(), bias.float(), eps) * (1 + scale.float()) + shift.float())
//     .to(x.dtype)
at::Tensor norm_scale_shift_fp32_chain(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                                       NormKind norm, const std::optional<at::Tensor>& weight,
                                       const std::optional<at::Tensor>& bias, double eps) {
  const at::Tensor xf = x.to(at::kFloat);
  const c10::SymInt d = x.sym_size(-1);
  const at::Tensor n = norm == NormKind::layer_norm
                           ? at::layer_norm_symint(xf, {d}, to_float(weight), to_float(bias), eps)
                           : at::rms_norm_symint(xf, {d}, to_float(weight), eps);
  return modulate_float(n, scale, shift, x.scalar_type());
}

// LTX-2: (RMSNorm(x.float()) * (1 + scale.float()) + shift.float()).to(x.dtype), diffusers' RMSNorm
at::Tensor rmsnorm_modulate_fp32_chain(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                                       const std::optional<at::Tensor>& weight, double eps) {
  return modulate_float(float_rms_norm(x.to(at::kFloat), weight, eps), scale, shift, x.scalar_type());
}

// (residual.float() + torch.tanh(gate.float()) * RMSNorm(y.float())).to(y.dtype)
at::Tensor rmsnorm_tanh_residual_fp32_chain(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& y,
                                            const std::optional<at::Tensor>& weight, double eps) {
  const at::Tensor n = float_rms_norm(y.to(at::kFloat), weight, eps);
  return at::add(residual.to(at::kFloat), at::mul(at::tanh(gate.to(at::kFloat)), n)).to(y.scalar_type());
}

// The view of an optional tensor of x's dtype and device: {usable, view}; not usable: run the chain.
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

// A view of `t` when it has x's dtype and device.
std::optional<TensorView> operand_view(const at::Tensor& t, const at::Tensor& x) {
  if (t.scalar_type() != x.scalar_type() || t.device() != x.device()) return std::nullopt;
  return input_view(t);
}

at::Tensor modulate_fp32(const char* op, const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                         NormKind norm, const std::optional<at::Tensor>& weight,
                         const std::optional<at::Tensor>& bias, double eps) {
  const c10::OptionalDeviceGuard device_guard(x.device());
  const bool ltx2 = std::string_view(op) == "rmsnorm_modulate_fp32";
  const auto chain = [&] {
    return ltx2 ? rmsnorm_modulate_fp32_chain(x, scale, shift, weight, eps)
                : norm_scale_shift_fp32_chain(x, scale, shift, norm, weight, bias, eps);
  };
  const auto vx = input_view(x), vscale = operand_view(scale, x), vshift = operand_view(shift, x);
  const OptionalView vw = optional_view(weight, x), vb = optional_view(bias, x);
  if (!vx || !vscale || !vshift || !vw.ok || !vb.ok || x.dim() == 0) return chain();
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  if (!vout || !(ltx2 ? dfuse::can_use_rmsnorm_modulate_fp32(*vx, vw.ptr(), eps, *vscale, *vshift, *vout)
                      : dfuse::can_use_norm_scale_shift(norm, *vx, vw.ptr(), vb.ptr(), eps, *vscale, *vshift, *vout)))
    return chain();
  dfuse::Signature sig(ltx2 ? "diffusion.rmsnorm_modulate_fp32" : "diffusion.norm_scale_shift");
  sig.add(*vx).add(*vscale).add(*vshift).add(*vout).add_scalar("eps", eps).add_scalar("norm", double(int(norm)));
  if (vw.view) sig.add(*vw.view);
  if (vb.view) sig.add(*vb.view);
  run_gated(
      op, sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) {
        if (ltx2)
          dfuse::rmsnorm_modulate_fp32(*vx, vw.ptr(), eps, *vscale, *vshift, *vout, s);
        else
          dfuse::norm_scale_shift(norm, *vx, vw.ptr(), vb.ptr(), eps, *vscale, *vshift, *vout, s);
      },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(chain()); });
  return out;
}

// F.rms_norm takes no bias: one given with rms_norm is an error, never silently dropped.
NormKind checked_norm(c10::string_view norm, const std::optional<at::Tensor>& bias) {
  const NormKind kind = parse_norm(norm);
  TORCH_CHECK(kind == NormKind::layer_norm || !bias || !bias->defined(),
              "dfuse norm_scale_shift: rms_norm has no bias (F.rms_norm(x, (D,), weight, eps))");
  return kind;
}

at::Tensor norm_scale_shift(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                            c10::string_view norm, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, double eps) {
  return modulate_fp32("norm_scale_shift", x, scale, shift, checked_norm(norm, bias), weight, bias, eps);
}

at::Tensor rmsnorm_modulate_fp32(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                                 const std::optional<at::Tensor>& weight, double eps) {
  return modulate_fp32("rmsnorm_modulate_fp32", x, scale, shift, NormKind::rms_norm, weight, std::nullopt, eps);
}

at::Tensor rmsnorm_tanh_residual_fp32(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& y,
                                      const std::optional<at::Tensor>& weight, double eps) {
  const c10::OptionalDeviceGuard device_guard(y.device());
  const auto chain = [&] { return rmsnorm_tanh_residual_fp32_chain(residual, gate, y, weight, eps); };
  const auto vy = input_view(y), vr = operand_view(residual, y), vg = operand_view(gate, y);
  const OptionalView vw = optional_view(weight, y);
  if (!vy || !vr || !vg || !vw.ok || y.dim() == 0) return chain();
  at::Tensor out = at::empty(y.sizes(), y.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  if (!vout || !dfuse::can_use_rmsnorm_tanh_residual_fp32(*vr, *vg, *vy, vw.ptr(), eps, *vout)) return chain();
  dfuse::Signature sig("diffusion.rmsnorm_tanh_residual_fp32");
  sig.add(*vr).add(*vg).add(*vy).add(*vout).add_scalar("eps", eps);
  if (vw.view) sig.add(*vw.view);
  run_gated(
      "rmsnorm_tanh_residual_fp32", sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::rmsnorm_tanh_residual_fp32(*vr, *vg, *vy, vw.ptr(), eps, *vout, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(chain()); });
  return out;
}

at::Tensor norm_scale_shift_meta(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                                 c10::string_view norm, const std::optional<at::Tensor>& weight,
                                 const std::optional<at::Tensor>& bias, double eps) {
  return norm_scale_shift_fp32_chain(x, scale, shift, checked_norm(norm, bias), weight, bias, eps);
}


}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("norm_scale_shift(Tensor x, Tensor scale, Tensor shift, str norm, Tensor? weight=None, Tensor? bias=None, "
        "float eps=1e-06) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("rmsnorm_modulate_fp32(Tensor x, Tensor scale, Tensor shift, Tensor? weight=None, float eps=1e-06) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("rmsnorm_tanh_residual_fp32(Tensor residual, Tensor gate, Tensor y, Tensor? weight=None, float eps=1e-06) "
        "-> Tensor",
        {at::Tag::pt2_compliant_tag});
}

// The same kernels serve CUDA and CPU tensors (the dfuse op picks its backend by device).
namespace {
void register_device_impls(torch::Library& m) {
  m.impl("norm_scale_shift", &norm_scale_shift);
  m.impl("rmsnorm_modulate_fp32", &rmsnorm_modulate_fp32);
  m.impl("rmsnorm_tanh_residual_fp32", &rmsnorm_tanh_residual_fp32);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("norm_scale_shift", &norm_scale_shift_meta);
  m.impl("rmsnorm_modulate_fp32", &rmsnorm_modulate_fp32_chain);
  m.impl("rmsnorm_tanh_residual_fp32", &rmsnorm_tanh_residual_fp32_chain);
}
