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
// rounding between the two (the spec's default, one bf16 rounding away) is not provided.
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

}  // namespace dfuse
