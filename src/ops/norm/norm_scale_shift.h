// diffusion.norm_scale_shift (and diffusion.rmsnorm_modulate_fp32, LTX-2's diffusers RMSNorm +
// modulate: the same epilogue on the diffusers chain's float statistics) — the request-gated
// replacement of the eager chain
//   n = F.layer_norm(x, (D,), weight, bias, eps)  or  F.rms_norm(x, (D,), weight, eps)
//   out = n * (1 + scale) + shift                                      (four kernels)
// with fp32 internals in one pass (quality "extra-high"). The norm's fp32 statistics are aten's, in
// the reduction order of the path aten takes for x (ops/norm/norm_fp32_rows.h), so the normalized
// value equals the chain's before its rounding; the epilogue below keeps it in float and rounds once.
// Contract: close to the chain, |out - chain| <= 6u (|n (1 + scale)| + |shift|) + 2 eta (|1 + scale| +
// 2) (dfuse/ops/norm.h); bit-exact against the fp32 chain (norm(x.float(), ...) * (1 + scale.float())
// + shift.float()).to(dtype) where aten's path for x.float() is x's.
// Bound: the chain rounds n, 1 + scale, the product and the sum (4 roundings of at most u each, the
// first three relative to |n (1 + scale)|), the fused op the result once (u relative to |n (1 +
// scale) + shift|) and three float roundings (2^-24 each): |out - chain| <= 5.1u |n (1 + scale)| +
// 2.1u |shift|. Below the normal range a rounding errs by up to eta (half the smallest subnormal)
// instead: the chain's n (times |1 + scale|), product and sum and the fused result (1 + scale is 0 or
// normal): eta (|1 + scale| + 3), within 2 eta (|1 + scale| + 2) with the second-order terms.
#pragma once

#include "dfuse/ops/norm.h"
#include "ops/norm/norm_fp32_rows.h"

namespace dfuse::detail {

template <typename T>
struct ModulateFp32 {
  DFUSE_HD T operator()(float normed, T scale, T shift) const {
    using S = Storage<T>;
    return S::store(add_rn(mul_rn(normed, add_rn(1.0f, S::load(scale))), S::load(shift)));
  }
};


}  // namespace dfuse::detail
