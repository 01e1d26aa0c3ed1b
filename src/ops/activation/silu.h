// SiLU in float as aten's silu_kernel computes it: x / (1 + exp(-x)) with an IEEE division and no
// fast math (reference/pytorch-eager-arithmetic.md §4). nvcc folds libdevice expf's final 2^n
// scaling into the + 1 as an exact FFMA, so the sum equals __fadd_rn(1, expf(-x)). The fused
// activation kernels' one home for the formula; the eager replica writes its own.
#pragma once

#include "common/arith.h"

namespace dfuse::detail {

// 1 + exp(-x), SiLU's divisor (also cuda/paired_silu.cuh's).
DFUSE_HD float silu_denominator(float x) { return add_rn(1.0f, exp_f(-x)); }

DFUSE_HD float silu_f(float x) { return div_rn(x, silu_denominator(x)); }

}  // namespace dfuse::detail
