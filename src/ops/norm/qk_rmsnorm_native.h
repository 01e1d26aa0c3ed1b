// diffusion.qk_rmsnorm_native, diffusion.qk_rmsnorm and diffusion.qk_rmsnorm_storage_dtype — replace
// the per-head QK-norm module calls
//   query = attn.norm_q(query); key = attn.norm_k(key)        (query/key [B, S, H, Dh])
// with norm_q/norm_k diffusers' RMSNorm(Dh) (qk_rmsnorm_native: 9 kernels per tensor, chain
// x.float().pow(2).mean(-1) ... .to(dtype) * weight), torch.nn.RMSNorm(Dh) (qk_rmsnorm: F.rms_norm)
// or Z-Image's RMSNorm (qk_rmsnorm_storage_dtype: every op in q's dtype, Dh = 128).
// Contract: bit-exact against PyTorch 2.11 eager CUDA in bf16, f16 and f32, each tensor normalized as
// its own module call over M = numel / Dh rows: the decomposed chain's mean in Reduce.cuh's 32-lane
// order (any M for Dh = 128, M >= 16 above), the storage-dtype chain's over 16-byte vectors of T, F.rms_norm's vectorized path; statistics by cuda/rms_norm_stats.cuh's warp
// functions, elements by common/rms_norm_arith.h. One launch for q and k, a warp per row, each row
// read and written once. Limits: Dh a multiple of 128 up to 512; the refused configurations are
// listed in dfuse/ops/rmsnorm.h.
#pragma once

#include "ops/norm/rmsnorm_rows.h"

namespace dfuse::detail {

constexpr int64_t kQkRmsNormMaxHeadDim = 512;

// q's and k's rows (RmsNormRowsParams with no epilogue operands), normalized in one launch.
struct QkRmsNormParams {
  RmsNormRowsParams q, k;
};

using QkRmsNormEntry = void (*)(const QkRmsNormParams& p, Stream stream);

}  // namespace dfuse::detail
