// dfuse ops, normalization family: RMSNorm with its adaLN and per-head epilogues.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts
// (and, given `why`, says which guard failed), and <op>(...) re-checks and throws
// dfuse::Unsupported naming the failed guard. The backend is chosen by the device of the
// tensors. Outputs are caller-owned.
//
// Two eager RMSNorm chains exist in diffusion models and they give different bits, so every op
// takes the chain it replaces:
//   RmsNormChain::torch_rms_norm        F.rms_norm(x, (D,), weight, eps) (torch.nn.RMSNorm): aten's
//                                       fused kernel; the vectorized path (sum of squares by fma,
//                                       128-thread tree, ms = sum / D) when D % 4 == 0 and x, weight
//                                       are 4-element aligned or non-contiguous, else the generic
//                                       path (512-thread Welford, rstd = rsqrt(mean^2 + var + eps)).
//                                       The normalized value is weight * (rstd * x), rounded once.
//   RmsNormChain::diffusers_decomposed  diffusers' RMSNorm module:
//                                         v = x.float().pow(2).mean(-1, keepdim=True)
//                                         h = x.float() * torch.rsqrt(v + eps)
//                                         h = h.to(weight.dtype) * weight   (no weight: h.to(x.dtype))
//                                       with the mean in Reduce.cuh's order for this row count and
//                                       length (mean over M = x.numel() / D rows).
//   RmsNormChain::storage_dtype         Z-Image's RMSNorm: x * torch.rsqrt(x.pow(2).mean(-1,
//                                       keepdim=True) + eps) * weight with x in bf16 (f16, f32):
//                                       every op rounds to x's dtype ("bf16-native statistics"); the
//                                       mean reads the T squares in Reduce.cuh's order with 16-byte
//                                       vectors. Taken by rmsnorm_scale and rmsnorm_tanh_residual.
// Statistics use rsqrtf on CUDA and the correctly rounded rsqrt on the host, so host results are
// bit-exact against the host eager replicas (include/dfuse/eager/rms_norm.h), CUDA results against
// torch.
#pragma once

#include <cstdint>
#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

enum class RmsNormChain : uint8_t {
  torch_rms_norm,        // F.rms_norm(x, (D,), weight, eps)
  diffusers_decomposed,  // x.float().pow(2).mean(-1) ... h.to(dtype) * weight
  storage_dtype,         // x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight, all in x's dtype
};
// "torch_rms_norm", "diffusers_decomposed", "storage_dtype"
const char* rms_norm_chain_name(RmsNormChain chain);

// diffusion.rmsnorm_scale_shift (chain torch_rms_norm) and
// diffusion.rmsnorm_decomposed_scale_shift (chain diffusers_decomposed):
//   out = RMSNorm(x) * (1 + scale) + shift
// bit-exact against the eager chain: the RMSNorm output rounded to the storage dtype, then
// 1 + scale, the product and the sum each rounded to the storage dtype. One pass over x.
//   x:      [..., D], rank 1..4, last dim contiguous, any outer strides, D <= 8192
//   weight: null or [D] contiguous, x's dtype
//   scale:  broadcastable to x (right-aligned), last dim contiguous or size 1: per batch [B,1,D],
//           per token [B,S,D], strided chunk(6) slices of a [B,1,6D] table
//   shift:  same rules as scale
//   out:    x's shape, last dim contiguous; may be x itself
// All operands share one dtype (bf16, f16, f32) and one device.
bool can_use_rmsnorm_scale_shift(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                                 const TensorView& scale, const TensorView& shift, const TensorView& out,
                                 std::string* why = nullptr);
void rmsnorm_scale_shift(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                         const TensorView& scale, const TensorView& shift, const TensorView& out,
                         Stream stream = {});

// Per-head QK RMSNorm of q and k, one op per chain:
//   diffusion.qk_rmsnorm_native        chain diffusers_decomposed: diffusers' RMSNorm(head_dim) modules
//                                      norm_q / norm_k (FLUX.1, Qwen-Image, ...)
//   diffusion.qk_rmsnorm               chain torch_rms_norm: torch.nn.RMSNorm(head_dim)
//   diffusion.qk_rmsnorm_storage_dtype chain storage_dtype: Z-Image's RMSNorm (every op in q's dtype)
//   q_out = RMSNorm_q(q), k_out = RMSNorm_k(k)
// bit-exact against the chain applied to q and to k, each a separate module call over its
// M = q.numel() / Dh rows (the mean's order depends on M). One launch, a warp per row.
//   q, k:              [..., Dh] of one shape, rank 1..4, last dim contiguous, any outer strides (q, k
//                      views of a packed QKV projection [B, S, 3, H, Dh] or [B, S, 3*H*Dh]);
//                      Dh a multiple of 128, at most 512 (storage_dtype: 128)
//   q_weight, k_weight: null or [Dh] contiguous, q's dtype
//   q_out, k_out:      q's shape, last dim contiguous; may be q / k themselves
// Refused: chain diffusers_decomposed where torch's mean gives a row more than 32 lanes (Dh > 128 with
// fewer than 16 rows; rows of 128 always get 32); chain torch_rms_norm where aten would take its
// generic path (a contiguous q or k, or a weight, misaligned by a fraction of 4 elements).
bool can_use_qk_rmsnorm(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView* q_weight,
                        const TensorView* k_weight, double eps, const TensorView& q_out, const TensorView& k_out,
                        std::string* why = nullptr);
void qk_rmsnorm(RmsNormChain chain, const TensorView& q, const TensorView& k, const TensorView* q_weight,
                const TensorView* k_weight, double eps, const TensorView& q_out, const TensorView& k_out,
                Stream stream = {});

// diffusion.rmsnorm_scale: out = RMSNorm(x) * scale, RMSNorm the storage-dtype chain (Z-Image's
// x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight, every op rounded to x's dtype).
// Bit-exact against that eager chain in bf16, f16 and f32. One pass over x.
//   x:      [..., D], rank 1..4, last dim contiguous, any outer strides, D <= 8192
//   weight: null or [D] contiguous, x's dtype
//   scale:  broadcastable to x (right-aligned), last dim contiguous or size 1 (per batch [B,1,D],
//           per token, chunk slices)
//   out:    x's shape, last dim contiguous; may be x itself
bool can_use_rmsnorm_scale(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                           const TensorView& out, std::string* why = nullptr);
void rmsnorm_scale(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                   const TensorView& out, Stream stream = {});

// diffusion.rmsnorm_tanh_residual: out = residual + torch.tanh(gate) * RMSNorm(y), RMSNorm the
// storage-dtype chain; tanh(gate), the product and the sum each rounded to y's dtype. Bit-exact
// against that eager chain in bf16, f16 and f32. One pass over y and residual.
//   y:        [..., D] as rmsnorm_scale's x
//   residual: y's shape, last dim contiguous, any outer strides
//   gate:     broadcastable to y (per batch [B,1,D], per token, chunk slices)
//   weight:   null or [D] contiguous, y's dtype
//   out:      y's shape, last dim contiguous; may be residual itself
bool can_use_rmsnorm_tanh_residual(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                   const TensorView* weight, double eps, const TensorView& out,
                                   std::string* why = nullptr);
void rmsnorm_tanh_residual(const TensorView& residual, const TensorView& gate, const TensorView& y,
                           const TensorView* weight, double eps, const TensorView& out, Stream stream = {});

}  // namespace dfuse
