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

// ---- request-gated (quality "extra-high"), fp32 internals -----------------------------------------

// diffusion.rmsnorm_modulate_fp32: LTX-2's RMSNorm + modulate in one launch with no intermediate
// rounding (quality "extra-high"), replacing the chain (diffusers' RMSNorm module, as LTX-2's norm1,
// norm2, norm3 and its audio norms are)
//   v = x.float().pow(2).mean(-1, keepdim=True); h = x * torch.rsqrt(v + eps)
//   n = h.to(weight.dtype) * weight   (no weight: h.to(x.dtype))
//   out = n * (1 + scale) + shift                                     (rmsnorm_decomposed_scale_shift)
// with fp32 internals: the float mean in Reduce.cuh's order for M rows (as the chain), h and h *
// weight, 1 + scale, the product and the sum in float, one rounding. The kernel is norm_scale_shift's
// (ops/norm/norm_fp32_rows.h) with these statistics. Contract: close to the chain,
//   |out - chain| <= 7u * (|n * (1 + scale)| + |shift|) + 2 eta * ((|weight| + 1) * |1 + scale| + 2)
// per element, n the chain's normalized value, u the unit roundoff, eta half the smallest subnormal
// (as norm_scale_shift), |weight| 0 without a weight (the chain rounds h and h * weight: one
// rounding more than norm_scale_shift's, whose error below the normal range the weight scales);
// bit-exact against the chain on float copies, (RMSNorm(x.float()) [weight.float()] * (1 +
// scale.float()) + shift.float()).to(x.dtype), and in f32 against the chain itself. Operands as
// norm_scale_shift (no bias); refused where torch's float mean would split a row across warps (D
// above about 8160).
bool can_use_rmsnorm_modulate_fp32(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                                   const TensorView& shift, const TensorView& out, std::string* why = nullptr);
void rmsnorm_modulate_fp32(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                           const TensorView& shift, const TensorView& out, Stream stream = {});

// diffusion.rmsnorm_tanh_residual_fp32: the request-gated form of rmsnorm_tanh_residual (the
// spec's BF16-native gate RMSNorm, RMSNorm + tanh + mul + add in one pass), replacing
//   residual + torch.tanh(gate) * RMSNorm(y),  RMSNorm(y) = y * torch.rsqrt(y.pow(2).mean(-1,
//   keepdim=True) + eps) * weight,  every op rounded to y's dtype (storage_dtype chain, 9 kernels)
// with fp32 internals: the squares, their mean (Reduce.cuh's order for a float tensor of M rows),
// rsqrt, the normalized value, tanh, the product and the sum all in float, one rounding at the end.
// It is that chain run on float copies and rounded once: bit-exact against
//   (residual.float() + torch.tanh(gate.float()) * RMSNorm(y.float()) [weight.float()]).to(y.dtype)
// and, in f32, against the chain itself. Contract against the bf16/f16 chain: close,
//   |out - chain| <= 10u * (|tanh(gate) * n| + |residual|) + eta * (3 |tanh(gate) * n| / (m + eps)
//                    + 2 |tanh(gate)| * (|weight| + 1) + 2 |n| + 4)   per element,
// n the chain's RMSNorm(y), m = mean(y^2) over the row, u the unit roundoff (2^-8 bf16, 2^-11 f16),
// eta half the smallest subnormal (2^-134 bf16, 2^-25 f16: the chain's roundings below the normal
// range err by up to eta, its statistics' too), |weight| 0 without a weight, where the chain's own
// intermediates do not overflow (f16 squares of |y| > 256 are Inf in the chain) and its statistics
// stay clear of underflow (m + eps >= 16 eta; f16: 4.8e-7). Operands as rmsnorm_tanh_residual;
// refused where torch's float mean would split a row across warps (D above about 8160; the
// decomposed chain's limit).
bool can_use_rmsnorm_tanh_residual_fp32(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                        const TensorView* weight, double eps, const TensorView& out,
                                        std::string* why = nullptr);
void rmsnorm_tanh_residual_fp32(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                const TensorView* weight, double eps, const TensorView& out, Stream stream = {});

}  // namespace dfuse
