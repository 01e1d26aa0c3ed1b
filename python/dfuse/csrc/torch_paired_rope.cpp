// torch.ops.dfuse, the paired Q/K RoPE ops of LTX-2, LTX-2.5 and Helios (a fragment of the library
// torch_ops.cpp defines):
//   ltx2_qknorm_split_rope(q, k, q_weight, k_weight, eps, q_cos, q_sin, k_cos=None, k_sin=None)
//       -> (q_out, k_out)
//     LTX-2's attention QK-norm + split RoPE (diffusers LTX2AudioVideoAttnProcessor,
//     rope_type="split"), for (x, w, cos, sin) in ((q, q_weight, q_cos, q_sin), (k, k_weight, k_cos,
//     k_sin)); k_cos/k_sin default to q's tables (key_rotary_emb=None):
//       x = F.rms_norm(x, (C,), w, eps)                    torch.nn.RMSNorm(heads * head_dim)
//       b, h, t, _ = cos.shape
//       x = x.reshape(b, t, h, -1).swapaxes(1, 2)
//       split_x = x.reshape(*x.shape[:-1], 2, r).float()
//       out = split_x * cos.unsqueeze(-2)
//       out[..., :1, :].addcmul_(-sin.unsqueeze(-2), split_x[..., 1:, :])
//       out[..., 1:, :].addcmul_(sin.unsqueeze(-2), split_x[..., :1, :])
//       out = out.reshape(*out.shape[:-2], 2 * r).swapaxes(1, 2).reshape(b, t, -1).to(x.dtype)
//   ltx25_decoder_rope(q, k, cos_t, sin_t, cos_h, sin_h, cos_w, sin_w) -> (q_out, k_out)
//     the LTX-2.5 diffusion decoder's LTX2VideoVaeRotaryPosEmbed3D on q and k [B, T, H, W, heads, D],
//     from cached per-axis tables [N_a, d_a / 2] (the module's angles.cos(), angles.sin() per axis):
//       for each axis a: pairs = x[..., c0:c0+d_a].reshape(..., d_a // 2, 2)
//         even, odd = pairs[..., 0].float(), pairs[..., 1].float()   (cos, sin broadcast along axis a)
//         rotated_a = torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).reshape(...).to(x.dtype)
//       torch.cat([rotated_t, rotated_h, rotated_w], -1)
//   helios_qk_rope(q, k, freqs) -> None, q and k written in place
//     Helios' apply_rotary_emb_transposed (diffusers HeliosAttnProcessor) on query and key:
//       x_1, x_2 = x.unflatten(-1, (-1, 2)).unbind(-1)
//       cos, sin = freqs.unsqueeze(-2).chunk(2, dim=-1)
//       out[..., 0::2] = x_1 * cos[..., 0::2] - x_2 * sin[..., 1::2]
//       out[..., 1::2] = x_1 * sin[..., 1::2] + x_2 * cos[..., 0::2]
//       x.copy_(out)
// Contract: bit-exact against these chains. Inputs the kernel accepts (dfuse::can_use_<op>) run through
// the first-sight Gate (dfuse/policy/gate.h); everything else runs the ATen chain. The LTX ops return
// new tensors and never write q and k; the in-place Helios op verifies from clones of q and k taken
// before the kernel runs, so a mismatch or a failed kernel still leaves q and k holding the chain's
// result.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <span>
#include <tuple>
#include <vector>

#include "dfuse/ops/rope.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "tensor_views.h"

namespace {

using dfuse::TensorView;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::view_of;

// diffusers' apply_split_rotary_emb for x [B, S, C] and tables [B, H, S, r].
at::Tensor split_rope_eager(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const at::ScalarType x_dtype = x.scalar_type();
  const int64_t b = cos.size(0), h = cos.size(1), t = cos.size(2);
  const at::Tensor heads = x.reshape({b, t, h, -1}).swapaxes(1, 2);
  const int64_t last = heads.size(-1), r = last / 2;
  std::vector<int64_t> split_shape(heads.sizes().begin(), heads.sizes().end() - 1);
  split_shape.push_back(2);
  split_shape.push_back(r);
  const at::Tensor split_x = heads.reshape(split_shape).to(at::kFloat);
  const at::Tensor first_x = split_x.narrow(-2, 0, 1), second_x = split_x.narrow(-2, 1, 1);
  const at::Tensor cos_u = cos.unsqueeze(-2), sin_u = sin.unsqueeze(-2);
  at::Tensor out = split_x * cos_u;
  out.narrow(-2, 0, 1).addcmul_(-sin_u, second_x);
  out.narrow(-2, 1, 1).addcmul_(sin_u, first_x);
  std::vector<int64_t> head_shape(split_shape.begin(), split_shape.end() - 2);
  head_shape.push_back(last);
  return out.reshape(head_shape).swapaxes(1, 2).reshape({b, t, -1}).to(x_dtype);
}

at::Tensor qknorm_split_rope_eager(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
                                   const at::Tensor& cos, const at::Tensor& sin) {
  return split_rope_eager(at::rms_norm(x, {x.size(-1)}, weight, eps), cos, sin);
}

std::tuple<at::Tensor, at::Tensor> ltx2_qknorm_split_rope(const at::Tensor& q, const at::Tensor& k,
                                                          const std::optional<at::Tensor>& q_weight,
                                                          const std::optional<at::Tensor>& k_weight, double eps,
                                                          const at::Tensor& q_cos, const at::Tensor& q_sin,
                                                          const std::optional<at::Tensor>& k_cos_arg,
                                                          const std::optional<at::Tensor>& k_sin_arg) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  const at::Tensor& k_cos = k_cos_arg ? *k_cos_arg : q_cos;
  const at::Tensor& k_sin = k_sin_arg ? *k_sin_arg : q_sin;
  const auto eager = [&](std::span<at::Tensor> dst) {
    dst[0].copy_(qknorm_split_rope_eager(q, q_weight, eps, q_cos, q_sin));
    dst[1].copy_(qknorm_split_rope_eager(k, k_weight, eps, k_cos, k_sin));
  };
  // Contiguous outputs in x's dtype, as the chain returns them.
  std::array<at::Tensor, 2> outs = {at::empty(q.sizes(), q.options()), at::empty(k.sizes(), k.options())};
  const auto vq = input_view(q), vk = input_view(k);
  const auto vqc = input_view(q_cos), vqs = input_view(q_sin), vkc = input_view(k_cos), vks = input_view(k_sin);
  std::optional<TensorView> vqw, vkw;
  if (q_weight) vqw = input_view(*q_weight);
  if (k_weight) vkw = input_view(*k_weight);
  const auto vqo = view_of(outs[0], outs[0].mutable_data_ptr()), vko = view_of(outs[1], outs[1].mutable_data_ptr());
  const bool viewable =
      vq && vk && vqc && vqs && vkc && vks && vqo && vko && (!q_weight || vqw) && (!k_weight || vkw);
  if (!viewable || !dfuse::can_use_ltx2_qknorm_split_rope(*vq, *vk, vqw ? &*vqw : nullptr, vkw ? &*vkw : nullptr,
                                                          eps, *vqc, *vqs, *vkc, *vks, *vqo, *vko)) {
    eager(outs);  // torch's own errors for what it refuses
    return {outs[0], outs[1]};
  }
  dfuse::Signature sig("diffusion.ltx2_qknorm_split_rope");
  for (const TensorView* v : {&*vq, &*vk, &*vqc, &*vqs, &*vkc, &*vks, &*vqo, &*vko}) sig.add(*v);
  if (vqw) sig.add(*vqw);
  if (vkw) sig.add(*vkw);
  sig.add_scalar("eps", eps);
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) {
        dfuse::ltx2_qknorm_split_rope(*vq, *vk, vqw ? &*vqw : nullptr, vkw ? &*vkw : nullptr, eps, *vqc, *vqs, *vkc,
                                      *vks, *vqo, *vko, s);
      },
      eager);
  return {outs[0], outs[1]};
}

// LTX2VideoVaeRotaryPosEmbed3D.forward with the per-axis tables given.
at::Tensor decoder_rope_eager(const at::Tensor& x, const std::array<const at::Tensor*, 6>& tables) {
  std::vector<at::Tensor> rotated;
  int64_t c0 = 0;
  for (int a = 0; a < 3; ++a) {
    const at::Tensor& cos_a = *tables[2 * a];
    const at::Tensor& sin_a = *tables[2 * a + 1];
    const int64_t da = 2 * cos_a.size(1);
    const at::Tensor x_a = x.narrow(-1, c0, da);
    std::vector<int64_t> pair_shape(x_a.sizes().begin(), x_a.sizes().end() - 1);
    pair_shape.push_back(da / 2);
    pair_shape.push_back(2);
    const at::Tensor pairs = x_a.reshape(pair_shape);
    const at::Tensor even = pairs.select(-1, 0).to(at::kFloat), odd = pairs.select(-1, 1).to(at::kFloat);
    std::vector<int64_t> table_shape = {1, 1, 1, 1, 1, da / 2};
    table_shape[1 + a] = cos_a.size(0);
    const at::Tensor cos = cos_a.reshape(table_shape), sin = sin_a.reshape(table_shape);
    rotated.push_back(at::stack({even * cos - odd * sin, even * sin + odd * cos}, -1).reshape(x_a.sizes()).to(x.scalar_type()));
    c0 += da;
  }
  return at::cat(rotated, -1);
}

std::tuple<at::Tensor, at::Tensor> ltx25_decoder_rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos_t,
                                                      const at::Tensor& sin_t, const at::Tensor& cos_h,
                                                      const at::Tensor& sin_h, const at::Tensor& cos_w,
                                                      const at::Tensor& sin_w) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  const std::array<const at::Tensor*, 6> tables = {&cos_t, &sin_t, &cos_h, &sin_h, &cos_w, &sin_w};
  const auto eager = [&](std::span<at::Tensor> dst) {
    dst[0].copy_(decoder_rope_eager(q, tables));
    dst[1].copy_(decoder_rope_eager(k, tables));
  };
  std::array<at::Tensor, 2> outs = {at::empty(q.sizes(), q.options()), at::empty(k.sizes(), k.options())};
  const auto vq = input_view(q), vk = input_view(k);
  std::array<std::optional<TensorView>, 6> vt;
  bool viewable = vq && vk;
  for (size_t i = 0; i < tables.size(); ++i) viewable = viewable && (vt[i] = input_view(*tables[i])).has_value();
  const auto vqo = view_of(outs[0], outs[0].mutable_data_ptr()), vko = view_of(outs[1], outs[1].mutable_data_ptr());
  if (!viewable || !vqo || !vko ||
      !dfuse::can_use_ltx25_decoder_rope(*vq, *vk, *vt[0], *vt[1], *vt[2], *vt[3], *vt[4], *vt[5], *vqo, *vko)) {
    eager(outs);  // torch's own errors for what it refuses
    return {outs[0], outs[1]};
  }
  dfuse::Signature sig("diffusion.ltx25_decoder_rope");
  sig.add(*vq).add(*vk).add(*vqo).add(*vko);
  for (const auto& v : vt) sig.add(*v);
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) {
        dfuse::ltx25_decoder_rope(*vq, *vk, *vt[0], *vt[1], *vt[2], *vt[3], *vt[4], *vt[5], *vqo, *vko, s);
      },
      eager);
  return {outs[0], outs[1]};
}

// apply_rotary_emb_transposed of x into a new tensor.
at::Tensor helios_rope_eager(const at::Tensor& x, const at::Tensor& freqs) {
  const auto halves = x.unflatten(-1, {-1, 2}).unbind(-1);
  const auto table = freqs.unsqueeze(-2).chunk(2, -1);
  const at::Tensor cos_even = table[0].slice(-1, 0, c10::nullopt, 2), sin_odd = table[1].slice(-1, 1, c10::nullopt, 2);
  at::Tensor out = at::empty_like(x);
  out.slice(-1, 0, c10::nullopt, 2).copy_(halves[0] * cos_even - halves[1] * sin_odd);
  out.slice(-1, 1, c10::nullopt, 2).copy_(halves[0] * sin_odd + halves[1] * cos_even);
  return out.type_as(x);
}

void helios_qk_rope(const at::Tensor& q, const at::Tensor& k, const at::Tensor& freqs) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  const auto vq = input_view(q), vk = input_view(k), vf = input_view(freqs);
  if (!vq || !vk || !vf || !dfuse::can_use_helios_qk_rope(*vq, *vk, *vf, *vq, *vk)) {
    const at::Tensor rq = helios_rope_eager(q, freqs), rk = helios_rope_eager(k, freqs);
    q.copy_(rq);
    k.copy_(rk);
    return;
  }
  dfuse::Signature sig("diffusion.helios_qk_rope");
  sig.add(*vq).add(*vk).add(*vf);
  // The outputs are q and k themselves. On first sight they are cloned before the kernel runs, and the
  // chain reads the clones from then on (the verification's reference, and the fallback after a
  // mismatch or a failed kernel).
  std::array<at::Tensor, 2> outs = {q, k};
  std::optional<std::pair<at::Tensor, at::Tensor>> pristine;
  run_gated(
      sig.op().c_str(), sig, outs, [&](dfuse::Stream s) { dfuse::helios_qk_rope(*vq, *vk, *vf, *vq, *vk, s); },
      [&](std::span<at::Tensor> dst) {
        const at::Tensor rq = helios_rope_eager(pristine ? pristine->first : q, freqs);
        const at::Tensor rk = helios_rope_eager(pristine ? pristine->second : k, freqs);
        dst[0].copy_(rq);
        dst[1].copy_(rk);
      },
      [&] { pristine.emplace(q.clone(), k.clone()); });
}

void helios_qk_rope_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&) {}

std::tuple<at::Tensor, at::Tensor> ltx25_decoder_rope_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor&,
                                                           const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                           const at::Tensor&, const at::Tensor&) {
  return {at::empty_symint(q.sym_sizes(), q.options()), at::empty_symint(k.sym_sizes(), k.options())};
}

std::tuple<at::Tensor, at::Tensor> ltx2_qknorm_split_rope_meta(const at::Tensor& q, const at::Tensor& k,
                                                               const std::optional<at::Tensor>&,
                                                               const std::optional<at::Tensor>&, double,
                                                               const at::Tensor&, const at::Tensor&,
                                                               const std::optional<at::Tensor>&,
                                                               const std::optional<at::Tensor>&) {
  return {at::empty_symint(q.sym_sizes(), q.options()), at::empty_symint(k.sym_sizes(), k.options())};
}

// The same kernels serve CUDA and CPU tensors (the dfuse op picks its backend by device; CPU
// tensors take the chain, gate_runner.h).
void register_device_impls(torch::Library& m) {
  m.impl("ltx2_qknorm_split_rope", &ltx2_qknorm_split_rope);
  m.impl("ltx25_decoder_rope", &ltx25_decoder_rope);
  m.impl("helios_qk_rope", &helios_qk_rope);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("ltx2_qknorm_split_rope(Tensor q, Tensor k, Tensor? q_weight, Tensor? k_weight, float eps, Tensor q_cos, "
        "Tensor q_sin, Tensor? k_cos=None, Tensor? k_sin=None) -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("ltx25_decoder_rope(Tensor q, Tensor k, Tensor cos_t, Tensor sin_t, Tensor cos_h, Tensor sin_h, Tensor cos_w, "
        "Tensor sin_w) -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("helios_qk_rope(Tensor(a!) q, Tensor(b!) k, Tensor freqs) -> ()", {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("ltx2_qknorm_split_rope", &ltx2_qknorm_split_rope_meta);
  m.impl("ltx25_decoder_rope", &ltx25_decoder_rope_meta);
  m.impl("helios_qk_rope", &helios_qk_rope_meta);
}
