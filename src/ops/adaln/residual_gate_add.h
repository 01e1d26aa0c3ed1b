// diffusion.residual_gate_add — replaces the eager chain `residual + gate * update` (two
// kernels: mul, add). Contract: bit-exact in bf16, f16 and f32. Element:
//   p = T(float(gate) * float(update)); out = T(float(residual) + float(p))
// (PyTorch 2.11 rounds the product to the storage dtype before the add;
// reference/pytorch-eager-arithmetic.md §3).
#pragma once

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

template <typename T>
struct ResidualGateAdd {
  DFUSE_HD T operator()(T residual, T gate, T update) const {
    using S = Storage<T>;
    const float gated = S::round(mul_rn(S::load(gate), S::load(update)));
    return S::store(add_rn(S::load(residual), gated));
  }
};

// Kernel entry: in = {residual, gate, update}.
using ResidualGateAddEntry = void (*)(const RowwiseParams& p, Stream stream);

}  // namespace dfuse::detail
