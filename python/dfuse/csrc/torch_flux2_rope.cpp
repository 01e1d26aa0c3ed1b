// torch.ops.dfuse, FLUX.2's QK-norm + RoPE ops (a fragment of the library torch_ops.cpp defines):
//   flux2_strided_qknorm_rope(query, key, q_weight, k_weight, eps, cos, sin) -> (query, key)
//     Flux2ParallelSelfAttnProcessor (single-stream block) on the [B, S, H, D] views of the packed
//     to_qkv_mlp_proj output, cos/sin [S, D] as Flux2PosEmbed returns them:
//       query, key = F.rms_norm(query, (D,), q_weight, eps), F.rms_norm(key, (D,), k_weight, eps)
//       query, key = apply_rotary_emb(query, (cos, sin), sequence_dim=1), apply_rotary_emb(key, ...)
//   flux2_qkv_epilogue(query, key, value, encoder_query, encoder_key, encoder_value, q_weight, k_weight,
//                      added_q_weight, added_k_weight, eps, cos, sin) -> (query, key, value)
//     Flux2AttnProcessor (double-stream block) after the projections, heads [B, S, H, D], cos/sin
//     [S_txt + S_img, D]:
//       query, key = norm_q(query), norm_k(key); encoder_query, encoder_key = norm_added_q(...), norm_added_k(...)
//       query, key, value = torch.cat([encoder_x, x], dim=1) for each
//       query, key = apply_rotary_emb(query, (cos, sin), sequence_dim=1), apply_rotary_emb(key, ...)
// Every norm is torch.nn.RMSNorm (F.rms_norm). Contract: bit-exact against these chains. Inputs the
// kernel accepts (dfuse::can_use_<op>) run through the first-sight Gate (dfuse/policy/gate.h): aten's
// RMSNorm path depends on the views' layout, so each signature is verified against the ATen chain
// before the kernel serves it; everything else runs the ATen chain. The ops return new contiguous
// tensors and never write their inputs.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <tuple>

#include "dfuse/ops/rope.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "rope_chains.h"
#include "tensor_views.h"

namespace {

using dfuse::TensorView;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::rope_interleaved_pairs_eager;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::view_of;

// cos[None, :, None, :] of diffusers' apply_rotary_emb(..., sequence_dim=1), for tables [S, D].
at::Tensor sequence_dim_1(const at::Tensor& table) {
  TORCH_CHECK(table.dim() == 2, "dfuse: FLUX.2 RoPE tables are [S, D], got ", table.sizes());
  return table.unsqueeze(0).unsqueeze(2);
}

// torch.nn.RMSNorm(D)(x) (F.rms_norm) then apply_rotary_emb(x, (cos, sin), sequence_dim=1).
at::Tensor norm_rope_eager(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
                           const at::Tensor& cos4, const at::Tensor& sin4) {
  return rope_interleaved_pairs_eager(at::rms_norm(x, {x.size(-1)}, weight, eps), cos4, sin4);
}

std::optional<TensorView> optional_view(const std::optional<at::Tensor>& t, bool& viewable) {
  if (!t) return std::nullopt;
  auto v = input_view(*t);
  viewable = viewable && v.has_value();
  return v;
}

const TensorView* ptr(const std::optional<TensorView>& v) { return v ? &*v : nullptr; }

std::tuple<at::Tensor, at::Tensor> flux2_strided_qknorm_rope(const at::Tensor& query, const at::Tensor& key,
                                                             const std::optional<at::Tensor>& q_weight,
                                                             const std::optional<at::Tensor>& k_weight, double eps,
                                                             const at::Tensor& cos, const at::Tensor& sin) {
  const c10::OptionalDeviceGuard device_guard(query.device());
  const at::Tensor cos4 = sequence_dim_1(cos), sin4 = sequence_dim_1(sin);
  std::array<at::Tensor, 2> outs = {at::empty(query.sizes(), query.options()), at::empty(key.sizes(), key.options())};
  const auto eager = [&](std::span<at::Tensor> o) {
    o[0].copy_(norm_rope_eager(query, q_weight, eps, cos4, sin4));
    o[1].copy_(norm_rope_eager(key, k_weight, eps, cos4, sin4));
  };
  bool viewable = true;
  const auto vq = input_view(query), vk = input_view(key), vc = input_view(cos4), vs = input_view(sin4);
  const auto vqw = optional_view(q_weight, viewable), vkw = optional_view(k_weight, viewable);
  const auto vqo = view_of(outs[0], outs[0].mutable_data_ptr()), vko = view_of(outs[1], outs[1].mutable_data_ptr());
  viewable = viewable && vq && vk && vc && vs && vqo && vko;
  if (!viewable || !dfuse::can_use_flux2_strided_qknorm_rope(*vq, *vk, ptr(vqw), ptr(vkw), eps, *vc, *vs, *vqo, *vko)) {
    eager(outs);
    return {outs[0], outs[1]};
  }
  dfuse::Signature sig("diffusion.flux2_strided_qknorm_rope");
  sig.add(*vq).add(*vk).add(*vc).add(*vs).add(*vqo).add(*vko);
  if (vqw) sig.add(*vqw);
  if (vkw) sig.add(*vkw);
  sig.add_scalar("eps", eps).add_scalar("q_weight", vqw.has_value()).add_scalar("k_weight", vkw.has_value());
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) {
        dfuse::flux2_strided_qknorm_rope(*vq, *vk, ptr(vqw), ptr(vkw), eps, *vc, *vs, *vqo, *vko, s);
      },
      eager);
  return {outs[0], outs[1]};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flux2_qkv_epilogue(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, const at::Tensor& encoder_query,
    const at::Tensor& encoder_key, const at::Tensor& encoder_value, const std::optional<at::Tensor>& q_weight,
    const std::optional<at::Tensor>& k_weight, const std::optional<at::Tensor>& added_q_weight,
    const std::optional<at::Tensor>& added_k_weight, double eps, const at::Tensor& cos, const at::Tensor& sin) {
  const c10::OptionalDeviceGuard device_guard(query.device());
  const at::Tensor cos4 = sequence_dim_1(cos), sin4 = sequence_dim_1(sin);
  TORCH_CHECK(query.dim() == 4 && encoder_query.dim() == 4,
              "dfuse flux2_qkv_epilogue: heads are [B, S, H, D], got query ", query.sizes(), " and encoder_query ",
              encoder_query.sizes());
  std::vector<int64_t> joint(query.sizes().begin(), query.sizes().end());
  joint[1] = query.size(1) + encoder_query.size(1);
  std::array<at::Tensor, 3> outs = {at::empty(joint, query.options()), at::empty(joint, query.options()),
                                    at::empty(joint, query.options())};
  const auto eager = [&](std::span<at::Tensor> o) {
    const auto norm = [eps](const at::Tensor& x, const std::optional<at::Tensor>& w) {
      return at::rms_norm(x, {x.size(-1)}, w, eps);
    };
    const at::Tensor q = at::cat({norm(encoder_query, added_q_weight), norm(query, q_weight)}, 1);
    const at::Tensor k = at::cat({norm(encoder_key, added_k_weight), norm(key, k_weight)}, 1);
    o[0].copy_(rope_interleaved_pairs_eager(q, cos4, sin4));
    o[1].copy_(rope_interleaved_pairs_eager(k, cos4, sin4));
    at::cat_out(o[2], {encoder_value, value}, 1);
  };
  bool viewable = true;
  const auto viq = input_view(query), vik = input_view(key), viv = input_view(value);
  const auto vtq = input_view(encoder_query), vtk = input_view(encoder_key), vtv = input_view(encoder_value);
  const auto vc = input_view(cos4), vs = input_view(sin4);
  const auto vqw = optional_view(q_weight, viewable), vkw = optional_view(k_weight, viewable);
  const auto vaqw = optional_view(added_q_weight, viewable), vakw = optional_view(added_k_weight, viewable);
  std::array<std::optional<TensorView>, 3> vo;
  for (size_t i = 0; i < 3; ++i) vo[i] = view_of(outs[i], outs[i].mutable_data_ptr());
  viewable = viewable && viq && vik && viv && vtq && vtk && vtv && vc && vs && vo[0] && vo[1] && vo[2];
  if (!viewable || !dfuse::can_use_flux2_qkv_epilogue(*viq, *vik, *viv, *vtq, *vtk, *vtv, ptr(vqw), ptr(vkw),
                                                      ptr(vaqw), ptr(vakw), eps, *vc, *vs, *vo[0], *vo[1], *vo[2])) {
    eager(outs);
    return {outs[0], outs[1], outs[2]};
  }
  dfuse::Signature sig("diffusion.flux2_qkv_epilogue");
  for (const TensorView* v : std::initializer_list<const TensorView*>{&*viq, &*vik, &*viv, &*vtq, &*vtk, &*vtv, &*vc, &*vs,
                                                                     &*vo[0], &*vo[1], &*vo[2]})
    sig.add(*v);
  for (const auto* w : {&vqw, &vkw, &vaqw, &vakw}) {
    sig.add_scalar("weight", w->has_value());
    if (*w) sig.add(**w);
  }
  sig.add_scalar("eps", eps);
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) {
        dfuse::flux2_qkv_epilogue(*viq, *vik, *viv, *vtq, *vtk, *vtv, ptr(vqw), ptr(vkw), ptr(vaqw), ptr(vakw), eps,
                                  *vc, *vs, *vo[0], *vo[1], *vo[2], s);
      },
      eager);
  return {outs[0], outs[1], outs[2]};
}

std::tuple<at::Tensor, at::Tensor> flux2_strided_qknorm_rope_meta(const at::Tensor& query, const at::Tensor& key,
                                                                  const std::optional<at::Tensor>&,
                                                                  const std::optional<at::Tensor>&, double,
                                                                  const at::Tensor&, const at::Tensor&) {
  return {at::empty_symint(query.sym_sizes(), query.options()), at::empty_symint(key.sym_sizes(), key.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flux2_qkv_epilogue_meta(
    const at::Tensor& query, const at::Tensor&, const at::Tensor&, const at::Tensor& encoder_query,
    const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
    const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, double, const at::Tensor&,
    const at::Tensor&) {
  std::vector<c10::SymInt> joint(query.sym_sizes().begin(), query.sym_sizes().end());
  joint[1] = query.sym_size(1) + encoder_query.sym_size(1);
  return {at::empty_symint(joint, query.options()), at::empty_symint(joint, query.options()),
          at::empty_symint(joint, query.options())};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("flux2_strided_qknorm_rope(Tensor query, Tensor key, Tensor? q_weight, Tensor? k_weight, float eps, "
        "Tensor cos, Tensor sin) -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("flux2_qkv_epilogue(Tensor query, Tensor key, Tensor value, Tensor encoder_query, Tensor encoder_key, "
        "Tensor encoder_value, Tensor? q_weight, Tensor? k_weight, Tensor? added_q_weight, Tensor? added_k_weight, "
        "float eps, Tensor cos, Tensor sin) -> (Tensor, Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
}

// The same kernels serve CUDA and CPU tensors (CPU tensors take the ATen chain: gate_runner.h).
namespace {
void register_device_impls(torch::Library& m) {
  m.impl("flux2_strided_qknorm_rope", &flux2_strided_qknorm_rope);
  m.impl("flux2_qkv_epilogue", &flux2_qkv_epilogue);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("flux2_strided_qknorm_rope", &flux2_strided_qknorm_rope_meta);
  m.impl("flux2_qkv_epilogue", &flux2_qkv_epilogue_meta);
}
