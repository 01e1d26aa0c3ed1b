// The chains of the joint-QKV epilogues (qwen_qkv_epilogue, hunyuan_qkv_rope_pack), composed from the
// eager replicas as the models' attention processors write them.
#include <vector>

#include "dfuse/eager/data_movement.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/eager/rope.h"

namespace dfuse::eager {

namespace {

// A [S, D] table viewed as [S, 1, D] (diffusers' cos[None, :, None, :] / freqs.unsqueeze(1) against
// [B, S, H, D]).
TensorView per_token_rows(const TensorView& table) {
  const int64_t sizes[] = {table.size(0), 1, table.size(1)};
  const int64_t strides[] = {table.stride(0), 0, table.stride(1)};
  return table.restrided(sizes, strides, 3);
}

// t [..., D] seen as [..., D / 2, 2] (reshape(..., -1, 2) of a tensor with unit last stride).
TensorView as_pairs(const TensorView& t) {
  std::vector<int64_t> sizes(t.sizes(), t.sizes() + t.dim()), strides(t.strides(), t.strides() + t.dim());
  sizes.back() = t.size(-1) / 2;
  strides.back() = 2;
  sizes.push_back(2);
  strides.push_back(1);
  return t.restrided(sizes.data(), strides.data(), int(sizes.size()));
}

// apply_rotary_emb_qwen(x, freqs, use_real=False) with x's result in out (out may be x):
//   x_c = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
//   out = torch.view_as_real(x_c * freqs.unsqueeze(1)).flatten(3).type_as(x)
void qwen_complex_rope(const TensorView& x, const TensorView& freqs, const TensorView& out, Workspace& ws,
                       Stream stream) {
  const size_t bytes = (size_t(x.numel()) * sizeof(float) + 255) / 256 * 256;
  ws.reset(2 * bytes);
  const TensorView xf = TensorView::contiguous(ws.take(bytes), DType::f32, x.sizes(), x.dim(), x.device());
  const TensorView prod = TensorView::contiguous(ws.take(bytes), DType::f32, x.sizes(), x.dim(), x.device());
  cast(x, xf, stream);                                                   // x.float()
  complex_mul(as_pairs(xf), as_pairs(per_token_rows(freqs)), as_pairs(prod), stream);  // x_c * freqs
  cast(prod, out, stream);                                               // .type_as(x)
}

// One stream's q and k normalized (diffusers RMSNorm) into the joint token range [start, start + S),
// its v copied there.
void normalize_stream_into(const QkvStream& s, double eps, int64_t start, const TensorView& joint_q,
                           const TensorView& joint_k, const TensorView& joint_v, Workspace& ws, Stream stream) {
  const int64_t tokens = s.q.size(1);
  rms_norm_decomposed_chain(s.q, s.q_weight, eps, joint_q.narrow(1, start, tokens), ws, stream);
  rms_norm_decomposed_chain(s.k, s.k_weight, eps, joint_k.narrow(1, start, tokens), ws, stream);
  copy(s.v, joint_v.narrow(1, start, tokens), stream);
}

}  // namespace

void qwen_qkv_epilogue_chain(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& img_freqs,
                             const TensorView& txt_freqs, const TensorView& joint_q, const TensorView& joint_k,
                             const TensorView& joint_v, Workspace& ws, Stream stream) {
  const int64_t s_txt = txt.q.size(1), s_img = img.q.size(1);
  normalize_stream_into(txt, eps, 0, joint_q, joint_k, joint_v, ws, stream);
  normalize_stream_into(img, eps, s_txt, joint_q, joint_k, joint_v, ws, stream);
  // Each RoPE reads its normalized tensor in full (x.float()) before writing its result over it.
  for (const TensorView* joint : {&joint_q, &joint_k}) {
    const TensorView t = joint->narrow(1, 0, s_txt), i = joint->narrow(1, s_txt, s_img);
    qwen_complex_rope(t, txt_freqs, t, ws, stream);
    qwen_complex_rope(i, img_freqs, i, ws, stream);
  }
}

void hunyuan_qkv_rope_pack_chain(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& cos,
                                 const TensorView& sin, const TensorView& joint_q, const TensorView& joint_k,
                                 const TensorView& joint_v, Workspace& ws, Stream stream) {
  const int64_t s_img = img.q.size(1);
  normalize_stream_into(img, eps, 0, joint_q, joint_k, joint_v, ws, stream);
  normalize_stream_into(txt, eps, s_img, joint_q, joint_k, joint_v, ws, stream);
  const TensorView c = per_token_rows(cos), s = per_token_rows(sin);
  for (const TensorView* joint : {&joint_q, &joint_k}) {
    const TensorView i = joint->narrow(1, 0, s_img);
    rope_interleaved_pairs_chain(i, c, s, i, ws, stream);
  }
}

}  // namespace dfuse::eager
