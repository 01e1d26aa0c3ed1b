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
//                             math="fp32_opmath", *, round_norm_before_rope=False) -> None, q and k
//                             written in place with the split chain
//     for (x, w) in ((q, q_weight), (k, k_weight)):
//       x = F.rms_norm(x, (D,), w, eps)                                   norm="torch_rms_norm"
//       x = diffusers RMSNorm: h = x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps);
//           h.to(w.dtype) * w (without w: h.to(x.dtype))                  norm="diffusers_decomposed"
//       x[:] = rope_rotate_half(x, cos, sin, math)
//   fused_qknorm_rope(q, k, q_weight, k_weight, eps, cos, sin, norm, math) -> (q_out, k_out)
//     the same chain out of place (q and k only read); q_out, k_out new contiguous tensors
//   fused_qknorm_rope_pack_kv(q, k, v, q_weight, k_weight, eps, cos, sin, norm, math) -> kv
//     q written in place with the chain; kv = torch.stack([chain(k), v], dim=-3), [..., 2, H, D]
// The outputs of the last two have their inputs' dtypes, so a weight must have its tensor's dtype and,
// with math="storage_dtype", cos and sin k's and q's dtype (else the chain would promote): a torch
// error otherwise.
// Contract: bit-exact against these chains. Inputs the kernel accepts (dfuse::can_use_<op>) run
// through the first-sight Gate (dfuse/policy/gate.h): the first call per signature runs the
// kernel and the ATen chain and compares bits; everything else runs the ATen chain. The out-of-place
// ops return new tensors and never write their inputs. The in-place ops verify from clones of what
// they write taken before the kernel runs, so a mismatch or a failed kernel still leaves q and k
// holding the chain's result.
// One exception, the spec's default form: fused_inplace_qknorm_rope with round_norm_before_rope=False
// (the True form is the exact one above) runs dfuse::fused_inplace_qknorm_rope_one_rounding on CUDA
// inputs it accepts (math="fp32_opmath"): the normalized value is not rounded before the RoPE, one
// rounding per element, close to the chain within the bound stated in dfuse/ops/rope.h (extra-high),
// so no bitwise Gate (python/tests/test_qknorm_rope_forms_torch.py measures it). CPU tensors and
// the inputs it refuses take the exact path, which is within that bound trivially.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

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
using dfuse::torch_binding::run_kernel;
using dfuse::torch_binding::stream_of;
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

dfuse::RmsNormChain parse_norm(std::string_view norm) {
  if (norm == "torch_rms_norm") return dfuse::RmsNormChain::torch_rms_norm;
  if (norm == "diffusers_decomposed") return dfuse::RmsNormChain::diffusers_decomposed;
  TORCH_CHECK(false, "dfuse qk-norm rope: norm must be \"torch_rms_norm\" or \"diffusers_decomposed\", "
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

// One call of a QK-norm + RoPE op: its operands, the parsed chain choices and the inputs' views
// (`viewable` false when one of them has none).
struct QkNormRopeCall {
  const at::Tensor& q;
  const at::Tensor& k;
  const std::optional<at::Tensor>& q_weight;
  const std::optional<at::Tensor>& k_weight;
  double eps;
  const at::Tensor& cos;
  const at::Tensor& sin;
  dfuse::RmsNormChain chain;
  dfuse::RopeMath math;
  std::optional<TensorView> vq, vk, vc, vs, vqw, vkw;
  bool viewable = false;

  QkNormRopeCall(const at::Tensor& q_, const at::Tensor& k_, const std::optional<at::Tensor>& q_weight_,
                 const std::optional<at::Tensor>& k_weight_, double eps_, const at::Tensor& cos_,
                 const at::Tensor& sin_, c10::string_view norm_name, c10::string_view math_name)
      : q(q_), k(k_), q_weight(q_weight_), k_weight(k_weight_), eps(eps_), cos(cos_), sin(sin_),
        chain(parse_norm(std::string_view(norm_name.data(), norm_name.size()))),
        math(parse_math(std::string_view(math_name.data(), math_name.size()))),
        vq(input_view(q_)), vk(input_view(k_)), vc(input_view(cos_)), vs(input_view(sin_)) {
    if (q_weight) vqw = input_view(*q_weight);
    if (k_weight) vkw = input_view(*k_weight);
    viewable = vq && vk && vc && vs && (!q_weight || vqw) && (!k_weight || vkw);
  }

  const TensorView* q_weight_view() const { return vqw ? &*vqw : nullptr; }
  const TensorView* k_weight_view() const { return vkw ? &*vkw : nullptr; }

  // The split chain of q_src and k_src into q_dst and k_dst.
  void chain_into(const at::Tensor& q_src, const at::Tensor& k_src, const at::Tensor& q_dst,
                  const at::Tensor& k_dst) const {
    qknorm_rope_eager(q_src, k_src, q_weight, k_weight, eps, cos, sin, chain, math, q_dst, k_dst);
  }

  // The Gate signature: the inputs' views, then `outputs`, then eps and the chain choices.
  dfuse::Signature signature(const char* op, std::initializer_list<const TensorView*> outputs) const {
    dfuse::Signature sig(op);
    sig.add(*vq).add(*vk).add(*vc).add(*vs);
    if (vqw) sig.add(*vqw);
    if (vkw) sig.add(*vkw);
    for (const TensorView* out : outputs) sig.add(*out);
    sig.add_scalar("q_weight", vqw.has_value()).add_scalar("k_weight", vkw.has_value());
    sig.add_scalar("eps", eps).add_scalar("storage_dtype", math == dfuse::RopeMath::storage_dtype);
    sig.add_scalar("diffusers_decomposed", chain == dfuse::RmsNormChain::diffusers_decomposed);
    return sig;
  }
};

void fused_inplace_qknorm_rope(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& q_weight,
                               const std::optional<at::Tensor>& k_weight, double eps, const at::Tensor& cos,
                               const at::Tensor& sin, c10::string_view norm_name, c10::string_view math_name,
                               bool round_norm_before_rope) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  const QkNormRopeCall call(q, k, q_weight, k_weight, eps, cos, sin, norm_name, math_name);
  // The spec's default form: close, so the kernel runs without the bitwise Gate.
  if (!round_norm_before_rope && q.is_cuda() && call.math == dfuse::RopeMath::fp32_opmath && call.viewable &&
      dfuse::can_use_fused_inplace_qknorm_rope_one_rounding(call.chain, *call.vq, *call.vk, call.q_weight_view(),
                                                            call.k_weight_view(), eps, *call.vc, *call.vs)) {
    run_kernel("fused_inplace_qknorm_rope_one_rounding", [&] {
      dfuse::fused_inplace_qknorm_rope_one_rounding(call.chain, *call.vq, *call.vk, call.q_weight_view(),
                                                    call.k_weight_view(), eps, *call.vc, *call.vs, stream_of(q));
    });
    return;
  }
  if (!call.viewable ||
      !dfuse::can_use_fused_inplace_qknorm_rope(call.chain, *call.vq, *call.vk, call.q_weight_view(),
                                                call.k_weight_view(), eps, *call.vc, *call.vs, call.math)) {
    call.chain_into(q, k, q, k);
    return;
  }
  dfuse::Signature sig = call.signature("diffusion.fused_inplace_qknorm_rope", {});
  // The outputs are q and k themselves. On first sight they are cloned before the kernel runs, and
  // the chain reads the clones from then on (the verification's reference, and the fallback after a
  // mismatch or a failed kernel).
  std::array<at::Tensor, 2> outs = {q, k};
  std::optional<std::pair<at::Tensor, at::Tensor>> pristine;
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) {
        dfuse::fused_inplace_qknorm_rope(call.chain, *call.vq, *call.vk, call.q_weight_view(), call.k_weight_view(),
                                         eps, *call.vc, *call.vs, call.math, s);
      },
      [&](std::span<at::Tensor> dst) {
        call.chain_into(pristine ? pristine->first : q, pristine ? pristine->second : k, dst[0], dst[1]);
      },
      [&] { pristine.emplace(q.clone(), k.clone()); });
}

// An output of the out-of-place forms has its input x's dtype, as the chain's result has when x's
// weight has x's dtype and, with math storage_dtype, the tables too (else the chain promotes).
void check_keeps_dtype(const char* op, const char* name, const at::Tensor& x, const char* weight_name,
                       const std::optional<at::Tensor>& weight, const at::Tensor& cos, const at::Tensor& sin,
                       dfuse::RopeMath math) {
  TORCH_CHECK(!weight || weight->scalar_type() == x.scalar_type(), "dfuse ", op, ": ", weight_name,
              " must have ", name, "'s dtype ", x.scalar_type(), " (the output keeps it), got ",
              weight->scalar_type());
  TORCH_CHECK(math == dfuse::RopeMath::fp32_opmath ||
                  (cos.scalar_type() == x.scalar_type() && sin.scalar_type() == x.scalar_type()),
              "dfuse ", op, ": with math=\"storage_dtype\" cos and sin must have ", name, "'s dtype ",
              x.scalar_type(), " (the output keeps it), got ", cos.scalar_type(), " and ", sin.scalar_type());
}

void check_out_of_place(const at::Tensor& q, const at::Tensor& k, const std::optional<at::Tensor>& q_weight,
                        const std::optional<at::Tensor>& k_weight, const at::Tensor& cos, const at::Tensor& sin,
                        dfuse::RopeMath math) {
  check_keeps_dtype("fused_qknorm_rope", "q", q, "q_weight", q_weight, cos, sin, math);
  check_keeps_dtype("fused_qknorm_rope", "k", k, "k_weight", k_weight, cos, sin, math);
}

std::tuple<at::Tensor, at::Tensor> fused_qknorm_rope(const at::Tensor& q, const at::Tensor& k,
                                                     const std::optional<at::Tensor>& q_weight,
                                                     const std::optional<at::Tensor>& k_weight, double eps,
                                                     const at::Tensor& cos, const at::Tensor& sin,
                                                     c10::string_view norm_name, c10::string_view math_name) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  const QkNormRopeCall call(q, k, q_weight, k_weight, eps, cos, sin, norm_name, math_name);
  check_out_of_place(q, k, q_weight, k_weight, cos, sin, call.math);
  std::array<at::Tensor, 2> outs = {at::empty(q.sizes(), q.options()), at::empty(k.sizes(), k.options())};
  const auto chain = [&](std::span<at::Tensor> dst) { call.chain_into(q, k, dst[0], dst[1]); };
  const auto vqo = view_of(outs[0], outs[0].mutable_data_ptr()), vko = view_of(outs[1], outs[1].mutable_data_ptr());
  if (!call.viewable || !vqo || !vko ||
      !dfuse::can_use_fused_qknorm_rope(call.chain, *call.vq, *call.vk, call.q_weight_view(), call.k_weight_view(),
                                        eps, *call.vc, *call.vs, call.math, *vqo, *vko)) {
    chain(outs);
    return {outs[0], outs[1]};
  }
  dfuse::Signature sig = call.signature("diffusion.fused_qknorm_rope", {&*vqo, &*vko});
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) {
        dfuse::fused_qknorm_rope(call.chain, *call.vq, *call.vk, call.q_weight_view(), call.k_weight_view(), eps,
                                 *call.vc, *call.vs, call.math, *vqo, *vko, s);
      },
      chain);
  return {outs[0], outs[1]};
}

// k's sizes with the 2 of torch.stack([k, v], dim=-3) inserted before the heads.
template <typename Size>
c10::SmallVector<Size, 5> kv_shape(c10::ArrayRef<Size> k_sizes) {
  c10::SmallVector<Size, 5> shape(k_sizes.begin(), k_sizes.end());
  shape.insert(shape.end() - 2, Size(2));
  return shape;
}

void check_pack_kv(const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& k_weight,
                   const at::Tensor& cos, const at::Tensor& sin, dfuse::RopeMath math) {
  TORCH_CHECK(k.dim() >= 2, "dfuse fused_qknorm_rope_pack_kv: k must be [..., H, D], got ", k.sym_sizes());
  TORCH_CHECK(v.sym_sizes().equals(k.sym_sizes()) && v.scalar_type() == k.scalar_type(),
              "dfuse fused_qknorm_rope_pack_kv: v must have k's shape ", k.sym_sizes(), " and dtype ",
              k.scalar_type(), ", got ", v.sym_sizes(), " ", v.scalar_type());
  check_keeps_dtype("fused_qknorm_rope_pack_kv", "k", k, "k_weight", k_weight, cos, sin, math);
}

at::Tensor fused_qknorm_rope_pack_kv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     const std::optional<at::Tensor>& q_weight,
                                     const std::optional<at::Tensor>& k_weight, double eps, const at::Tensor& cos,
                                     const at::Tensor& sin, c10::string_view norm_name, c10::string_view math_name) {
  const c10::OptionalDeviceGuard device_guard(q.device());
  const QkNormRopeCall call(q, k, q_weight, k_weight, eps, cos, sin, norm_name, math_name);
  check_pack_kv(k, v, k_weight, cos, sin, call.math);
  at::Tensor kv = at::empty(kv_shape(k.sizes()), k.options());
  // q is written in place: on first sight it is cloned before the kernel runs, and the chain reads
  // the clone from then on (as fused_inplace_qknorm_rope's verification).
  std::array<at::Tensor, 2> outs = {q, kv};
  std::optional<at::Tensor> pristine_q;
  const auto chain = [&](std::span<at::Tensor> dst) {
    call.chain_into(pristine_q ? *pristine_q : q, k, dst[0], dst[1].select(-3, 0));
    dst[1].select(-3, 1).copy_(v);
  };
  const auto vv = input_view(v), vkv = view_of(kv, kv.mutable_data_ptr());
  if (!call.viewable || !vv || !vkv ||
      !dfuse::can_use_fused_qknorm_rope_pack_kv(call.chain, *call.vq, *call.vk, *vv, call.q_weight_view(),
                                                call.k_weight_view(), eps, *call.vc, *call.vs, call.math, *vkv)) {
    chain(outs);
    return kv;
  }
  dfuse::Signature sig = call.signature("diffusion.fused_qknorm_rope_pack_kv", {&*vv, &*vkv});
  run_gated(
      sig.op().c_str(), sig, outs,
      [&](dfuse::Stream s) {
        dfuse::fused_qknorm_rope_pack_kv(call.chain, *call.vq, *call.vk, *vv, call.q_weight_view(),
                                         call.k_weight_view(), eps, *call.vc, *call.vs, call.math, *vkv, s);
      },
      chain, [&] { pristine_q = q.clone(); });
  return kv;
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
                                    c10::string_view, c10::string_view, bool) {}

std::tuple<at::Tensor, at::Tensor> fused_qknorm_rope_meta(const at::Tensor& q, const at::Tensor& k,
                                                          const std::optional<at::Tensor>& q_weight,
                                                          const std::optional<at::Tensor>& k_weight, double,
                                                          const at::Tensor& cos, const at::Tensor& sin,
                                                          c10::string_view norm_name, c10::string_view math_name) {
  parse_norm(std::string_view(norm_name.data(), norm_name.size()));
  const dfuse::RopeMath math = parse_math(std::string_view(math_name.data(), math_name.size()));
  check_out_of_place(q, k, q_weight, k_weight, cos, sin, math);
  return {at::empty_symint(q.sym_sizes(), q.options()), at::empty_symint(k.sym_sizes(), k.options())};
}

at::Tensor fused_qknorm_rope_pack_kv_meta(const at::Tensor&, const at::Tensor& k, const at::Tensor& v,
                                          const std::optional<at::Tensor>&, const std::optional<at::Tensor>& k_weight,
                                          double, const at::Tensor& cos, const at::Tensor& sin,
                                          c10::string_view norm_name, c10::string_view math_name) {
  parse_norm(std::string_view(norm_name.data(), norm_name.size()));
  const dfuse::RopeMath math = parse_math(std::string_view(math_name.data(), math_name.size()));
  check_pack_kv(k, v, k_weight, cos, sin, math);
  return at::empty_symint(kv_shape(k.sym_sizes()), k.options());
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("rope_rotate_half(Tensor x, Tensor cos, Tensor sin, str math=\"fp32_opmath\") -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("rope_interleaved_pairs(Tensor x, Tensor cos, Tensor sin) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("interleaved_rope_fp64(Tensor q, Tensor k, Tensor freqs_cos, Tensor freqs_sin) -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("fused_inplace_qknorm_rope(Tensor(a!) q, Tensor(b!) k, Tensor? q_weight, Tensor? k_weight, float eps, "
        "Tensor cos, Tensor sin, str norm=\"torch_rms_norm\", str math=\"fp32_opmath\", *, "
        "bool round_norm_before_rope=False) -> ()",
        {at::Tag::pt2_compliant_tag});
  m.def("fused_qknorm_rope(Tensor q, Tensor k, Tensor? q_weight, Tensor? k_weight, float eps, Tensor cos, "
        "Tensor sin, str norm=\"torch_rms_norm\", str math=\"fp32_opmath\") -> (Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("fused_qknorm_rope_pack_kv(Tensor(a!) q, Tensor k, Tensor v, Tensor? q_weight, Tensor? k_weight, "
        "float eps, Tensor cos, Tensor sin, str norm=\"torch_rms_norm\", str math=\"fp32_opmath\") -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

// The same kernels serve CUDA and CPU tensors (the dfuse op picks its backend by device).
namespace {
void register_device_impls(torch::Library& m) {
  m.impl("rope_rotate_half", &rope_rotate_half);
  m.impl("rope_interleaved_pairs", &rope_interleaved_pairs);
  m.impl("interleaved_rope_fp64", &interleaved_rope_fp64);
  m.impl("fused_inplace_qknorm_rope", &fused_inplace_qknorm_rope);
  m.impl("fused_qknorm_rope", &fused_qknorm_rope);
  m.impl("fused_qknorm_rope_pack_kv", &fused_qknorm_rope_pack_kv);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("rope_rotate_half", &rope_rotate_half_meta);
  m.impl("rope_interleaved_pairs", &rope_interleaved_pairs_meta);
  m.impl("interleaved_rope_fp64", &interleaved_rope_fp64_meta);
  m.impl("fused_inplace_qknorm_rope", &fused_inplace_qknorm_rope_meta);
  m.impl("fused_qknorm_rope", &fused_qknorm_rope_meta);
  m.impl("fused_qknorm_rope_pack_kv", &fused_qknorm_rope_pack_kv_meta);
}
