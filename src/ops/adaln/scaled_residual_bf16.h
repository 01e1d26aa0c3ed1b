// diffusion.scaled_residual_bf16 (the spec's try_fused_scaled_residual_bf16) — replaces LingBot
// World's causal-block residual with an fp32 per-frame gate, written as Wan's blocks write it:
//   x = (x.float() + y * gate).type_as(x)        # == (x + y * gate).to(torch.bfloat16)
// x (the residual) and y (the branch output) bf16, gate fp32 (per frame [B, F, 1, D] against
// x [B, F, HW, D], per batch, per token, or a chunk slice). Eager runs three kernels (the mul
// promotes to fp32, the add, the cast back) and writes two fp32 intermediates; this op reads the
// three operands once and writes bf16. It produces only the residual: the normalized output that
// the original fused path also computes goes unused before camera conditioning.
//
// Contract: bit-exact. Type promotion makes both eager ops fp32 with one rounding each, then one
// RNE cast to bf16 (reference/pytorch-eager-arithmetic.md §3, `x_bf16 * y_fp32`):
//   out = bf16(fl32(float(x) + fl32(float(y) * gate)))
#pragma once

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

struct ScaledResidualBf16 {
  DFUSE_HD bf16_t operator()(bf16_t residual, bf16_t update, float gate) const {
    using S = Storage<bf16_t>;
    const float scaled = mul_rn(S::load(update), gate);
    return S::store(add_rn(S::load(residual), scaled));
  }
};

// in = {residual (bf16), update (bf16), gate (f32)}; the row geometry is the residual's. The gate
// operand's strides are in f32 elements.
using ScaledResidualBf16Entry = void (*)(const RowwiseParams& p, Stream stream);

}  // namespace dfuse::detail
