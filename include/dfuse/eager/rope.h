// dfuse eager replicas for the rope family: the aten primitives its chains need beyond the
// same-dtype binary ops (dfuse/eager/binary.h) and copy_ (dfuse/eager/data_movement.h), and
// the chains themselves, composed exactly as model code writes them (every intermediate
// materialized). Host and CUDA; independent of the fused kernels' code.
#pragma once

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/eager/binary.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/rope.h"

namespace dfuse::eager {

// dst.copy_(src) across dtypes (bf16, f16, f32, f64 in any combination), src broadcast to dst:
// aten's cast, which narrows a double through float (double -> float -> bf16/f16, each RNE).
void cast(const TensorView& src, const TensorView& dst, Stream stream = {});
// torch.neg(x) into out (same dtype): -float(x) rounded back, an exact sign flip.
void neg(const TensorView& x, const TensorView& out, Stream stream = {});
// out = a <op> b under type promotion: out's dtype is the promoted dtype (f32 or f64), a and b
// any floating dtype that converts exactly into it; the op runs in out's opmath (float for f32,
// double for f64), one IEEE operation (sub as fma(b, -1, a) = a - b).
void promoted_binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out,
                     Stream stream = {});
// self.addcmul_(tensor1, tensor2) (value 1) on f32 tensors, tensor1 and tensor2 broadcast to self:
// torch 2.11's pointwise_op_impl (ATen/native/cuda/DeviceAddCmulCdiv.cuh), fma(tensor1, tensor2,
// self), one rounding.
void addcmul_(const TensorView& self, const TensorView& tensor1, const TensorView& tensor2, Stream stream = {});

// The rope_rotate_half chain (dfuse/ops/rope.h), with R = cos.size(-1):
//   x_rot, x_pass = x[..., :R], x[..., R:]; x1, x2 = x_rot.chunk(2, -1)
//   x_rotated = torch.cat([-x2, x1], -1)
//   y = (x_rot.float() * cos + x_rotated.float() * sin).to(x.dtype)    fp32_opmath
//   y = x_rot * cos + x_rotated * sin                                  storage_dtype
//   out = torch.cat([y, x_pass], -1)
void rope_rotate_half_chain(const TensorView& x, const TensorView& cos, const TensorView& sin,
                            const TensorView& out, RopeMath math, Workspace& ws, Stream stream = {});

// diffusers' apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-1), the
// rope_interleaved_pairs chain:
//   x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
//   x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
//   out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
void rope_interleaved_pairs_chain(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                  const TensorView& out, Workspace& ws, Stream stream = {});

// SANA-Video's apply_interleaved_rotary_emb for one tensor x (the fused op applies it to q and k):
//   x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
//   cos, sin = freqs_cos[..., 0::2], freqs_sin[..., 1::2]
//   out[..., 0::2] = x1 * cos - x2 * sin; out[..., 1::2] = x1 * sin + x2 * cos
void interleaved_rope_fp64_chain(const TensorView& x, const TensorView& freqs_cos, const TensorView& freqs_sin,
                                 const TensorView& out, Workspace& ws, Stream stream = {});

// fused_inplace_qknorm_rope's split chain for one of q, k (the result into out, x left as is):
//   h = F.rms_norm(x, (D,), weight, eps)  or diffusers' RMSNorm (chain)    [dfuse/eager/rms_norm.h]
//   out = the rope_rotate_half chain of h
void qknorm_rope_chain(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                       const TensorView& cos, const TensorView& sin, RopeMath math, const TensorView& out,
                       Workspace& ws, Stream stream = {});

// flux2_strided_qknorm_rope's chain for one of q, k (the result into out, x left as is):
//   h = F.rms_norm(x, (D,), weight, eps)                   torch.nn.RMSNorm, norm_q / norm_k
//   out = apply_rotary_emb(h, (cos, sin), sequence_dim=1)  the rope_interleaved_pairs chain of h
void flux2_qknorm_rope_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& cos,
                             const TensorView& sin, const TensorView& out, Workspace& ws, Stream stream = {});

// flux2_qkv_epilogue's chain (diffusers' Flux2AttnProcessor after the projections), x [B, S, H, D]:
//   query, key = norm_q(img_q), norm_k(img_k)
//   encoder_query, encoder_key = norm_added_q(txt_q), norm_added_k(txt_k)
//   q = torch.cat([encoder_query, query], dim=1)   (the same for k, and for v from txt_v, img_v)
//   q_out, k_out = apply_rotary_emb(q, (cos, sin), sequence_dim=1), apply_rotary_emb(k, ...); v_out = v
// The cat is the norms writing into the token ranges of q_out and k_out, which the RoPE chain then
// reads in full before writing.
void flux2_qkv_epilogue_chain(const TensorView& img_q, const TensorView& img_k, const TensorView& img_v,
                              const TensorView& txt_q, const TensorView& txt_k, const TensorView& txt_v,
                              const TensorView* q_weight, const TensorView* k_weight,
                              const TensorView* added_q_weight, const TensorView* added_k_weight, double eps,
                              const TensorView& cos, const TensorView& sin, const TensorView& q_out,
                              const TensorView& k_out, const TensorView& v_out, Workspace& ws, Stream stream = {});

// LTX-2's apply_split_rotary_emb(x, (cos, sin)) (diffusers transformer_ltx2.py) for x [B, S, C] and
// fp32 cos, sin [B, H, S, D/2], C = H * D:
//   x = x.reshape(b, t, h, -1).swapaxes(1, 2)
//   split_x = x.reshape(*x.shape[:-1], 2, r).float(); first_x, second_x = split_x[..., :1, :], [..., 1:, :]
//   out = split_x * cos.unsqueeze(-2)
//   out[..., :1, :].addcmul_(-sin.unsqueeze(-2), second_x); out[..., 1:, :].addcmul_(sin.unsqueeze(-2), first_x)
//   out = out.reshape(..., D).swapaxes(1, 2).reshape(b, t, -1).to(x.dtype)
void ltx2_split_rope_chain(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out,
                           Workspace& ws, Stream stream = {});
// ltx2_qknorm_split_rope's chain for one of q, k: out = ltx2_split_rope_chain(F.rms_norm(x, (C,),
// weight, eps)), the normalized tensor materialized in x's dtype.
void ltx2_qknorm_split_rope_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& cos,
                                  const TensorView& sin, const TensorView& out, Workspace& ws, Stream stream = {});

// The LTX-2.5 diffusion decoder's LTX2VideoVaeRotaryPosEmbed3D for one of q, k (x [B, T, H, W, heads,
// D]) with cached per-axis tables cos_a, sin_a [N_a, da/2] (a = frame, row, column), for each axis:
//   pairs = x[..., c0:c0+da].reshape(..., da/2, 2); even, odd = pairs[..., 0].float(), pairs[..., 1].float()
//   rotated_a = torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).reshape(...).to(x.dtype)
// with cos, sin the axis table broadcast along its axis; out = torch.cat([rotated_t, rotated_h, rotated_w], -1).
void ltx25_decoder_rope_chain(const TensorView& x, const TensorView& cos_t, const TensorView& sin_t,
                              const TensorView& cos_h, const TensorView& sin_h, const TensorView& cos_w,
                              const TensorView& sin_w, const TensorView& out, Workspace& ws, Stream stream = {});

// Helios' apply_rotary_emb_transposed for one of q, k (x [B, S, heads, D], freqs fp32 [B or 1, S, 2D]):
//   x_1, x_2 = x.unflatten(-1, (-1, 2)).unbind(-1); cos, sin = freqs.unsqueeze(-2).chunk(2, dim=-1)
//   out[..., 0::2] = x_1 * cos[..., 0::2] - x_2 * sin[..., 1::2]
//   out[..., 1::2] = x_1 * sin[..., 1::2] + x_2 * cos[..., 0::2]
void helios_rope_chain(const TensorView& x, const TensorView& freqs, const TensorView& out, Workspace& ws,
                       Stream stream = {});

// torch's a * b of complex64 tensors, as f32 views [..., 2] (torch.view_as_real; last dim stride 1),
// b broadcast to out: aten's complex<float> multiply on CUDA as torch 2.11's kernels compute it
// (nvcc contracts c10::complex's a*c - b*d and a*d + b*c): re = fma(ar, br, -(ai * bi)),
// im = fma(ar, bi, ai * br). Host and CUDA.
void complex_mul(const TensorView& a, const TensorView& b, const TensorView& out, Stream stream = {});

// qwen_qkv_epilogue's chain (QwenDoubleStreamAttnProcessor2_0 after the projections), heads [B, S, H, D]:
//   img_q, img_k = norm_q(img.q), norm_k(img.k); txt_q, txt_k = norm_added_q(txt.q), norm_added_k(txt.k)
//       (diffusers RMSNorm, the decomposed chain)
//   x = apply_rotary_emb_qwen(x, freqs, use_real=False) for the four (img_freqs / txt_freqs, f32 [S, D]
//       views of the complex64 tables):
//       x_c = view_as_complex(x.float().reshape(..., -1, 2)); view_as_real(x_c * freqs.unsqueeze(1))
//       .flatten(3).type_as(x)
//   joint_q = torch.cat([txt_q, img_q], dim=1)   (k, and v from txt.v, img.v, likewise)
// The cat is each stream's chain writing into its token range of the joint tensors.
void qwen_qkv_epilogue_chain(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& img_freqs,
                             const TensorView& txt_freqs, const TensorView& joint_q, const TensorView& joint_k,
                             const TensorView& joint_v, Workspace& ws, Stream stream = {});

// hunyuan_qkv_rope_pack's chain (HunyuanVideoAttnProcessor2_0 after the projections):
//   img_q, img_k = norm_q(img.q), norm_k(img.k); txt_q, txt_k = norm_added_q(txt.q), norm_added_k(txt.k)
//   img_q, img_k = apply_rotary_emb(x, (cos, sin), sequence_dim=1)   the rope_interleaved_pairs chain,
//       cos, sin f32 [S_img, D] viewed as [S_img, 1, D]
//   joint_q = torch.cat([img_q, txt_q], dim=1)   (k, and v from img.v, txt.v, likewise)
void hunyuan_qkv_rope_pack_chain(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& cos,
                                 const TensorView& sin, const TensorView& joint_q, const TensorView& joint_k,
                                 const TensorView& joint_v, Workspace& ws, Stream stream = {});

}  // namespace dfuse::eager
