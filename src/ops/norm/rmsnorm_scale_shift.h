// diffusion.rmsnorm_scale_shift and diffusion.rmsnorm_decomposed_scale_shift — replace the eager
// chains
//   F.rms_norm(x, (D,), weight, eps) * (1 + scale) + shift                  (4 kernels)
//   diffusers RMSNorm(x) * (1 + scale) + shift, RMSNorm being
//     x.float().pow(2).mean(-1, keepdim=True) ... h.to(dtype) * weight      (9 kernels)
// Contract: bit-exact against PyTorch 2.11 eager CUDA in bf16, f16 and f32. The RMSNorm output is
// reproduced as its chain computes it (common/rms_norm_arith.h: F.rms_norm's vectorized or generic
// path as aten picks it for x and weight; the decomposed chain's mean in Reduce.cuh's order for
// M = rows of x), rounded to the storage dtype; the modulate epilogue is
// ops/adaln/modulate_scale_shift.h's element (three roundings). Limits: rows of at most 8192
// elements; the decomposed chain's head-alignment step (D % 4 != 0 with rows >= 128 elements) is
// implemented from Reduce.cuh's source and not verified against torch; the dispatch aten takes can
// change with the PyTorch build (the torch op's first-sight Gate checks each signature).
#pragma once

#include "ops/adaln/modulate_scale_shift.h"
#include "ops/norm/rmsnorm_rows.h"

namespace dfuse::detail {

// The epilogue: the normalized value (rounded to T) times (1 + scale) plus shift.
template <typename T>
struct RmsNormScaleShift {
  DFUSE_HD T operator()(T normed, T scale, T shift) const { return ModulateScaleShift<T>{}(normed, scale, shift); }
};

}  // namespace dfuse::detail
