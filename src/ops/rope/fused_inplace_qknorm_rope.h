// diffusion.fused_inplace_qknorm_rope (exact form) — replaces the split QK-norm + RoPE chain: an
// RMSNorm kernel per q and k (F.rms_norm or diffusers' decomposed RMSNorm, ops/norm's arithmetic:
// common/rms_norm_arith.h) whose output is rounded to the storage dtype, then the rotate-half RoPE
// chain (ops/rope/rope_rotate_half.h) on the rounded values, written back in place. Contract:
// bit-exact against that chain (dfuse/ops/rope.h). Per head: the row's statistic in the chain's
// reduction order, every element normalized and rounded to T, then rotated from the rounded values
// (the tail beyond R keeps the normalized value).
#pragma once

#include <cstdint>

#include "common/rows.h"
#include "dfuse/core/device.h"
#include "dfuse/ops/rope.h"
#include "ops/norm/rmsnorm_rows.h"

namespace dfuse::detail {

// One of q, k: its RMSNorm row parameters (x = rows.in[0], written through rows.out = the same
// view) and its rotate-half tables.
struct QkNormRopeParams {
  RmsNormRowsParams norm;
  DType table_dtype = DType::bf16;
  RopeMath math = RopeMath::fp32_opmath;
  int64_t rot_dim = 0;
  RowOperand cos, sin;
};

using QkNormRopeEntry = void (*)(const QkNormRopeParams& q, const QkNormRopeParams& k, Stream stream);

}  // namespace dfuse::detail
