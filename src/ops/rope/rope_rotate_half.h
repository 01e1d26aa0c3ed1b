// diffusion.rope_rotate_half — replaces the rotate-half RoPE chain of a projection (about 7
// eager kernels: narrow/chunk views, neg, cat, mul, mul, add, cat of the untouched tail; with
// RopeMath::fp32_opmath also the .float() casts and the final .to(dtype)). Contract: bit-exact
// against that chain (dfuse/ops/rope.h spells it out). Element i < R/2 of a head, with
// x1 = x[i], x2 = x[i + R/2], c/s the table values of the same column:
//   out[i]       = x1 * c[i]       + (-x2) * s[i]
//   out[i + R/2] = x2 * c[i + R/2] +   x1  * s[i + R/2]
// fp32_opmath: products and sum in fp32 (IEEE mul, IEEE add: aten's add is fma(b, 1, a)), one
// rounding to T. storage_dtype: each product rounded to T, the sum in fp32 rounded to T (aten's
// opmath for every binary op of the chain). Columns >= R are copied bit for bit (torch.cat).
// The negation is exact, so -x2 * s is computed as the product of the negated value.
#pragma once

#include <cstdint>

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"
#include "dfuse/ops/rope.h"

namespace dfuse::detail {

// One rotated element: a * c + b * s, where b is the partner value already negated for the
// first half. a, b, c, s are the exact float values of the stored operands.
template <typename T, RopeMath M>
DFUSE_HD T rotate_half_element(float a, float b, float c, float s) {
  using St = Storage<T>;
  if constexpr (M == RopeMath::fp32_opmath) {
    return St::store(add_rn(mul_rn(a, c), mul_rn(b, s)));
  } else {
    return St::store(add_rn(St::round(mul_rn(a, c)), St::round(mul_rn(b, s))));
  }
}

struct RopeRotateHalfParams {
  DType dtype = DType::bf16;        // x and out
  DType table_dtype = DType::bf16;  // cos and sin
  RopeMath math = RopeMath::fp32_opmath;
  int device = 0;
  RowGeometry geom;  // rows are heads of x: cols = D
  int64_t rot_dim = 0;  // R
  RowOperand x, cos, sin, out;
};

using RopeRotateHalfEntry = void (*)(const RopeRotateHalfParams& p, Stream stream);

}  // namespace dfuse::detail
