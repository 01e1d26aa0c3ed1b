// diffusion.bias_silu — replaces the eager chain `F.silu(x + bias)` (two kernels: add, silu), the
// bias and activation after a bias-free projection or 1x1 conv (Sana's GLUMBConv). Contract:
// bit-exact in bf16, f16 and f32 against the eager replicas of the same backend. Element:
//   t = T(float(x) + float(bias)); out = T(float(t) / (1 + exp(-float(t))))
// exp is libdevice expf on CUDA (bit-exact vs torch 2.11) and std::exp(float) on the host, so
// host and CUDA results agree only where the two exps agree.
#pragma once

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"
#include "ops/activation/silu.h"

namespace dfuse::detail {

template <typename T>
struct BiasSilu {
  DFUSE_HD T operator()(T x, T bias) const {
    using S = Storage<T>;
    const float biased = S::round(add_rn(S::load(x), S::load(bias)));
    return S::store(silu_f(biased));
  }
};

// Kernel entry: in = {x, bias}.
using BiasSiluEntry = void (*)(const RowwiseParams& p, Stream stream);

}  // namespace dfuse::detail
