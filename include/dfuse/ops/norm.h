// dfuse ops, normalization family (LayerNorm and RMSNorm with their adaLN epilogues).
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts
// (and, given `why`, says which guard failed), and <op>(...) re-checks and throws
// dfuse::Unsupported naming the failed guard. The backend is chosen by the device of the
// tensors. Outputs are caller-owned.
#pragma once

#include <cstdint>
#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

// ---- LayerNorm -----------------------------------------------------------------------------------

// diffusion.layernorm_modulate: out = F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift,
// bit-exact against PyTorch 2.11's eager CUDA chain in bf16, f16 and f32: the statistics in the
// reduction order of the LayerNorm path aten takes for this x (vectorized kernel when D % 4 == 0
// and x is 4-element aligned or non-contiguous, else the generic two-kernel path), rsqrtf, the
// normalized value rounded to the storage dtype, then 1 + scale, the product and the sum each
// rounded to the storage dtype. One pass: the row is read, reduced and written once.
//   x:      [..., D], rank 1..4, last dim contiguous, any outer strides
//   scale:  broadcastable to x (right-aligned), last dim contiguous or size 1: per batch [B,1,D],
//           per token [B,S,D], strided chunk(6) slices of a [B,1,6D] table
//   shift:  same rules as scale
//   out:    x's shape, last dim contiguous; may be x itself
// All operands share one dtype (bf16, f16, f32) and one device. On the host, rsqrt is correctly
// rounded (CUDA: rsqrtf), so host results are bit-exact against the host eager replicas.
bool can_use_layernorm_modulate(const TensorView& x, const TensorView& scale, const TensorView& shift, double eps,
                                const TensorView& out, std::string* why = nullptr);
void layernorm_modulate(const TensorView& x, const TensorView& scale, const TensorView& shift, double eps,
                        const TensorView& out, Stream stream = {});

// diffusion.qk_head_layernorm: q_out = F.layer_norm(q, (Dh,), q_weight, q_bias, eps) and
// k_out = F.layer_norm(k, (Dh,), k_weight, k_bias, eps) in one launch (per-head QK LayerNorm),
// bit-exact against PyTorch 2.11's eager CUDA LayerNorm in bf16, f16 and f32, each tensor in the
// path aten takes for it (vectorized when Dh % 4 == 0 and the operands are aligned or
// non-contiguous, else generic), with that path's reduction order and affine formula.
//   q, k:          [..., Dh] (e.g. [B, S, H, Dh]), rank 1..4, last dim contiguous, any outer strides
//                  (views of a packed projection); the same dtype, their own shapes
//   *_weight/bias: null or 1-D [Dh] of q's dtype, any stride
//   q_out, k_out:  q's / k's shape, last dim contiguous; each may be its input itself
bool can_use_qk_head_layernorm(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                               const TensorView* q_bias, const TensorView* k_weight, const TensorView* k_bias,
                               double eps, const TensorView& q_out, const TensorView& k_out,
                               std::string* why = nullptr);
void qk_head_layernorm(const TensorView& q, const TensorView& k, const TensorView* q_weight, const TensorView* q_bias,
                       const TensorView* k_weight, const TensorView* k_bias, double eps, const TensorView& q_out,
                       const TensorView& k_out, Stream stream = {});

// diffusion.layernorm_folded_modulate: the request-gated (quality "extra-high") form of
// layernorm_modulate, out = F.layer_norm(x, (D,), weight=1 + scale, bias=shift, eps): the modulate
// folded into LayerNorm's affine step, so the normalized value and the product are not rounded to
// the storage dtype. Contract against the lossless chain F.layer_norm(x, (D,), eps=eps) *
// (1 + scale) + shift: close,
//   |out - chain| <= 4u * (|n * (1 + scale)| + |shift|) + 2 eta * (|1 + scale| + 2)   per element,
// with n the chain's normalized value, u the dtype's unit roundoff (2^-8 bf16, 2^-11 f16, 2^-24 f32)
// and eta half its smallest subnormal (2^-134, 2^-25, 2^-150: the chain's roundings below the normal
// range err by up to eta, n's times |1 + scale|); bit-exact against torch's F.layer_norm(x, (D,),
// (1 + scale).reshape(D), shift.reshape(D), eps) (1 + scale rounded to the dtype first, as eager;
// aten's path for x and shift).
//   x:            [..., D], rank 1..4, last dim contiguous, any outer strides
//   scale, shift: one row for all of x ([D], [1, D], [1, 1, D], a chunk(6) slice of a [1, 1, 6D]
//                 table), last dim contiguous
//   out:          x's shape, last dim contiguous; may be x itself
bool can_use_layernorm_folded_modulate(const TensorView& x, const TensorView& scale, const TensorView& shift,
                                       double eps, const TensorView& out, std::string* why = nullptr);
void layernorm_folded_modulate(const TensorView& x, const TensorView& scale, const TensorView& shift, double eps,
                               const TensorView& out, Stream stream = {});

// diffusion.fp32_layernorm_bf16 (the spec's try_fused_fp32_layernorm_bf16; diffusers'
// FP32LayerNorm on a half-precision activation):
//   out = F.layer_norm(x.float(), (D,), weight, bias, eps).to(x.dtype)
// bit-exact against PyTorch 2.11's eager CUDA chain: the statistics and element of aten's fp32
// LayerNorm in the path it takes for the fp32 copy of x (a fresh, aligned tensor: vectorized when
// D % 4 == 0 and weight/bias are 16-byte aligned or non-contiguous, else generic), then one
// round-to-nearest-even to x's dtype. The fp32 intermediate is never written.
//   x:      [..., D] bf16 or f16, rank 1..4, last dim contiguous, any outer strides
//   weight: null or f32 [D], any stride;  bias: null or f32 [D], any stride
//   out:    x's shape and dtype, last dim contiguous; may be x itself
bool can_use_fp32_layernorm_bf16(const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                                 const TensorView& out, std::string* why = nullptr);
void fp32_layernorm_bf16(const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                         const TensorView& out, Stream stream = {});

// ---- residual + norm -----------------------------------------------------------------------------

// The norm of diffusion.scale_residual_norm_scale_shift (there: layer_norm affine-free, the weight
// null) and of diffusion.norm_scale_shift.
enum class NormKind : uint8_t {
  layer_norm,  // F.layer_norm(x, (D,), weight, bias, eps)
  rms_norm,    // F.rms_norm(x, (D,), weight, eps)
};
using ResidualNorm = NormKind;

// diffusion.scale_residual_norm_scale_shift: the gated residual step and the next block's
// modulated norm in one pass,
//   residual_out = residual + gate * update
//   out          = norm(residual_out) * (1 + scale) + shift
// bit-exact against PyTorch 2.11's eager CUDA chain in bf16, f16 and f32 (both outputs): the product
// and the sum rounded to the storage dtype; the norm in the path aten takes for the chain's fresh,
// contiguous r (vectorized when D % 4 == 0, for rms_norm also a 4-element aligned weight; else
// generic) with that path's reduction order, the normalized value rounded once; then 1 + scale, the
// product and the sum each rounded. One pass: r is written once and its statistics come from the
// values the kernel computed (r is never re-read from memory).
//   residual:      [..., D], rank 1..4, last dim contiguous, any outer strides, D <= 8192
//   gate:          broadcastable to residual, last dim contiguous or size 1: per batch [B,1,D],
//                  per token [B,S,1] or [B,S,D], chunk(6) slices of a [B,1,6D] table
//   update:        broadcastable to residual (normally residual's shape), last dim contiguous
//   weight:        rms_norm: null or [D] contiguous; layer_norm: must be null
//   scale, shift:  as gate
//   residual_out:  residual's shape, last dim contiguous; may be residual itself
//   out:           residual's shape, last dim contiguous; overlaps no other operand
// All operands share one dtype and one device; eps finite and >= 0. On the host rsqrt is correctly
// rounded (CUDA: rsqrtf), so host results are bit-exact against the host eager replicas.
bool can_use_scale_residual_norm_scale_shift(ResidualNorm norm, const TensorView& residual, const TensorView& gate,
                                             const TensorView& update, const TensorView* weight, double eps,
                                             const TensorView& scale, const TensorView& shift,
                                             const TensorView& residual_out, const TensorView& out,
                                             std::string* why = nullptr);
void scale_residual_norm_scale_shift(ResidualNorm norm, const TensorView& residual, const TensorView& gate,
                                     const TensorView& update, const TensorView* weight, double eps,
                                     const TensorView& scale, const TensorView& shift, const TensorView& residual_out,
                                     const TensorView& out, Stream stream = {});

// ---- request-gated norm + modulate with fp32 internals -------------------------------------------

// diffusion.norm_scale_shift: the request-gated (quality "extra-high") replacement of
//   n = F.layer_norm(x, (D,), weight, bias, eps)  or  F.rms_norm(x, (D,), weight, eps)
//   out = n * (1 + scale) + shift                                     (four kernels)
// in one pass with fp32 internals: the norm's fp32 statistics in aten's reduction order for the path
// it takes for x (and weight, bias), the normalized value kept in float, 1 + scale, the product and
// the sum in float, one rounding to the storage dtype. Contract: close to that chain (whose n, 1 +
// scale, product and sum are each rounded to the storage dtype):
//   |out - chain| <= 6u * (|n * (1 + scale)| + |shift|) + 2 eta * (|1 + scale| + 2)   per element,
// n the chain's normalized value, u the unit roundoff (2^-8 bf16, 2^-11 f16, 2^-24 f32), eta half
// the smallest subnormal (2^-134 bf16, 2^-25 f16, 2^-150 f32: the chain's roundings below the normal
// range err by up to eta, n's times |1 + scale|); NaN/Inf inputs give NaN/Inf where the chain has
// them; in f32 the two are equal. Bit-exact against the fp32 chain (norm(x.float(), (D,),
// weight.float(), bias.float(), eps) * (1 + scale.float()) + shift.float()).to(x.dtype) (Wan's
// form) whenever aten takes the same path for x as for x.float(): always in f32; in bf16/f16 when
// D % 4 != 0 or x, weight, bias are 4-element aligned (or x non-contiguous).
//   x:            [..., D], rank 1..4, last dim contiguous, any outer strides, 1 <= D <= 8192
//   weight:       null or [D] contiguous, x's dtype
//   bias:         layer_norm: null or [D] contiguous, x's dtype; rms_norm: must be null
//   scale, shift: broadcastable to x (right-aligned), last dim contiguous or size 1: per batch
//                 [B, 1, D], per token [B, S, D], per frame [B, F, 1, D] against x [B, F, HW, D],
//                 a scalar (0-d or [1]), strided chunk(6) slices of a [B, 1, 6D] table
//   out:          x's shape, last dim contiguous; may be x itself
// All operands share one dtype (bf16, f16, f32) and one device; eps finite and >= 0. On the host
// rsqrt is correctly rounded (CUDA: rsqrtf), as in the host eager replicas.
bool can_use_norm_scale_shift(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias,
                              double eps, const TensorView& scale, const TensorView& shift, const TensorView& out,
                              std::string* why = nullptr);
void norm_scale_shift(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                      const TensorView& scale, const TensorView& shift, const TensorView& out, Stream stream = {});

}  // namespace dfuse
