// torch.ops.dfuse, rope family (a fragment of the library torch_ops.cpp defines):
//   rope_rotate_half(x, cos, sin, math="fp32_opmath")
//     rotate-half RoPE over the first R = cos.size(-1) channels of each head, the tail unchanged:
//       x_rot, x_pass = x[..., :R], x[..., R:]; x1, x2 = x_rot.chunk(2, -1)
//       x_rotated = torch.cat([-x2, x1], -1)
//       y = (x_rot.float() * cos + x_rotated.float() * sin).to(x.dtype)   math="fp32_opmath"
//       y = x_rot * cos + x_rotated * sin                                 math="storage_dtype"
//       torch.cat([y, x_pass], -1)
//   rope_interleaved_pairs(x, cos, sin)
//     diffusers' apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-1) (FLUX.1/2,
//     HunyuanVideo, LTX-Video, CogVideoX), with cos/sin already broadcastable to x:
//       x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
//       x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
//       (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
//   interleaved_rope_fp64(q, k, freqs_cos, freqs_sin) -> (q_out, k_out)
//     SANA-Video's paired RoPE with fp64 tables, for x in (q, k):
//       x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
//       cos, sin = freqs_cos[..., 0::2], freqs_sin[..., 1::2]
//       out = torch.empty_like(x); out[..., 0::2] = x1 * cos - x2 * sin; out[..., 1::2] = x1 * sin + x2 * cos
//   fused_inplace_qknorm_rope(q, k, q_weight, k_weight, eps, cos, sin, norm="torch_rms_norm",
//                             math="fp32_opmath") -> None, q and k written in place
//     for (x, w) in ((q, q_weight), (k, k_weight)):
//       x = F.rms_norm(x, (D,), w, eps)                                   norm="torch_rms_norm"
//       x = diffusers RMSNorm: h = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps);
//           h.to(w.dtype) * w (without w: h.to(x.dtype))                  norm="diffusers_decomposed"
//       x[:] = rope_rotate_half(x, cos, sin, math)
// Contract: bit-exact against these chains. Inputs the kernel accepts (dfuse::can_use_<op>) run
// through the first-sight Gate (dfuse/policy/gate.h): the first call per signature runs the
// kernel and the ATen chain and compares bits; everything else runs the ATen chain. The out-of-place
// ops return new tensors and never write their inputs. The in-place op verifies from clones of q
// and k taken before the kernel runs, so a mismatch or a failed kernel still leaves q and k holding
// the chain's result.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
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

dfuse::RopeMath parse_math(std::string_view math) {
  if (math == "fp32_opmath") return dfuse::RopeMath::fp32_opmath;
  if (math == "storage_dtype") return dfuse::RopeMath::storage_dtype;
  TORCH_CHECK(false, "dfuse rope_rotate_half: math must be \"fp32_opmath\" or \"storage_dtype\", got \"", math,
              "\"");
}

// ---- the eager chains, as model code writes them ---------------------------------------------------

at::Tensor rotate_half_rotated(const at::Tensor& x_rot) {
  const auto halves = x_rot.chunk(2, -1);
  return at::cat({at::neg(halves[1]), halves[0]}, -1);  // torch.cat([-x2, x1], dim=-1)
}

void rope_rotate_half_eager(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                            dfuse::RopeMath math, at::Tensor& out) {
  const int64_t rot = cos.size(-1), head = x.size(-1);
  TORCH_CHECK(rot > 0 && rot % 2 == 0 && rot <= head, "dfuse rope_rotate_half: cos.size(-1) must be even and in (0, ",
              head, "], got ", rot);
  const at::Tensor x_rot = x.narrow(-1, 0, rot);
  const at::Tensor x_rotated = rotate_half_rotated(x_rot);
  const at::Tensor y = math == dfuse::RopeMath::fp32_opmath
                           ? (x_rot.to(at::kFloat) * cos + x_rotated.to(at::kFloat) * sin).to(x.scalar_type())
                           : x_rot * cos + x_rotated * sin;
  if (rot < head)
    at::cat_out(out, {y, x.narrow(-1, rot, head - rot)}, -1);
  else
    out.copy_(y);
}

// diffusers' use_real_unbind_dim=-1 branch (flatten(-2) is its flatten(3) for any rank).
at::Tensor rope_interleaved_pairs_eager(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  std::vector<int64_t> pair_shape(x.sizes().begin(), x.sizes().end() - 1);
  pair_shape.insert(pair_shape.end(), {-1, 2});
  const auto parts = x.reshape(pair_shape).unbind(-1);
  const at::Tensor x_rotated = at::stack({at::neg(parts[1]), parts[0]}, -1).flatten(-2);
  return (x.to(at::kFloat) * cos + x_rotated.to(at::kFloat) * sin).to(x.scalar_type());
}

dfuse::RmsNormChain parse_norm(std::string_view norm) {
  if (norm == "torch_rms_norm") return dfuse::RmsNormChain::torch_rms_norm;
  if (norm == "diffusers_decomposed") return dfuse::RmsNormChain::diffusers_decomposed;
  TORCH_CHECK(false, "dfuse fused_inplace_qknorm_rope: norm must be \"torch_rms_norm\" or \"diffusers_decomposed\", "
              "got \"", norm, "\"");
}

// The RMSNorm module's forward, as torch.nn.RMSNorm (F.rms_norm) or diffusers' RMSNorm writes it.
at::Tensor rms_norm_eager(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
                          dfuse::RmsNormChain chain) {
  if (chain == dfuse::RmsNormChain::torch_rms_norm) return at::rms_norm(x, {x.size(-1)}, weight, eps);
  const at::Tensor variance = x.to(at::kFloat).pow(2).mean(-1, /*keepdim=*/true);
  at::Tensor h = x * at::rsqrt(variance + eps);
  if (!weight) return h.to(x.scalar_type());
  if (weight->scalar_type() == at::kHalf || weight->scalar_type() == at::kBFloat16) h = h.to(weight->scalar_type());
  return h * *weight;
}

void interleaved_rotated(const at::Tensor& x, const at::Tensor& freqs_cos, const at::Tensor& freqs_sin,
                         at::Tensor& out) {
  const auto pairs = x.unflatten(-1, {-1, 2}).unbind(-1);
  const at::Tensor& x1 = pairs[0];
  const at::Tensor& x2 = pairs[1];
  const at::Tensor cos = freqs_cos.slice(-1, 0, std::nullopt, 2);
  const at::Tensor sin = freqs_sin.slice(-1, 1, std::nullopt, 2);
  out.slice(-1, 0, std::nullopt, 2).copy_(x1 * cos - x2 * sin);
  out.slice(-1, 1, std::nullopt, 2).copy_(x1 * sin + x2 * cos);
}

// ---- the ops -------------------------------------------------------------------------------------

// dtype of the chain's result: x's for fp32_opmath (the final .to), the promoted dtype otherwise.
at::ScalarType rotate_half_dtype(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                 dfuse::RopeMath math) {
  if (math == dfuse::RopeMath::fp32_opmath) return x.scalar_type();
  return at::promote_types(at::promote_types(x.scalar_type(), cos.scalar_type()), sin.scalar_type());
}

at::Tensor rope_rotate_half(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                            c10::string_view math_name) {
  const dfuse::RopeMath math = parse_math(std::string_view(math_name.data(), math_name.size()));
  const c10::OptionalDeviceGuard device_guard(x.device());
  at::Tensor out = at::empty(x.sizes(), x.options().dtype(rotate_half_dtype(x, cos, sin, math)));
  const auto vx = input_view(x), vc = input_view(cos), vs = input_view(sin);
  const auto vo = view_of(out, out.mutable_data_ptr());
  if (!vx || !vc || !vs || !vo || !dfuse::can_use_rope_rotate_half(*vx, *vc, *vs, *vo, math)) {
    rope_rotate_half_eager(x, cos, sin, math, out);
    return out;
  }
  dfuse::Signature sig("diffusion.rope_rotate_half");
  sig.add(*vx).add(*vc).add(*vs).add(*vo).add_scalar("storage_dtype", math == dfuse::RopeMath::storage_dtype);
  run_gated(
      sig.op().c_str(), sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::rope_rotate_half(*vx, *vc, *vs, *vo, math, s); },
      [&](std::span<at::Tensor> dst) { rope_rotate_half_eager(x, cos, sin, math, dst[0]); });
  return out;
}

at::Tensor rope_interleaved_pairs(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const c10::OptionalDeviceGuard device_guard(x.device());
  at::Tensor out = at::empty(x.sizes(), x.options());  // contiguous, as the Meta impl
  const auto vx = input_view(x), vc = input_view(cos), vs = input_view(sin);
  const auto vo = view_of(out, out.mutable_data_ptr());
  if (!vx || !vc || !vs || !vo || !dfuse::can_use_rope_interleaved_pairs(*vx, *vc, *vs, *vo)) {
    out.copy_(rope_interleaved_pairs_eager(x, cos, sin));  // torch's own errors for what it refuses
    return out;
  }
  dfuse::Signature sig("diffusion.rope_interleaved_pairs");
  sig.add(*vx).add(*vc).add(*vs).add(*vo);
  run_gated(
      sig.op().c_str(), sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::rope_interleaved_pairs(*vx, *vc, *vs, *vo, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(rope_interleaved_pairs_eager(x, cos, sin)); });
  return out;
}

std::tuple<at::Tensor, at::Tensor> interleaved_rope_fp64(const at::Tensor& q, const at::Tensor& k,
                                                         const at::Tensor& freqs_cos, const at::Tensor& freqs_sin) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  std::array<at::Tensor, 2> outs = {at::empty_like(q), at::empty_like(k)};
  const auto eager = [&](std::span<at::Tensor> o) {
    interleaved_rotated(q, freqs_cos, freqs_sin, o[0]);
    interleaved_rotated(k, freqs_cos, freqs_sin, o[1]);
  };
  const auto vq = input_view(q), vk = input_view(k), vc = input_view(freqs_cos), vs = input_view(freqs_sin);
  const auto vqo = view_of(outs[0], outs[0].mutable_data_ptr()), vko = view_of(outs[1], outs[1].mutable_data_ptr());
  if (!vq || !vk || !vc || !vs || !vqo || !vko ||
      !dfuse::can_use_interleaved_rope_fp64(*vq, *vk, *vc, *vs, *vqo, *vko)) {
    eager(outs);
    return {outs[0], outs[1]};
  }
  dfuse::Signature sig("diffusion.interleaved_rope_fp64");
  for (const TensorView* v : {&*vq, &*vk, &*vc, &*vs, &*vqo, &*vko}) sig.add(*v);
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) { dfuse::interleaved_rope_fp64(*vq, *vk, *vc, *vs, *vqo, *vko, s); }, eager);
  return {outs[0], outs[1]};
}

// q and k normalized and rotated by the split chain, from `q_src`/`k_src`, written into q and k.
void qknorm_rope_eager(const at::Tensor& q_src, const at::Tensor& k_src, const std::optional<at::Tensor>& q_weight,
                       const std::optional<at::Tensor>& k_weight, double eps, const at::Tensor& cos,
                       const at::Tensor& sin, dfuse::RmsNormChain chain, dfuse::RopeMath math, const at::Tensor& q,
                       const at::Tensor& k) {
  for (const auto& [src, weight, dst] : {std::tuple{&q_src, &q_weight, &q}, std::tuple{&k_src, &k_weight, &k}}) {
    const at::Tensor normed = rms_norm_eager(*src, *weight, eps, chain);
    at::Tensor rotated = at::empty(normed.sizes(), normed.options().dtype(rotate_half_dtype(normed, cos, sin, math)));
    rope_rotate_half_eager(normed, cos, sin, math, rotated);
    dst->copy_(rotated);
  }
}

void fused_inplace_qknorm_rope(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& q_weight,
                               const std::optional<at::Tensor>& k_weight, double eps, const at::Tensor& cos,
                               const at::Tensor& sin, c10::string_view norm_name, c10::string_view math_name) {
  const dfuse::RmsNormChain chain = parse_norm(std::string_view(norm_name.data(), norm_name.size()));
  const dfuse::RopeMath math = parse_math(std::string_view(math_name.data(), math_name.size()));
  const c10::OptionalDeviceGuard device_guard(q.device());
  const auto vq = input_view(q), vk = input_view(k), vc = input_view(cos), vs = input_view(sin);
  std::optional<TensorView> vqw, vkw;
  if (q_weight) vqw = input_view(*q_weight);
  if (k_weight) vkw = input_view(*k_weight);
  const bool viewable = vq && vk && vc && vs && (!q_weight || vqw) && (!k_weight || vkw);
  if (!viewable || !dfuse::can_use_fused_inplace_qknorm_rope(chain, *vq, *vk, vqw ? &*vqw : nullptr,
                                                             vkw ? &*vkw : nullptr, eps, *vc, *vs, math)) {
    qknorm_rope_eager(q, k, q_weight, k_weight, eps, cos, sin, chain, math, q, k);
    return;
  }
  dfuse::Signature sig("diffusion.fused_inplace_qknorm_rope");
  sig.add(*vq).add(*vk).add(*vc).add(*vs);
  if (vqw) sig.add(*vqw);
  if (vkw) sig.add(*vkw);
  sig.add_scalar("eps", eps).add_scalar("storage_dtype", math == dfuse::RopeMath::storage_dtype);
  sig.add_scalar("diffusers_decomposed", chain == dfuse::RmsNormChain::diffusers_decomposed);
  // The outputs are q and k themselves. On first sight they are cloned before the kernel runs, and
  // the chain reads the clones from then on (the verification's reference, and the fallback after a
  // mismatch or a failed kernel).
  std::array<at::Tensor, 2> outs = {q, k};
  std::optional<std::pair<at::Tensor, at::Tensor>> pristine;
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) {
        dfuse::fused_inplace_qknorm_rope(chain, *vq, *vk, vqw ? &*vqw : nullptr, vkw ? &*vkw : nullptr, eps, *vc,
                                         *vs, math, s);
      },
      [&](std::span<at::Tensor> dst) {
        const at::Tensor& q_src = pristine ? pristine->first : q;
        const at::Tensor& k_src = pristine ? pristine->second : k;
        qknorm_rope_eager(q_src, k_src, q_weight, k_weight, eps, cos, sin, chain, math, dst[0], dst[1]);
      },
      [&] { pristine.emplace(q.clone(), k.clone()); });
}

at::Tensor rope_rotate_half_meta(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                                 c10::string_view math_name) {
  const dfuse::RopeMath math = parse_math(std::string_view(math_name.data(), math_name.size()));
  return at::empty_symint(x.sym_sizes(), x.options().dtype(rotate_half_dtype(x, cos, sin, math)));
}

at::Tensor rope_interleaved_pairs_meta(const at::Tensor& x, const at::Tensor&, const at::Tensor&) {
  return at::empty_symint(x.sym_sizes(), x.options());
}

std::tuple<at::Tensor, at::Tensor> interleaved_rope_fp64_meta(const at::Tensor& q, const at::Tensor& k,
                                                              const at::Tensor&, const at::Tensor&) {
  return {at::empty_like(q), at::empty_like(k)};
}

void fused_inplace_qknorm_rope_meta(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                    const std::optional<at::Tensor>&, double, const at::Tensor&, const at::Tensor&,
                                    c10::string_view, c10::string_view) {}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("rope_rotate_half(Tensor x, Tensor cos, Tensor sin, str math=\"fp32_opmath\") -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("rope_interleaved_pairs(Tensor x, Tensor cos, Tensor sin) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("interleaved_rope_fp64(Tensor q, Tensor k, Tensor freqs_cos, Tensor freqs_sin) -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("fused_inplace_qknorm_rope(Tensor(a!) q, Tensor(b!) k, Tensor? q_weight, Tensor? k_weight, float eps, "
        "Tensor cos, Tensor sin, str norm=\"torch_rms_norm\", str math=\"fp32_opmath\") -> ()",
        {at::Tag::pt2_compliant_tag});
}

// The same kernels serve CUDA and CPU tensors (the dfuse op picks its backend by device).
namespace {
void register_device_impls(torch::Library& m) {
  m.impl("rope_rotate_half", &rope_rotate_half);
  m.impl("rope_interleaved_pairs", &rope_interleaved_pairs);
  m.impl("interleaved_rope_fp64", &interleaved_rope_fp64);
  m.impl("fused_inplace_qknorm_rope", &fused_inplace_qknorm_rope);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("rope_rotate_half", &rope_rotate_half_meta);
  m.impl("rope_interleaved_pairs", &rope_interleaved_pairs_meta);
  m.impl("interleaved_rope_fp64", &interleaved_rope_fp64_meta);
  m.impl("fused_inplace_qknorm_rope", &fused_inplace_qknorm_rope_meta);
}
