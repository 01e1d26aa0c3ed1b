// torch.ops.dfuse, joint-QKV epilogues (a fragment of the library torch_ops.cpp defines):
//   qwen_qkv_epilogue(img_q, img_k, img_v, txt_q, txt_k, txt_v, norm_q_weight, norm_k_weight,
//                     norm_added_q_weight, norm_added_k_weight, eps, img_freqs, txt_freqs)
//       -> (joint_q, joint_k, joint_v)
//     Qwen-Image's QwenDoubleStreamAttnProcessor2_0 after the projections (heads [B, S, H, 128],
//     freqs complex64 [S, 64] as QwenEmbedRope returns them):
//       img_q, img_k = norm_q(img_q), norm_k(img_k); txt_q, txt_k = norm_added_q(txt_q), norm_added_k(txt_k)
//       x = apply_rotary_emb_qwen(x, freqs, use_real=False) for the four
//       torch.cat([txt_x, img_x], dim=1) for q, k, v
//   hunyuan_qkv_rope_pack(img_q, img_k, img_v, txt_q, txt_k, txt_v, norm_q_weight, norm_k_weight,
//                         norm_added_q_weight, norm_added_k_weight, eps, cos, sin)
//       -> (joint_q, joint_k, joint_v)
//     HunyuanVideo's HunyuanVideoAttnProcessor2_0 after the projections (cos, sin f32 [S_img, 128]):
//       img_q, img_k = norm_q(img_q), norm_k(img_k); txt_q, txt_k = norm_added_q(txt_q), norm_added_k(txt_k)
//       img_q, img_k = apply_rotary_emb(x, (cos, sin), sequence_dim=1)
//       torch.cat([img_x, txt_x], dim=1) for q, k, v
// The norms are diffusers' RMSNorm (x.to(float32).pow(2).mean(-1), x * rsqrt(var + eps), .to(w.dtype)
// * w). Contract: bit-exact against these chains. Inputs the kernel accepts (dfuse::can_use_<op>) run
// through the first-sight Gate (dfuse/policy/gate.h), everything else runs the ATen chain; the ops
// return new contiguous tensors and never write their inputs.
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

using Joint = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

// ---- the eager chains, as the attention processors write them -----------------------------------

// diffusers' RMSNorm.forward (normalization.py).
at::Tensor diffusers_rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps) {
  const at::Tensor variance = x.to(at::kFloat).pow(2).mean(-1, /*keepdim=*/true);
  at::Tensor h = x * at::rsqrt(variance + eps);
  if (!weight) return h.to(x.scalar_type());
  if (weight->scalar_type() == at::kHalf || weight->scalar_type() == at::kBFloat16) h = h.to(weight->scalar_type());
  return h * *weight;
}

// apply_rotary_emb_qwen(x, freqs_cis, use_real=False) (transformer_qwenimage.py).
at::Tensor qwen_rope(const at::Tensor& x, const at::Tensor& freqs_cis) {
  std::vector<int64_t> pairs(x.sizes().begin(), x.sizes().end() - 1);
  pairs.insert(pairs.end(), {-1, 2});
  const at::Tensor x_rotated = at::view_as_complex(x.to(at::kFloat).reshape(pairs));
  return at::view_as_real(x_rotated * freqs_cis.unsqueeze(1)).flatten(3).type_as(x);
}

// apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-1, sequence_dim=1) (embeddings.py).
at::Tensor diffusers_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const at::Tensor c = cos.unsqueeze(0).unsqueeze(2), s = sin.unsqueeze(0).unsqueeze(2);
  std::vector<int64_t> pairs(x.sizes().begin(), x.sizes().end() - 1);
  pairs.insert(pairs.end(), {-1, 2});
  const auto parts = x.reshape(pairs).unbind(-1);
  const at::Tensor x_rotated = at::stack({at::neg(parts[1]), parts[0]}, -1).flatten(3);
  return (x.to(at::kFloat) * c + x_rotated.to(at::kFloat) * s).to(x.scalar_type());
}

struct Heads {
  const at::Tensor &img_q, &img_k, &img_v, &txt_q, &txt_k, &txt_v;
  const std::optional<at::Tensor>&q_weight, &k_weight, &added_q_weight, &added_k_weight;
};

std::array<at::Tensor, 3> qwen_chain(const Heads& h, double eps, const at::Tensor& img_freqs,
                                     const at::Tensor& txt_freqs) {
  const at::Tensor img_q = qwen_rope(diffusers_rms_norm(h.img_q, h.q_weight, eps), img_freqs);
  const at::Tensor img_k = qwen_rope(diffusers_rms_norm(h.img_k, h.k_weight, eps), img_freqs);
  const at::Tensor txt_q = qwen_rope(diffusers_rms_norm(h.txt_q, h.added_q_weight, eps), txt_freqs);
  const at::Tensor txt_k = qwen_rope(diffusers_rms_norm(h.txt_k, h.added_k_weight, eps), txt_freqs);
  return {at::cat({txt_q, img_q}, 1), at::cat({txt_k, img_k}, 1), at::cat({h.txt_v, h.img_v}, 1)};
}

std::array<at::Tensor, 3> hunyuan_chain(const Heads& h, double eps, const at::Tensor& cos, const at::Tensor& sin) {
  const at::Tensor img_q = diffusers_rope(diffusers_rms_norm(h.img_q, h.q_weight, eps), cos, sin);
  const at::Tensor img_k = diffusers_rope(diffusers_rms_norm(h.img_k, h.k_weight, eps), cos, sin);
  const at::Tensor txt_q = diffusers_rms_norm(h.txt_q, h.added_q_weight, eps);
  const at::Tensor txt_k = diffusers_rms_norm(h.txt_k, h.added_k_weight, eps);
  return {at::cat({img_q, txt_q}, 1), at::cat({img_k, txt_k}, 1), at::cat({h.img_v, h.txt_v}, 1)};
}

// ---- the ops -----------------------------------------------------------------------------------------

// The views of the operands; nullopt when one of them has no TensorView.
struct Views {
  std::optional<TensorView> img_q, img_k, img_v, txt_q, txt_k, txt_v, q_w, k_w, aq_w, ak_w, table_a, table_b;
  bool complete = true;

  std::optional<TensorView> take(const at::Tensor& t) {
    auto v = input_view(t);
    complete = complete && v.has_value();
    return v;
  }
  std::optional<TensorView> take(const std::optional<at::Tensor>& t) { return t ? take(*t) : std::nullopt; }

  dfuse::QkvStream img() const {
    return {*img_q, *img_k, *img_v, q_w ? &*q_w : nullptr, k_w ? &*k_w : nullptr};
  }
  dfuse::QkvStream txt() const {
    return {*txt_q, *txt_k, *txt_v, aq_w ? &*aq_w : nullptr, ak_w ? &*ak_w : nullptr};
  }
  void sign(dfuse::Signature& sig) const {
    for (const auto* v : {&img_q, &img_k, &img_v, &txt_q, &txt_k, &txt_v, &table_a, &table_b}) sig.add(**v);
    for (const auto* v : {&q_w, &k_w, &aq_w, &ak_w}) {
      sig.add_scalar("weight", v->has_value());
      if (*v) sig.add(**v);
    }
  }
};

Views views_of(const Heads& h, const at::Tensor& table_a, const at::Tensor& table_b) {
  Views v;
  v.img_q = v.take(h.img_q);
  v.img_k = v.take(h.img_k);
  v.img_v = v.take(h.img_v);
  v.txt_q = v.take(h.txt_q);
  v.txt_k = v.take(h.txt_k);
  v.txt_v = v.take(h.txt_v);
  v.q_w = v.take(h.q_weight);
  v.k_w = v.take(h.k_weight);
  v.aq_w = v.take(h.added_q_weight);
  v.ak_w = v.take(h.added_k_weight);
  v.table_a = v.take(table_a);
  v.table_b = v.take(table_b);
  return v;
}

// Joint outputs [B, S_first + S_second, H, D] like the chain's cat, when the heads' shapes allow one.
std::optional<std::array<at::Tensor, 3>> joint_outputs(const at::Tensor& first, const at::Tensor& second) {
  if (first.dim() != 4 || second.dim() != 4) return std::nullopt;
  const std::array<int64_t, 4> sizes = {first.size(0), first.size(1) + second.size(1), first.size(2), first.size(3)};
  const auto opts = first.options();
  return std::array<at::Tensor, 3>{at::empty(sizes, opts), at::empty(sizes, opts), at::empty(sizes, opts)};
}

// The f32 [S, 128] view of a complex64 [S, 64] table (torch.view_as_real, pairs flattened).
std::optional<at::Tensor> real_table(const at::Tensor& freqs) {
  if (freqs.scalar_type() != at::kComplexFloat || freqs.dim() != 2 || freqs.is_conj()) return std::nullopt;
  return at::view_as_real(freqs).flatten(-2);
}

// The kernel into new joint outputs through the Gate when `can_use` accepts the views, else the chain.
template <typename CanUse, typename Kernel, typename Chain>
Joint run_joint(const char* op, const Views& v, double eps, std::array<at::Tensor, 3> outs, const CanUse& can_use,
                const Kernel& kernel, const Chain& chain) {
  std::array<std::optional<TensorView>, 3> vo;
  for (size_t k = 0; k < 3; ++k) vo[k] = view_of(outs[k], outs[k].mutable_data_ptr());
  if (!v.complete || !vo[0] || !vo[1] || !vo[2] || !can_use(*vo[0], *vo[1], *vo[2])) {
    const auto r = chain();  // torch's own errors for what it refuses
    return {r[0], r[1], r[2]};
  }
  dfuse::Signature sig(op);
  v.sign(sig);
  for (const auto& o : vo) sig.add(*o);
  sig.add_scalar("eps", eps);
  run_gated(
      op, sig, outs, [&](dfuse::Stream s) { kernel(*vo[0], *vo[1], *vo[2], s); },
      [&](std::span<at::Tensor> dst) {
        const auto r = chain();
        for (size_t k = 0; k < 3; ++k) dst[k].copy_(r[k]);
      });
  return {outs[0], outs[1], outs[2]};
}

Joint qwen_qkv_epilogue(const at::Tensor& img_q, const at::Tensor& img_k, const at::Tensor& img_v,
                        const at::Tensor& txt_q, const at::Tensor& txt_k, const at::Tensor& txt_v,
                        const std::optional<at::Tensor>& q_weight, const std::optional<at::Tensor>& k_weight,
                        const std::optional<at::Tensor>& added_q_weight,
                        const std::optional<at::Tensor>& added_k_weight, double eps, const at::Tensor& img_freqs,
                        const at::Tensor& txt_freqs) {
  const c10::OptionalDeviceGuard device_guard(img_q.device());
  const Heads h{img_q, img_k, img_v, txt_q, txt_k, txt_v, q_weight, k_weight, added_q_weight, added_k_weight};
  const auto chain = [&] { return qwen_chain(h, eps, img_freqs, txt_freqs); };
  const auto img_table = real_table(img_freqs), txt_table = real_table(txt_freqs);
  auto outs = joint_outputs(txt_q, img_q);
  if (!img_table || !txt_table || !outs) {
    const auto r = chain();
    return {r[0], r[1], r[2]};
  }
  const Views v = views_of(h, *img_table, *txt_table);
  return run_joint(
      "diffusion.qwen_qkv_epilogue", v, eps, *outs,
      [&](const TensorView& q, const TensorView& k, const TensorView& o) {
        return dfuse::can_use_qwen_qkv_epilogue(v.img(), v.txt(), eps, *v.table_a, *v.table_b, q, k, o);
      },
      [&](const TensorView& q, const TensorView& k, const TensorView& o, dfuse::Stream s) {
        dfuse::qwen_qkv_epilogue(v.img(), v.txt(), eps, *v.table_a, *v.table_b, q, k, o, s);
      },
      chain);
}

Joint hunyuan_qkv_rope_pack(const at::Tensor& img_q, const at::Tensor& img_k, const at::Tensor& img_v,
                            const at::Tensor& txt_q, const at::Tensor& txt_k, const at::Tensor& txt_v,
                            const std::optional<at::Tensor>& q_weight, const std::optional<at::Tensor>& k_weight,
                            const std::optional<at::Tensor>& added_q_weight,
                            const std::optional<at::Tensor>& added_k_weight, double eps, const at::Tensor& cos,
                            const at::Tensor& sin) {
  const c10::OptionalDeviceGuard device_guard(img_q.device());
  const Heads h{img_q, img_k, img_v, txt_q, txt_k, txt_v, q_weight, k_weight, added_q_weight, added_k_weight};
  const auto chain = [&] { return hunyuan_chain(h, eps, cos, sin); };
  auto outs = joint_outputs(img_q, txt_q);
  if (!outs) {
    const auto r = chain();
    return {r[0], r[1], r[2]};
  }
  const Views v = views_of(h, cos, sin);
  return run_joint(
      "diffusion.hunyuan_qkv_rope_pack", v, eps, *outs,
      [&](const TensorView& q, const TensorView& k, const TensorView& o) {
        return dfuse::can_use_hunyuan_qkv_rope_pack(v.img(), v.txt(), eps, *v.table_a, *v.table_b, q, k, o);
      },
      [&](const TensorView& q, const TensorView& k, const TensorView& o, dfuse::Stream s) {
        dfuse::hunyuan_qkv_rope_pack(v.img(), v.txt(), eps, *v.table_a, *v.table_b, q, k, o, s);
      },
      chain);
}

// Fake tensors: the joint outputs [B, S_first + S_second, H, D] of the first heads' dtype.
Joint joint_meta(const at::Tensor& first, const at::Tensor& second) {
  std::vector<c10::SymInt> sizes(first.sym_sizes().begin(), first.sym_sizes().end());
  sizes[1] = sizes[1] + second.sym_size(1);
  return {at::empty_symint(sizes, first.options()), at::empty_symint(sizes, first.options()),
          at::empty_symint(sizes, first.options())};
}

Joint qwen_qkv_epilogue_meta(const at::Tensor& img_q, const at::Tensor&, const at::Tensor&, const at::Tensor& txt_q,
                             const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                             const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                             const std::optional<at::Tensor>&, double, const at::Tensor&, const at::Tensor&) {
  return joint_meta(txt_q, img_q);
}

Joint hunyuan_qkv_rope_pack_meta(const at::Tensor& img_q, const at::Tensor&, const at::Tensor&,
                                 const at::Tensor& txt_q, const at::Tensor&, const at::Tensor&,
                                 const std::optional<at::Tensor>&, const std::optional<at::Tensor>&,
                                 const std::optional<at::Tensor>&, const std::optional<at::Tensor>&, double,
                                 const at::Tensor&, const at::Tensor&) {
  return joint_meta(img_q, txt_q);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("qwen_qkv_epilogue(Tensor img_q, Tensor img_k, Tensor img_v, Tensor txt_q, Tensor txt_k, Tensor txt_v, "
        "Tensor? norm_q_weight, Tensor? norm_k_weight, Tensor? norm_added_q_weight, Tensor? norm_added_k_weight, "
        "float eps, Tensor img_freqs, Tensor txt_freqs) -> (Tensor, Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("hunyuan_qkv_rope_pack(Tensor img_q, Tensor img_k, Tensor img_v, Tensor txt_q, Tensor txt_k, "
        "Tensor txt_v, Tensor? norm_q_weight, Tensor? norm_k_weight, Tensor? norm_added_q_weight, "
        "Tensor? norm_added_k_weight, float eps, Tensor cos, Tensor sin) -> (Tensor, Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
}

// The same kernels serve CUDA and CPU tensors (CPU tensors take the chain: gate_runner.h).
namespace {
void register_device_impls(torch::Library& m) {
  m.impl("qwen_qkv_epilogue", &qwen_qkv_epilogue);
  m.impl("hunyuan_qkv_rope_pack", &hunyuan_qkv_rope_pack);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("qwen_qkv_epilogue", &qwen_qkv_epilogue_meta);
  m.impl("hunyuan_qkv_rope_pack", &hunyuan_qkv_rope_pack_meta);
}
