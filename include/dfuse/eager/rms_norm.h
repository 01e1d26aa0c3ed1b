// dfuse eager replicas: PyTorch 2.11's CUDA RMSNorm chains, host and CUDA
// (reference/pytorch-eager-arithmetic.md §2).
//
//  rms_norm          F.rms_norm(x, (N,), weight, eps), aten::_fused_rms_norm: aten's path choice
//                    (vectorized kernel when N % 4 == 0, N <= 2^24 and x, weight are 4-element
//                    aligned, a non-contiguous operand counting as aligned because aten copies it;
//                    else the generic two-kernel path). Vectorized: (32, 4) block per row, thread t
//                    folds chunks t, t+128, ... with fma(v, v, acc), shuffle-down 16..1, warps
//                    0+2, 1+3, 0+1, ms = sum / N, rstd = rsqrtf(ms + eps), y = w * (rstd * x).
//                    Generic: 512-thread Welford, rstd = rsqrtf(fma(mean, mean, var) + eps),
//                    y = (x * rstd) * w. One rounding to the storage dtype.
//  mean_last_dim     x.mean(-1) of a contiguous bf16/f16/f32 tensor, Reduce.cuh's configuration and
//                    order for its (rows, N) (block (bw, bh), 16-byte loads (4 floats, 8 bf16/f16)
//                    from N >= 128 with the head-alignment step, one float accumulator per vector
//                    element, shared-memory tree then shuffle-down, times float(rows)/float(numel)),
//                    rounded to x's dtype. Configurations that split a row across warps (N >= ~8192)
//                    are refused.
//  to_dtype          x.to(dtype) between bf16, f16 and f32 (RNE), any strides in, out contiguous or not.
//  rsqrt, tanh       torch.rsqrt / torch.tanh: rsqrtf / tanhf in float, rounded to the dtype.
//  rms_norm_decomposed_chain   diffusers' RMSNorm, each op materialized:
//                    xf = x.float(); v = xf.pow(2).mean(-1, keepdim=True); r = torch.rsqrt(v + eps);
//                    h = (xf * r).to(dtype); out = h * weight (or h without a weight).
//  rms_norm_storage_dtype_chain   Z-Image's RMSNorm, every op in x's dtype:
//                    x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.
// rsqrt is rsqrtf on CUDA and the correctly rounded value on the host, so host replicas match torch
// only where the two agree; reduction orders are exact on both.
//
// Accepted: x of rank 1..4 (bf16, f16, f32), last dim contiguous, any outer strides; weight null or
// [N] contiguous of x's dtype; out of x's shape, last dim contiguous.
#pragma once

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse::eager {

void rms_norm(const TensorView& x, const TensorView* weight, double eps, const TensorView& out, Stream stream = {});
// out: float [rows] (any shape of rows elements, contiguous); x: contiguous float [.., N].
void mean_last_dim(const TensorView& x, const TensorView& out, Stream stream = {});
void to_dtype(const TensorView& x, const TensorView& out, Stream stream = {});
void rsqrt(const TensorView& x, const TensorView& out, Stream stream = {});
void tanh(const TensorView& x, const TensorView& out, Stream stream = {});

void rms_norm_decomposed_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& out,
                               Workspace& ws, Stream stream = {});

void rms_norm_storage_dtype_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& out,
                                  Workspace& ws, Stream stream = {});

// RMSNorm(x) * scale and residual + torch.tanh(gate) * RMSNorm(y), RMSNorm the storage-dtype chain.
void rmsnorm_scale_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                         const TensorView& out, Workspace& ws, Stream stream = {});
void rmsnorm_tanh_residual_chain(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                 const TensorView* weight, double eps, const TensorView& out, Workspace& ws,
                                 Stream stream = {});

// RMSNorm(x) * (1 + scale) + shift, RMSNorm being F.rms_norm or the diffusers chain.
void rmsnorm_scale_shift_chain(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                               const TensorView& scale, const TensorView& shift, const TensorView& out, Workspace& ws,
                               Stream stream = {});

}  // namespace dfuse::eager
