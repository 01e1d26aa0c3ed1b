// dfuse eager chains of the request-gated norm + epilogue ops with fp32 internals
// (norm_scale_shift, rmsnorm_modulate_fp32, rmsnorm_tanh_residual_fp32), composed from the eager
// replicas with every intermediate materialized as eager PyTorch does:
//  - the lossless chain each op is close to (every op rounded to the storage dtype), and
//  - the same chain on float copies of the operands, rounded once at the end, which each op
//    reproduces bit for bit.
#pragma once

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/norm.h"

namespace dfuse::eager {

// norm(x) * (1 + scale) + shift, norm = F.layer_norm(x, (D,), weight, bias, eps) or
// F.rms_norm(x, (D,), weight, eps) (bias null); weight/bias may be null.
void norm_scale_shift_chain(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias,
                            double eps, const TensorView& scale, const TensorView& shift, const TensorView& out,
                            Workspace& ws, Stream stream = {});
// (norm(x.float(), (D,), weight.float(), bias.float(), eps) * (1 + scale.float()) + shift.float())
//     .to(x.dtype)
void norm_scale_shift_fp32_chain(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias,
                                 double eps, const TensorView& scale, const TensorView& shift, const TensorView& out,
                                 Workspace& ws, Stream stream = {});
// (RMSNorm(x.float()) * (1 + scale.float()) + shift.float()).to(x.dtype), RMSNorm(v) = v *
// torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * weight.float() (diffusers' RMSNorm module on
// float tensors). The lossless chain is rmsnorm_scale_shift_chain(diffusers_decomposed, ...).
void rmsnorm_modulate_fp32_chain(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                                 const TensorView& shift, const TensorView& out, Workspace& ws, Stream stream = {});
// (residual.float() + torch.tanh(gate.float()) * RMSNorm(y.float())).to(y.dtype), RMSNorm(v) =
// v * torch.rsqrt(v.pow(2).mean(-1, keepdim=True) + eps) * weight.float() (Z-Image's module on
// float tensors). The lossless chain is rmsnorm_tanh_residual_chain (dfuse/eager/rms_norm.h).
void rmsnorm_tanh_residual_fp32_chain(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                      const TensorView* weight, double eps, const TensorView& out, Workspace& ws,
                                      Stream stream = {});

}  // namespace dfuse::eager
