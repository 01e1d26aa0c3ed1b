// dfuse ops, rope family: rotary position embeddings applied to attention heads.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts
// (and, given `why`, says which guard failed), and <op>(...) re-checks and throws
// dfuse::Unsupported naming the failed guard. The backend is chosen by the device of the
// tensors (host or CUDA). Outputs are caller-owned and may be the inputs themselves (in place).
//
// Contract of every op: bit-exact against the eager chain named below, on host and CUDA alike
// (the chains use only IEEE +, -, * and conversions, so host and CUDA agree bit for bit).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse {

// Where the rotate-half chain rounds.
enum class RopeMath : uint8_t {
  // diffusers' apply_rotary_emb(use_real=True, use_real_unbind_dim=-2) (Stable Audio, OmniGen,
  // CogView4, Cosmos): (x.float() * cos + x_rotated.float() * sin).to(x.dtype): products and sum
  // in fp32, one rounding to x's dtype. cos/sin fp32 (as diffusers builds them) or x's dtype.
  fp32_opmath,
  // The rotate_half form with cos/sin in x's dtype (ERNIE-Image, Ideogram):
  // x * cos + rotate_half(x) * sin, each product and the sum rounded to x's dtype.
  storage_dtype,
};

// diffusion.rope_rotate_half: rotate-half RoPE over the first R = cos.size(-1) channels of each
// head, the tail copied unchanged (partial rotary dims). Replaces
//   x_rot, x_pass = x[..., :R], x[..., R:]
//   x1, x2 = x_rot.chunk(2, dim=-1); x_rotated = torch.cat([-x2, x1], dim=-1)
//   y = (x_rot.float() * cos + x_rotated.float() * sin).to(x.dtype)     # fp32_opmath
//   y = x_rot * cos + x_rotated * sin                                   # storage_dtype
//   out = torch.cat([y, x_pass], dim=-1)                                # when R < D
//   x:    [..., D], rank 2..4, bf16/f16/f32, last dim contiguous, any outer strides (e.g. the
//         q/k heads of a packed [B, S, 3, H, D] projection viewed as [B, S, H, D]); layout
//         [B, S, H, D] or [B, H, S, D] (the tables' broadcast says which dim is the sequence)
//   cos, sin: [..., R] broadcastable (right-aligned) to x[..., :R]: [S, 1, R] or [B, S, 1, R]
//         against [B, S, H, D], [S, R] against [B, H, S, D]; R even, 0 < R <= D; last dim
//         contiguous; fp32 or x's dtype for fp32_opmath, x's dtype for storage_dtype
//   out:  x's shape and dtype, last dim contiguous; may be x itself (in place)
// Elements: fewer than 2^31 in x.
bool can_use_rope_rotate_half(const TensorView& x, const TensorView& cos, const TensorView& sin,
                              const TensorView& out, RopeMath math, std::string* why = nullptr);
void rope_rotate_half(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out,
                      RopeMath math, Stream stream = {});

// diffusion.rope_interleaved_pairs: RoPE over adjacent pairs (x[2p], x[2p+1]) with fp32 tables
// that repeat each frequency twice: diffusers' apply_rotary_emb(x, (cos, sin), use_real=True,
// use_real_unbind_dim=-1) (FLUX.1, FLUX.2, HunyuanVideo, LTX-Video, CogVideoX). Replaces
//   x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
//   x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
//   out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
//   x:    [..., D], rank 2..4, bf16/f16/f32, D even, last dim contiguous, any outer strides
//         (q/k heads of a packed [B, S, 3, H, D] projection, CogVideoX's q[:, :, text:] slice);
//         layout [B, H, S, D] (tables [S, D], diffusers' sequence_dim=2) or [B, S, H, D]
//         (tables [S, 1, D], sequence_dim=1); LTX-Video's [B, S, H*D] with tables [B, S, H*D]
//   cos, sin: [..., D] of one shape, broadcastable (right-aligned) to x; last dim contiguous;
//         fp32 (as diffusers builds them) or x's dtype
//   out:  x's shape and dtype, last dim contiguous; may be x itself (in place)
// Elements: fewer than 2^31 in x.
bool can_use_rope_interleaved_pairs(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                    const TensorView& out, std::string* why = nullptr);
void rope_interleaved_pairs(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out,
                            Stream stream = {});

// diffusion.interleaved_rope_fp64: SANA-Video's paired Q/K RoPE over interleaved pairs
// (x[2p], x[2p+1]) with fp64 tables. Replaces, for x in (q, k):
//   x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
//   cos, sin = freqs_cos[..., 0::2], freqs_sin[..., 1::2]            # fp64
//   out = torch.empty_like(x)
//   out[..., 0::2] = x1 * cos - x2 * sin                             # fp64 math
//   out[..., 1::2] = x1 * sin + x2 * cos
// Each product and the sum/difference rounded in fp64, then the store converts double -> float
// -> x's dtype (aten's copy_ casts through float), two roundings.
//   q, k: [..., D] of one shape and dtype (bf16/f16/f32), rank 2..4, D even, last dim
//         contiguous, any outer strides
//   freqs_cos, freqs_sin: fp64 [..., D] broadcastable (right-aligned) to q, e.g. [1, S, 1, D];
//         last dim contiguous; column 2p of freqs_cos and column 2p+1 of freqs_sin are used
//   q_out, k_out: q's shape and dtype, last dim contiguous; each may be its input (in place);
//         they may not overlap each other
// Elements: fewer than 2^31 in q.
bool can_use_interleaved_rope_fp64(const TensorView& q, const TensorView& k, const TensorView& freqs_cos,
                                   const TensorView& freqs_sin, const TensorView& q_out, const TensorView& k_out,
                                   std::string* why = nullptr);
void interleaved_rope_fp64(const TensorView& q, const TensorView& k, const TensorView& freqs_cos,
                           const TensorView& freqs_sin, const TensorView& q_out, const TensorView& k_out,
                           Stream stream = {});

// diffusion.fused_inplace_qknorm_rope, in its exact form (the spec's round_norm_before_rope=True):
// per-head QK RMSNorm, rounded to the storage dtype, then rotate-half RoPE, written back into q and
// k. Replaces, for (x, weight) in ((q, q_weight), (k, k_weight)):
//   x = RMSNorm(x)                         F.rms_norm(x, (D,), weight, eps) or diffusers' RMSNorm
//                                          (`chain`, see dfuse/ops/rmsnorm.h)
//   x = rope_rotate_half(x, cos, sin)      the chain of rope_rotate_half with `math` (tail kept)
// Contract: bit-exact against that split chain (norm kernel, then RoPE). The fp32 path without the
// rounding between the two (the spec's default, one bf16 rounding away) is
// fused_inplace_qknorm_rope_one_rounding below.
//   q, k: [..., D] (each its own head count and strides), rank 2..4, one dtype (bf16/f16/f32),
//         last dim contiguous, D = 128 or 256; torch_rms_norm: aten's vectorized RMSNorm path
//         (contiguous rows 4-element aligned, or non-contiguous views); diffusers_decomposed: the
//         mean's 32-lane layout (D = 256 needs at least 16 heads in all)
//   q_weight, k_weight: null or [D] contiguous, q's dtype
//   cos, sin: as rope_rotate_half, broadcastable to both q[..., :R] and k[..., :R]
// q and k are written in place and may not overlap each other or the tables. Elements: fewer than
// 2^31 in each. If the call throws, nothing has been written.
bool can_use_fused_inplace_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                       const TensorView* q_weight, const TensorView* k_weight, double eps,
                                       const TensorView& cos, const TensorView& sin, RopeMath math,
                                       std::string* why = nullptr);
void fused_inplace_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k,
                               const TensorView* q_weight, const TensorView* k_weight, double eps,
                               const TensorView& cos, const TensorView& sin, RopeMath math, Stream stream = {});

// One stream (image or text) of a joint-attention block: its q, k, v heads [B, S, H, D] (views of
// its projections, e.g. `to_q(x).unflatten(-1, (H, D))` or slices of a packed QKV projection) and
// the weights of its q and k RMSNorm modules (null: a module without weight).
struct QkvStream {
  TensorView q, k, v;
  const TensorView* q_weight = nullptr;
  const TensorView* k_weight = nullptr;
};

// diffusion.qwen_qkv_epilogue: Qwen-Image's QwenDoubleStreamAttnProcessor2_0 between the six
// projections and attention, in one launch writing the joint q, k, v. Replaces
//   img_q = norm_q(img_q); img_k = norm_k(img_k)               diffusers RMSNorm (the decomposed chain:
//   txt_q = norm_added_q(txt_q); txt_k = norm_added_k(txt_k)   x.float().pow(2).mean(-1), rsqrt, .to, * w)
//   x = apply_rotary_emb_qwen(x, freqs, use_real=False)        for img q/k with img_freqs, txt q/k with txt_freqs:
//       x_c = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
//       x = torch.view_as_real(x_c * freqs.unsqueeze(1)).flatten(3).type_as(x)
//   joint_q = torch.cat([txt_q, img_q], dim=1)                 and joint_k, joint_v likewise (v as is)
// Contract: bit-exact against that chain. The complex product is aten's complex<float> multiply as
// torch 2.11's CUDA kernel computes it (nvcc contracts it): re = fma(xr, c, -(xi * s)),
// im = fma(xr, s, xi * c), then one rounding to x's dtype.
//   img, txt: q, k, v [B, S, H, D] of one dtype (bf16/f16/f32) and device, B, H and D shared by all six,
//         S per stream; D = 128; last dim contiguous, any outer strides; weights null or [D]
//         contiguous of that dtype
//   img_freqs, txt_freqs: f32 [S, D] of the stream's S (torch.view_as_real of the complex64 [S, D/2]
//         table, flattened: (cos, sin) of frequency p at columns 2p, 2p + 1), last dim contiguous
//   joint_q, joint_k, joint_v: [B, S_txt + S_img, H, D] of that dtype, last dim contiguous; they may
//         not overlap each other or any input
// Elements: fewer than 2^31 in each joint output. If the call throws, nothing has been written.
bool can_use_qwen_qkv_epilogue(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& img_freqs,
                               const TensorView& txt_freqs, const TensorView& joint_q, const TensorView& joint_k,
                               const TensorView& joint_v, std::string* why = nullptr);
void qwen_qkv_epilogue(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& img_freqs,
                       const TensorView& txt_freqs, const TensorView& joint_q, const TensorView& joint_k,
                       const TensorView& joint_v, Stream stream = {});

// diffusion.hunyuan_qkv_rope_pack: HunyuanVideo's HunyuanVideoAttnProcessor2_0 between the
// projections and attention (QK RMSNorm, RoPE on the image tokens, the joint pack), in one launch.
// Replaces
//   img_q = norm_q(img_q); img_k = norm_k(img_k)               diffusers RMSNorm (decomposed chain)
//   txt_q = norm_added_q(txt_q); txt_k = norm_added_k(txt_k)
//   img_q = apply_rotary_emb(img_q, (cos, sin), sequence_dim=1)    use_real=True, use_real_unbind_dim=-1
//   img_k = apply_rotary_emb(img_k, (cos, sin), sequence_dim=1)    (rope_interleaved_pairs' chain)
//   joint_q = torch.cat([img_q, txt_q], dim=1)                 and joint_k, joint_v likewise (v as is)
// The text tokens are not rotated. The double-stream blocks pass their two streams; the single-stream
// blocks, whose q = norm_q(to_q(cat([x, context]))) spans both, pass the image and text token ranges of
// q, k, v as the two streams with the same weights (the norm is per head, so the split changes nothing).
// Contract: bit-exact against that chain.
//   img, txt: as qwen_qkv_epilogue (D = 128)
//   cos, sin: f32 [S_img, D] (diffusers' HunyuanVideoRotaryPosEmbed: each frequency repeated twice),
//         last dim contiguous
//   joint_q, joint_k, joint_v: [B, S_img + S_txt, H, D], as qwen_qkv_epilogue's
bool can_use_hunyuan_qkv_rope_pack(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& cos,
                                   const TensorView& sin, const TensorView& joint_q, const TensorView& joint_k,
                                   const TensorView& joint_v, std::string* why = nullptr);
void hunyuan_qkv_rope_pack(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& cos,
                           const TensorView& sin, const TensorView& joint_q, const TensorView& joint_k,
                           const TensorView& joint_v, Stream stream = {});

// diffusion.fused_inplace_qknorm_rope_one_rounding: the spec's default form of
// fused_inplace_qknorm_rope (round_norm_before_rope=False): the normalized value stays fp32 into the
// fp32-opmath rotate-half RoPE, one rounding to the storage dtype per element. Replaces the same split
// chain; not bit-exact (request-gated: quality extra-high). Contract (close), per rotated element e
// with partner p (rope_rotate_half's), n = the split chain's normalized values (the norm module's
// output), c, s = cos[e], sin[e], split = the split chain's result, u = 2^-8 (bf16) or 2^-11 (f16):
//   |fused - split| <= (u + 2^-21) * (|c * n[e]| + |s * n[p]|) + u * (|fused| + |split|)
//                      + (|c| + |s| + 2) * d
// with d half the dtype's smallest subnormal (2^-134 bf16, 2^-25 f16); NaN where the split chain has
// NaN, infinities equal; the tail beyond R and every f32 result equal the split chain bit for bit.
// Operands as fused_inplace_qknorm_rope with math fp32_opmath.
bool can_use_fused_inplace_qknorm_rope_one_rounding(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                                    const TensorView* q_weight, const TensorView* k_weight,
                                                    double eps, const TensorView& cos, const TensorView& sin,
                                                    std::string* why = nullptr);
void fused_inplace_qknorm_rope_one_rounding(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                            const TensorView* q_weight, const TensorView* k_weight, double eps,
                                            const TensorView& cos, const TensorView& sin, Stream stream = {});

// diffusion.fused_qknorm_rope: fused_inplace_qknorm_rope's exact form out of place: q_out, k_out =
// the split chain of q, k; q and k are only read. Contract: bit-exact against that chain.
//   q, k, q_weight, k_weight, cos, sin: as fused_inplace_qknorm_rope
//   q_out, k_out: q's / k's shape and dtype, last dim contiguous, overlapping no operand nor each other
bool can_use_fused_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k,
                               const TensorView* q_weight, const TensorView* k_weight, double eps,
                               const TensorView& cos, const TensorView& sin, RopeMath math, const TensorView& q_out,
                               const TensorView& k_out, std::string* why = nullptr);
void fused_qknorm_rope(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView* q_weight,
                       const TensorView* k_weight, double eps, const TensorView& cos, const TensorView& sin,
                       RopeMath math, const TensorView& q_out, const TensorView& k_out, Stream stream = {});

// diffusion.fused_qknorm_rope_pack_kv: fused_inplace_qknorm_rope's exact form with the KV packing:
// q normalized and rotated in place; k's split-chain result into kv[..., 0, :, :] and v copied bit
// for bit into kv[..., 1, :, :] (kv = torch.stack([k, v], dim=-3) of the rotated k). Contract:
// bit-exact against that chain.
//   q, k, q_weight, k_weight, cos, sin: as fused_inplace_qknorm_rope; k of rank 3 or 4 ([..., H, D])
//   v:  k's shape and dtype, last dim contiguous, any outer strides (only read)
//   kv: [..., 2, H, D] (k's shape with 2 inserted before the heads), last dim contiguous (a KV cache
//       slice), overlapping no operand
bool can_use_fused_qknorm_rope_pack_kv(RmsNormChain chain, const TensorView& q, const TensorView& k,
                                       const TensorView& v, const TensorView* q_weight, const TensorView* k_weight,
                                       double eps, const TensorView& cos, const TensorView& sin, RopeMath math,
                                       const TensorView& kv, std::string* why = nullptr);
void fused_qknorm_rope_pack_kv(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView& v,
                               const TensorView* q_weight, const TensorView* k_weight, double eps,
                               const TensorView& cos, const TensorView& sin, RopeMath math, const TensorView& kv,
                               Stream stream = {});

// diffusion.flux2_strided_qknorm_rope: FLUX.2 (Klein) single-stream attention's QK RMSNorm + RoPE,
// reading q and k as strided views of the packed projection. Replaces (diffusers 0.42,
// Flux2ParallelSelfAttnProcessor):
//   qkv, mlp = torch.split(attn.to_qkv_mlp_proj(x), [3 * H * D, mlp_dim], dim=-1)
//   query, key, value = qkv.chunk(3, dim=-1)
//   query, key = query.unflatten(-1, (-1, D)), key.unflatten(-1, (-1, D))    # [B, S, H, D] views
//   query, key = attn.norm_q(query), attn.norm_k(key)   # torch.nn.RMSNorm: F.rms_norm(x, (D,), w, eps)
//   query = apply_rotary_emb(query, (cos, sin), sequence_dim=1)   # rope_interleaved_pairs' chain
//   key = apply_rotary_emb(key, (cos, sin), sequence_dim=1)
// into q_out and k_out (the processor hands contiguous [B, S, H, D] results to attention).
// Contract: bit-exact against that chain: the norm's output is rounded to the storage dtype (signed
// zeros included) and the RoPE reads the rounded values. Only the heads of q_out and k_out are
// written (never the projection's V or MLP columns).
//   q, k: [..., D] (each its own strides), rank 2..4, one dtype (bf16/f16/f32), last dim contiguous,
//         D = 128 or 256 (FLUX.2: 24 heads of 128); aten's vectorized F.rms_norm path (strided views
//         always take it; contiguous rows must be 4-element aligned)
//   q_weight, k_weight: null or [D] contiguous, q's dtype
//   cos, sin: [..., D] of one shape broadcastable to q and k ([S, 1, D] against [B, S, H, D]), last
//         dim contiguous, fp32 (as diffusers builds them) or q's dtype
//   q_out, k_out: q's and k's shapes and dtype, last dim contiguous; each may be its input (in
//         place) but may overlap no other operand
// Elements: fewer than 2^31 in each. If the call throws, nothing has been written.
bool can_use_flux2_strided_qknorm_rope(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                                       const TensorView* k_weight, double eps, const TensorView& cos,
                                       const TensorView& sin, const TensorView& q_out, const TensorView& k_out,
                                       std::string* why = nullptr);
void flux2_strided_qknorm_rope(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                               const TensorView* k_weight, double eps, const TensorView& cos, const TensorView& sin,
                               const TensorView& q_out, const TensorView& k_out, Stream stream = {});

// diffusion.flux2_qkv_epilogue: FLUX.2 double-stream attention's QK RMSNorm + joint text/image
// packing + RoPE, every output in one launch. Replaces (diffusers 0.42, Flux2AttnProcessor):
//   query, key, value = (t.unflatten(-1, (-1, D)) for t in (query, key, value))          # image
//   query, key = attn.norm_q(query), attn.norm_k(key)
//   encoder_query, encoder_key, encoder_value = (... the same for the text projections)
//   encoder_query, encoder_key = attn.norm_added_q(encoder_query), attn.norm_added_k(encoder_key)
//   query = torch.cat([encoder_query, query], dim=1)                 # text tokens first
//   key = torch.cat([encoder_key, key], dim=1); value = torch.cat([encoder_value, value], dim=1)
//   query = apply_rotary_emb(query, (cos, sin), sequence_dim=1)      # over the joint tokens
//   key = apply_rotary_emb(key, (cos, sin), sequence_dim=1)
// with every norm torch.nn.RMSNorm (F.rms_norm), into q_out, k_out, v_out.
// Contract: bit-exact against that chain (each norm's output rounded to the storage dtype, the RoPE
// of rope_interleaved_pairs on the rounded values; v copied bit for bit).
//   img_q, img_k, img_v: [B, S_img, H, D]; txt_q, txt_k, txt_v: [B, S_txt, H, D] (the unflattened
//         projections, any outer strides: to_qkv(...).chunk(3, -1) views), one dtype (bf16/f16/f32),
//         last dim contiguous, D = 128 or 256, the vectorized F.rms_norm path as above
//   q_weight, k_weight (norm_q, norm_k), added_q_weight, added_k_weight (norm_added_q/k): null or
//         [D] contiguous, the inputs' dtype
//   cos, sin: [S_txt + S_img, 1, D] (or [1, ..., 1, D]) of one shape, last dim contiguous, fp32 or
//         the inputs' dtype: table row t belongs to joint token t
//   q_out, k_out, v_out: [B, S_txt + S_img, H, D], last dim contiguous, overlapping no operand
// Elements: fewer than 2^31 in each output. If the call throws, nothing has been written.
bool can_use_flux2_qkv_epilogue(const TensorView& img_q, const TensorView& img_k, const TensorView& img_v,
                                const TensorView& txt_q, const TensorView& txt_k, const TensorView& txt_v,
                                const TensorView* q_weight, const TensorView* k_weight,
                                const TensorView* added_q_weight, const TensorView* added_k_weight, double eps,
                                const TensorView& cos, const TensorView& sin, const TensorView& q_out,
                                const TensorView& k_out, const TensorView& v_out, std::string* why = nullptr);
void flux2_qkv_epilogue(const TensorView& img_q, const TensorView& img_k, const TensorView& img_v,
                        const TensorView& txt_q, const TensorView& txt_k, const TensorView& txt_v,
                        const TensorView* q_weight, const TensorView* k_weight, const TensorView* added_q_weight,
                        const TensorView* added_k_weight, double eps, const TensorView& cos, const TensorView& sin,
                        const TensorView& q_out, const TensorView& k_out, const TensorView& v_out,
                        Stream stream = {});

// diffusion.ltx2_qknorm_split_rope: LTX-2's attention QK-norm + split RoPE on q and k in one launch
// (diffusers' LTX2AudioVideoAttnProcessor, rope_type="split"). Replaces, for (x, weight, cos, sin)
// in ((q, q_weight, q_cos, q_sin), (k, k_weight, k_cos, k_sin)):
//   x = torch.nn.RMSNorm(H * D)(x)           F.rms_norm over the whole inner dim C = H * D per token
//   x = apply_split_rotary_emb(x, (cos, sin))
//       x [B, S, C] viewed as [B, H, S, D]; halves x1 = x[..., :D/2], x2 = x[..., D/2:] in fp32;
//       out = x * cos, out1.addcmul_(-sin, x2), out2.addcmul_(sin, x1), back to [B, S, C], .to(dtype)
// Contract: bit-exact against that chain (one fp32 product and one fma per element, then one
// rounding; see src/ops/rope/ltx2_qknorm_split_rope.h). The norm's rsqrt is rsqrtf on CUDA and
// correctly rounded on the host (dfuse/ops/rmsnorm.h): host results match the host replicas.
//   q, k:       [B, S, C] (each its own S and C: cross-attention), bf16/f16/f32 (one dtype), last dim
//               contiguous, any outer strides, C <= 8192
//   q_weight, k_weight: null (elementwise_affine=False) or [C] contiguous, x's dtype
//   q_cos, q_sin: fp32 [B, H, S, D/2] (H = q_cos.size(1), C = H * D) of one shape, last dim
//               contiguous, any non-negative strides (diffusers' swapaxes(1, 2) views); k_cos, k_sin
//               the same for k (the processor passes q's tables again for self-attention)
//   q_out, k_out: q's / k's shape and dtype, last dim contiguous; each may be its input (in place);
//               no other overlap
// Elements: fewer than 2^31 in each of q and k.
bool can_use_ltx2_qknorm_split_rope(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                                    const TensorView* k_weight, double eps, const TensorView& q_cos,
                                    const TensorView& q_sin, const TensorView& k_cos, const TensorView& k_sin,
                                    const TensorView& q_out, const TensorView& k_out, std::string* why = nullptr);
void ltx2_qknorm_split_rope(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                            const TensorView* k_weight, double eps, const TensorView& q_cos, const TensorView& q_sin,
                            const TensorView& k_cos, const TensorView& k_sin, const TensorView& q_out,
                            const TensorView& k_out, Stream stream = {});

// diffusion.ltx25_decoder_rope: the LTX-2.5 diffusion decoder's 3D RoPE of q and k in one launch
// (diffusers' LTX2VideoVaeRotaryPosEmbed3D), from cached compact per-axis tables expanded per token
// inside the kernel. Replaces, for x in (q, k), with D split into (dt, dh, dw) = 2 * the tables'
// widths and (t, h, w) each token's frame, row and column:
//   for each axis a (frame, row, column) with channels [c0, c0 + da):
//     even, odd = x[..., c0:c0+da].reshape(..., da/2, 2).unbind(-1) as fp32
//     cos, sin = cos_a[p_a], sin_a[p_a]                    (angles.cos(), angles.sin() of the module)
//     rotated_a = torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).flatten(-2).to(x.dtype)
//   out = torch.cat([rotated_t, rotated_h, rotated_w], -1)
// Contract: bit-exact against that chain (fp32 products, difference and sum each rounded, then one
// rounding to x's dtype; see src/ops/rope/ltx25_decoder_rope.h).
//   q, k:   [B, T, H, W, heads, D] of one shape and dtype (bf16/f16/f32), last dim contiguous, any
//           non-negative outer strides (q/k of one projection)
//   cos_t, sin_t: fp32 [T, dt/2]; cos_h, sin_h: fp32 [H, dh/2]; cos_w, sin_w: fp32 [W, dw/2]; last
//           dim contiguous; dt + dh + dw = D
//   q_out, k_out: q's shape and dtype, last dim contiguous; each may be its input (in place); no
//           other overlap
// Elements: fewer than 2^31 in each of q and k.
// LTX2VideoVaeRotaryPosEmbed3D's (frame, row, column) channel split of a head dim D (a multiple of 8):
// a quarter of D, made even, to the frames, the rest halved between rows and columns, moved by 2 when
// the halves would be odd. The tables' widths are half of these.
std::array<int64_t, 3> ltx25_decoder_rope_dim_split(int64_t head_dim);
bool can_use_ltx25_decoder_rope(const TensorView& q, const TensorView& k, const TensorView& cos_t,
                                const TensorView& sin_t, const TensorView& cos_h, const TensorView& sin_h,
                                const TensorView& cos_w, const TensorView& sin_w, const TensorView& q_out,
                                const TensorView& k_out, std::string* why = nullptr);
void ltx25_decoder_rope(const TensorView& q, const TensorView& k, const TensorView& cos_t, const TensorView& sin_t,
                        const TensorView& cos_h, const TensorView& sin_h, const TensorView& cos_w,
                        const TensorView& sin_w, const TensorView& q_out, const TensorView& k_out,
                        Stream stream = {});

// diffusion.helios_qk_rope: Helios' paired Q/K RoPE (diffusers' apply_rotary_emb_transposed, applied
// by HeliosAttnProcessor to query and key) in one launch, the outputs usually q and k themselves (in
// place). The table holds each token's cos and sin side by side, each frequency repeated twice.
// Replaces, for x in (q, k):
//   x_1, x_2 = x.unflatten(-1, (-1, 2)).unbind(-1)
//   cos, sin = freqs.unsqueeze(-2).chunk(2, dim=-1)
//   out = torch.empty_like(x)
//   out[..., 0::2] = x_1 * cos[..., 0::2] - x_2 * sin[..., 1::2]
//   out[..., 1::2] = x_1 * sin[..., 1::2] + x_2 * cos[..., 0::2]
// Contract: bit-exact against that chain (fp32 products, difference and sum each rounded, one rounding
// to x's dtype).
//   q, k:   [B, S, heads, D] of one shape and dtype (bf16/f16/f32), D even, last dim contiguous, any
//           non-negative outer strides (q/k of a packed projection)
//   freqs:  fp32 [B or 1, S, 2D], any non-negative strides (the contiguous table the model passes, or
//           its transposed view before .contiguous())
//   q_out, k_out: q's shape and dtype, last dim contiguous; each may be its input (in place); no
//           other overlap
// Elements: fewer than 2^31 in each of q and k.
bool can_use_helios_qk_rope(const TensorView& q, const TensorView& k, const TensorView& freqs,
                            const TensorView& q_out, const TensorView& k_out, std::string* why = nullptr);
void helios_qk_rope(const TensorView& q, const TensorView& k, const TensorView& freqs, const TensorView& q_out,
                    const TensorView& k_out, Stream stream = {});

}  // namespace dfuse
