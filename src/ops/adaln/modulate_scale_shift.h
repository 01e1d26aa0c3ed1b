// diffusion.modulate_scale_shift — replaces the eager chain `x * (1 + scale) + shift`
// (three kernels: add, mul, add). Contract: bit-exact in bf16, f16 and f32. Each eager op
// computes in float and rounds to the storage dtype, so the element is
//   t = T(1 + float(scale)); u = T(float(x) * float(t)); out = T(float(u) + float(shift))
// with the Python scalar 1 kept in float (PyTorch 2.11, reference/pytorch-eager-arithmetic.md
// §3). In f32 the roundings to storage are the identity, so f32 is bit-exact too.
#pragma once

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

template <typename T>
struct ModulateScaleShift {
  DFUSE_HD T operator()(T x, T scale, T shift) const {
    using S = Storage<T>;
    const float one_plus_scale = S::round(add_rn(1.0f, S::load(scale)));
    const float scaled = S::round(mul_rn(S::load(x), one_plus_scale));
    return S::store(add_rn(scaled, S::load(shift)));
  }
};

// Kernel entry: in = {x, scale, shift}.
using ModulateScaleShiftEntry = void (*)(const RowwiseParams& p, Stream stream);

}  // namespace dfuse::detail
