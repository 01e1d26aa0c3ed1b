// Eager replicas of the rope family: the primitives' entry points and host loop, and the chains.
#include "dfuse/eager/rope.h"

#include <vector>

#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/data_movement.h"
#include "dfuse/eager/rms_norm.h"
#include "eager/rope_elementwise.h"

namespace dfuse::eager {

namespace {

void host_mixed(const detail::MixedParams& p, Stream) {
  const int64_t n = p.layout.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t off[3];
    p.layout.offsets(i, off);
    detail::mixed_apply(p, off);
  }
}
DFUSE_REGISTER_ENTRY(host, "eager.rope_mixed", &host_mixed);

void run_mixed(detail::MixedOp op, const TensorView& a, const TensorView* b, const TensorView& out,
               Stream stream) {
  const char* name = op == detail::MixedOp::cast              ? "eager.cast"
                     : op == detail::MixedOp::neg             ? "eager.neg"
                     : op == detail::MixedOp::addcmul_inplace ? "eager.addcmul_"
                                                              : "eager.promoted_binary";
  dfuse::detail::GuardList g(name);
  const std::initializer_list<DType> floating = {DType::bf16, DType::f16, DType::f32, DType::f64};
  g.dtype_in("a", a, floating);
  g.same_device("out", out, a, "a");
  if (op == detail::MixedOp::neg) g.same_dtype("out", out, a, "a");
  if (op == detail::MixedOp::cast) g.dtype_in("out", out, floating);
  if (op == detail::MixedOp::addcmul_inplace) {
    g.dtype_in("self", out, {DType::f32});
    g.dtype_in("tensor1", a, {DType::f32});
    g.dtype_in("tensor2", *b, {DType::f32});
  }
  if (b) {
    g.dtype_in("b", *b, floating);
    g.same_device("b", *b, a, "a");
    g.dtype_in("out", out, {DType::f32, DType::f64});
    // torch's promotion: f64 if either is f64, else f32 if either is f32 or they are bf16 and f16.
    const bool any_f64 = a.dtype() == DType::f64 || b->dtype() == DType::f64;
    const bool f32_result = a.dtype() == DType::f32 || b->dtype() == DType::f32 || a.dtype() != b->dtype();
    if (g.ok() && any_f64 && out.dtype() != DType::f64)
      g.fail("dtype", "an f64 operand promotes the result to f64, got an f32 out");
    else if (g.ok() && !any_f64 && !(f32_result && out.dtype() == DType::f32))
      g.fail("dtype", "a " + std::string(dtype_name(a.dtype())) + " and a " + std::string(dtype_name(b->dtype())) +
                          " operand promote to " + std::string(f32_result ? "f32" : dtype_name(a.dtype())) +
                          ", got an " + std::string(dtype_name(out.dtype())) + " out");
  }
  g.throw_if_failed();
  detail::MixedParams p;
  p.op = op;
  p.device = a.device().index;
  p.out_dtype = out.dtype();
  p.a_dtype = a.dtype();
  p.b_dtype = b ? b->dtype() : a.dtype();
  p.layout = detail::make_layout(out, a, b);
  p.out = out.data();
  p.a = a.data();
  p.b = b ? b->data() : nullptr;
  if (p.layout.numel() == 0) return;
  auto entry = reinterpret_cast<detail::MixedEntry>(
      dfuse::detail::find_entry(dfuse::detail::backend_for(a.device()), "eager.rope_mixed"));
  entry(p, stream);
}

// Scratch intermediates of one chain, contiguous, in the workspace.
class Scratch {
 public:
  Scratch(Workspace& ws, const TensorView& like, int count) : ws_(ws), like_(like) {
    ws.reset(size_t(count) * bytes(DType::f64));
  }
  TensorView take(DType dtype) {
    return TensorView::contiguous(ws_.take(bytes(dtype)), dtype, like_.sizes(), like_.dim(), like_.device());
  }

 private:
  size_t bytes(DType dtype) const { return (size_t(like_.numel()) * dtype_size(dtype) + 255) / 256 * 256; }
  Workspace& ws_;
  TensorView like_;
};

// The view of every other element of t's last dim, from element `first` (x[..., first::2]).
TensorView every_other(const TensorView& t, int64_t first) {
  std::vector<int64_t> sizes(t.sizes(), t.sizes() + t.dim()), strides(t.strides(), t.strides() + t.dim());
  sizes.back() = (t.size(-1) - first + 1) / 2;
  strides.back() *= 2;
  auto* base = static_cast<char*>(t.data()) + first * t.stride(-1) * int64_t(dtype_size(t.dtype()));
  return TensorView(base, t.dtype(), sizes.data(), strides.data(), t.dim(), t.device());
}

// y = (x.float() * cos + rotated.float() * sin).to(x.dtype), the fp32-opmath RoPE combine of
// diffusers' apply_rotary_emb; .float() and .to() of an f32 tensor return it unchanged. Takes up
// to five scratch tensors.
void combine_fp32_opmath(const TensorView& x, const TensorView& rotated, const TensorView& cos, const TensorView& sin,
                         const TensorView& y, Scratch& scratch, Stream stream) {
  const DType t = x.dtype();
  TensorView x_f = x, rotated_f = rotated;
  if (t != DType::f32) {
    x_f = scratch.take(DType::f32);
    cast(x, x_f, stream);
    rotated_f = scratch.take(DType::f32);
    cast(rotated, rotated_f, stream);
  }
  const TensorView a = scratch.take(DType::f32), b = scratch.take(DType::f32);
  promoted_binary(BinaryOp::mul, x_f, cos, a, stream);
  promoted_binary(BinaryOp::mul, rotated_f, sin, b, stream);
  if (t == DType::f32) {
    promoted_binary(BinaryOp::add, a, b, y, stream);
  } else {
    const TensorView sum = scratch.take(DType::f32);
    promoted_binary(BinaryOp::add, a, b, sum, stream);
    cast(sum, y, stream);
  }
}

}  // namespace

void cast(const TensorView& src, const TensorView& dst, Stream stream) {
  run_mixed(detail::MixedOp::cast, src, nullptr, dst, stream);
}

void neg(const TensorView& x, const TensorView& out, Stream stream) {
  run_mixed(detail::MixedOp::neg, x, nullptr, out, stream);
}

void promoted_binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out, Stream stream) {
  detail::MixedOp m;
  switch (op) {
    case BinaryOp::add: m = detail::MixedOp::add; break;
    case BinaryOp::sub: m = detail::MixedOp::sub; break;
    case BinaryOp::mul: m = detail::MixedOp::mul; break;
    default: throw InvalidArgument("eager.promoted_binary: div is not replicated");
  }
  run_mixed(m, a, &b, out, stream);
}

void addcmul_(const TensorView& self, const TensorView& tensor1, const TensorView& tensor2, Stream stream) {
  run_mixed(detail::MixedOp::addcmul_inplace, tensor1, &tensor2, self, stream);
}

void rope_rotate_half_chain(const TensorView& x, const TensorView& cos, const TensorView& sin,
                            const TensorView& out, RopeMath math, Workspace& ws, Stream stream) {
  const int64_t rot = cos.size(-1), half = rot / 2, head = x.size(-1);
  const TensorView x_rot = x.narrow(-1, 0, rot);
  const TensorView x1 = x_rot.narrow(-1, 0, half), x2 = x_rot.narrow(-1, half, half);  // chunk(2, -1)
  Scratch scratch(ws, x_rot, 8);
  const DType t = x.dtype();
  // x_rotated = torch.cat([-x2, x1], dim=-1)
  const TensorView neg_x2_full = scratch.take(t);
  const TensorView neg_x2 = TensorView::contiguous(neg_x2_full.data(), t, x2.sizes(), x2.dim(), x2.device());
  neg(x2, neg_x2, stream);
  const TensorView rotated = scratch.take(t);
  copy(neg_x2, rotated.narrow(-1, 0, half), stream);
  copy(x1, rotated.narrow(-1, half, half), stream);
  TensorView y = scratch.take(t);
  if (math == RopeMath::fp32_opmath) {
    combine_fp32_opmath(x_rot, rotated, cos, sin, y, scratch, stream);
  } else {  // x_rot * cos + x_rotated * sin, every op in x's dtype
    const TensorView a = scratch.take(t), b = scratch.take(t);
    binary(BinaryOp::mul, x_rot, cos, a, 1.0, stream);
    binary(BinaryOp::mul, rotated, sin, b, 1.0, stream);
    binary(BinaryOp::add, a, b, y, 1.0, stream);
  }
  // torch.cat([y, x_pass], dim=-1) (without a tail, y is the result: copied into out)
  copy(y, out.narrow(-1, 0, rot), stream);
  if (rot < head) copy(x.narrow(-1, rot, head - rot), out.narrow(-1, rot, head - rot), stream);
}

void rope_interleaved_pairs_chain(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                  const TensorView& out, Workspace& ws, Stream stream) {
  const TensorView x_real = every_other(x, 0), x_imag = every_other(x, 1);  // reshape(..., -1, 2).unbind(-1)
  Scratch scratch(ws, x, 7);
  const DType t = x.dtype();
  // x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
  const TensorView neg_imag_full = scratch.take(t);
  const TensorView neg_imag = TensorView::contiguous(neg_imag_full.data(), t, x_imag.sizes(), x_imag.dim(),
                                                     x_imag.device());
  neg(x_imag, neg_imag, stream);
  const TensorView rotated = scratch.take(t);
  copy(neg_imag, every_other(rotated, 0), stream);
  copy(x_real, every_other(rotated, 1), stream);
  combine_fp32_opmath(x, rotated, cos, sin, out, scratch, stream);
}

void interleaved_rope_fp64_chain(const TensorView& x, const TensorView& freqs_cos, const TensorView& freqs_sin,
                                 const TensorView& out, Workspace& ws, Stream stream) {
  const TensorView x1 = every_other(x, 0), x2 = every_other(x, 1);  // x.unflatten(-1, (-1, 2)).unbind(-1)
  const TensorView cos = every_other(freqs_cos, 0), sin = every_other(freqs_sin, 1);
  Scratch scratch(ws, x1, 6);
  const TensorView t1 = scratch.take(DType::f64), t2 = scratch.take(DType::f64), even = scratch.take(DType::f64);
  promoted_binary(BinaryOp::mul, x1, cos, t1, stream);
  promoted_binary(BinaryOp::mul, x2, sin, t2, stream);
  promoted_binary(BinaryOp::sub, t1, t2, even, stream);  // x1 * cos - x2 * sin
  const TensorView t3 = scratch.take(DType::f64), t4 = scratch.take(DType::f64), odd = scratch.take(DType::f64);
  promoted_binary(BinaryOp::mul, x1, sin, t3, stream);
  promoted_binary(BinaryOp::mul, x2, cos, t4, stream);
  promoted_binary(BinaryOp::add, t3, t4, odd, stream);  // x1 * sin + x2 * cos
  cast(even, every_other(out, 0), stream);               // out[..., 0::2] = ...
  cast(odd, every_other(out, 1), stream);                // out[..., 1::2] = ...
}

void qknorm_rope_chain(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                       const TensorView& cos, const TensorView& sin, RopeMath math, const TensorView& out,
                       Workspace& ws, Stream stream) {
  // The normalized tensor lives in out; the RoPE chain reads all of it before writing out.
  if (chain == RmsNormChain::torch_rms_norm)
    rms_norm(x, weight, eps, out, stream);
  else
    rms_norm_decomposed_chain(x, weight, eps, out, ws, stream);
  rope_rotate_half_chain(out, cos, sin, out, math, ws, stream);
}

void flux2_qknorm_rope_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& cos,
                             const TensorView& sin, const TensorView& out, Workspace& ws, Stream stream) {
  rms_norm(x, weight, eps, out, stream);  // the normalized tensor lives in out until the RoPE reads it
  rope_interleaved_pairs_chain(out, cos, sin, out, ws, stream);
}

void flux2_qkv_epilogue_chain(const TensorView& img_q, const TensorView& img_k, const TensorView& img_v,
                              const TensorView& txt_q, const TensorView& txt_k, const TensorView& txt_v,
                              const TensorView* q_weight, const TensorView* k_weight,
                              const TensorView* added_q_weight, const TensorView* added_k_weight, double eps,
                              const TensorView& cos, const TensorView& sin, const TensorView& q_out,
                              const TensorView& k_out, const TensorView& v_out, Workspace& ws, Stream stream) {
  const int64_t s_txt = txt_q.size(1), s_img = img_q.size(1);
  const auto text = [s_txt](const TensorView& joint) { return joint.narrow(1, 0, s_txt); };
  const auto image = [s_txt, s_img](const TensorView& joint) { return joint.narrow(1, s_txt, s_img); };
  rms_norm(img_q, q_weight, eps, image(q_out), stream);
  rms_norm(img_k, k_weight, eps, image(k_out), stream);
  rms_norm(txt_q, added_q_weight, eps, text(q_out), stream);
  rms_norm(txt_k, added_k_weight, eps, text(k_out), stream);
  copy(txt_v, text(v_out), stream);
  copy(img_v, image(v_out), stream);
  rope_interleaved_pairs_chain(q_out, cos, sin, q_out, ws, stream);
  rope_interleaved_pairs_chain(k_out, cos, sin, k_out, ws, stream);
}

void ltx2_split_rope_chain(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out,
                           Workspace& ws, Stream stream) {
  const int64_t b = cos.size(0), h = cos.size(1), t = cos.size(2), r = cos.size(3), d = 2 * r;
  // x.reshape(b, t, h, -1).swapaxes(1, 2).reshape(b, h, t, 2, r): a view of x
  const int64_t split_sizes[] = {b, h, t, 2, r}, split_strides[] = {x.stride(0), d, x.stride(1), r, 1};
  const TensorView split_view = x.restrided(split_sizes, split_strides, 5);
  Scratch scratch(ws, split_view, 4);
  TensorView split_x = split_view;  // .float() of an f32 tensor is the tensor itself
  if (x.dtype() != DType::f32) {
    split_x = scratch.take(DType::f32);
    cast(split_view, split_x, stream);
  }
  // cos.unsqueeze(-2), sin.unsqueeze(-2): [b, h, t, 1, r]
  const int64_t u_sizes[] = {b, h, t, 1, r};
  const int64_t cos_u_strides[] = {cos.stride(0), cos.stride(1), cos.stride(2), r, 1};
  const int64_t sin_u_strides[] = {sin.stride(0), sin.stride(1), sin.stride(2), r, 1};
  const TensorView cos_u = cos.restrided(u_sizes, cos_u_strides, 5), sin_u = sin.restrided(u_sizes, sin_u_strides, 5);
  const TensorView prod = scratch.take(DType::f32);
  promoted_binary(BinaryOp::mul, split_x, cos_u, prod, stream);  // out = split_x * cos_u
  const TensorView neg_sin_u = TensorView::contiguous(scratch.take(DType::f32).data(), DType::f32, u_sizes, 5,
                                                      x.device());
  neg(sin_u, neg_sin_u, stream);
  addcmul_(prod.narrow(3, 0, 1), neg_sin_u, split_x.narrow(3, 1, 1), stream);  // first_out.addcmul_(-sin_u, second_x)
  addcmul_(prod.narrow(3, 1, 1), sin_u, split_x.narrow(3, 0, 1), stream);      // second_out.addcmul_(sin_u, first_x)
  // out.reshape(b, h, t, d).swapaxes(1, 2).reshape(b, t, -1): a copy into [b, t, h, d]
  const int64_t swapped_sizes[] = {b, t, h, d}, swapped_strides[] = {h * t * d, d, t * d, 1};
  const TensorView merged = TensorView::contiguous(scratch.take(DType::f32).data(), DType::f32, swapped_sizes, 4,
                                                   x.device());
  copy(prod.restrided(swapped_sizes, swapped_strides, 4), merged, stream);
  const int64_t flat_sizes[] = {b, t, h * d};
  const TensorView flat = TensorView::contiguous(merged.data(), DType::f32, flat_sizes, 3, x.device());
  if (x.dtype() == DType::f32)
    copy(flat, out, stream);  // .to(f32) returns the tensor itself; the caller's out receives it
  else
    cast(flat, out, stream);  // .to(dtype=x_dtype)
}

void ltx2_qknorm_split_rope_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& cos,
                                  const TensorView& sin, const TensorView& out, Workspace& ws, Stream stream) {
  // The normalized tensor lives in out; the RoPE chain reads all of it before writing out.
  rms_norm(x, weight, eps, out, stream);
  ltx2_split_rope_chain(out, cos, sin, out, ws, stream);
}

void ltx25_decoder_rope_chain(const TensorView& x, const TensorView& cos_t, const TensorView& sin_t,
                              const TensorView& cos_h, const TensorView& sin_h, const TensorView& cos_w,
                              const TensorView& sin_w, const TensorView& out, Workspace& ws, Stream stream) {
  const TensorView* cos[3] = {&cos_t, &cos_h, &cos_w};
  const TensorView* sin[3] = {&sin_t, &sin_h, &sin_w};
  int64_t c0 = 0;
  for (int a = 0; a < 3; ++a) {
    const int64_t pairs = cos[a]->size(1), da = 2 * pairs;
    const TensorView x_a = x.narrow(-1, c0, da);
    const TensorView even_view = every_other(x_a, 0), odd_view = every_other(x_a, 1);  // pairs[..., 0], [..., 1]
    // The table broadcast over (B, T, H, W, heads, da/2), varying only along its axis (dim 1 + a).
    int64_t half_sizes[6], full_sizes[6], cos_strides[6] = {0, 0, 0, 0, 0, 1}, sin_strides[6] = {0, 0, 0, 0, 0, 1};
    for (int d = 0; d < 6; ++d) half_sizes[d] = even_view.size(d), full_sizes[d] = x_a.size(d);
    cos_strides[1 + a] = cos[a]->stride(0);
    sin_strides[1 + a] = sin[a]->stride(0);
    const TensorView c = cos[a]->restrided(half_sizes, cos_strides, 6);
    const TensorView s = sin[a]->restrided(half_sizes, sin_strides, 6);
    // Scratch pieces of x_a's size; the per-pair intermediates use the first half of theirs.
    Scratch scratch(ws, x_a, 10);
    const auto take = [&](DType t, const int64_t* sz) {
      return TensorView::contiguous(scratch.take(t).data(), t, sz, 6, x.device());
    };
    TensorView even = even_view, odd = odd_view;  // .float() of an f32 tensor is the tensor itself
    if (x.dtype() != DType::f32) {
      even = take(DType::f32, half_sizes);
      odd = take(DType::f32, half_sizes);
      cast(even_view, even, stream);
      cast(odd_view, odd, stream);
    }
    const TensorView ec = take(DType::f32, half_sizes), os = take(DType::f32, half_sizes);
    const TensorView first = take(DType::f32, half_sizes);
    promoted_binary(BinaryOp::mul, even, c, ec, stream);
    promoted_binary(BinaryOp::mul, odd, s, os, stream);
    promoted_binary(BinaryOp::sub, ec, os, first, stream);  // even * cos - odd * sin
    const TensorView es = take(DType::f32, half_sizes), oc = take(DType::f32, half_sizes);
    const TensorView second = take(DType::f32, half_sizes);
    promoted_binary(BinaryOp::mul, even, s, es, stream);
    promoted_binary(BinaryOp::mul, odd, c, oc, stream);
    promoted_binary(BinaryOp::add, es, oc, second, stream);  // even * sin + odd * cos
    // torch.stack([first, second], -1).reshape(x_a.shape): f32 [..., da]
    const TensorView stacked = take(DType::f32, full_sizes);
    copy(first, every_other(stacked, 0), stream);
    copy(second, every_other(stacked, 1), stream);
    // .to(x.dtype), then torch.cat([...], -1) copies it into its channel range of the result
    const TensorView rotated = take(x.dtype(), full_sizes);
    cast(stacked, rotated, stream);
    copy(rotated, out.narrow(-1, c0, da), stream);
    c0 += da;
  }
}

void helios_rope_chain(const TensorView& x, const TensorView& freqs, const TensorView& out, Workspace& ws,
                       Stream stream) {
  const int64_t d = x.size(-1);
  const TensorView x_1 = every_other(x, 0), x_2 = every_other(x, 1);  // x.unflatten(-1, (-1, 2)).unbind(-1)
  // freqs.unsqueeze(-2).chunk(2, dim=-1): cos, sin [B, S, 1, D]; then cos[..., 0::2], sin[..., 1::2]
  const int64_t u_sizes[] = {freqs.size(0), freqs.size(1), 1, 2 * d};
  const int64_t u_strides[] = {freqs.stride(0), freqs.stride(1), 0, freqs.stride(2)};
  const TensorView table = freqs.restrided(u_sizes, u_strides, 4);
  const TensorView cos = every_other(table.narrow(-1, 0, d), 0), sin = every_other(table.narrow(-1, d, d), 1);
  Scratch scratch(ws, x_1, 6);
  const TensorView t1 = scratch.take(DType::f32), t2 = scratch.take(DType::f32), even = scratch.take(DType::f32);
  promoted_binary(BinaryOp::mul, x_1, cos, t1, stream);
  promoted_binary(BinaryOp::mul, x_2, sin, t2, stream);
  promoted_binary(BinaryOp::sub, t1, t2, even, stream);  // x_1 * cos - x_2 * sin
  const TensorView t3 = scratch.take(DType::f32), t4 = scratch.take(DType::f32), odd = scratch.take(DType::f32);
  promoted_binary(BinaryOp::mul, x_1, sin, t3, stream);
  promoted_binary(BinaryOp::mul, x_2, cos, t4, stream);
  promoted_binary(BinaryOp::add, t3, t4, odd, stream);  // x_1 * sin + x_2 * cos
  cast(even, every_other(out, 0), stream);              // out[..., 0::2] = ...
  cast(odd, every_other(out, 1), stream);               // out[..., 1::2] = ...
}

}  // namespace dfuse::eager
