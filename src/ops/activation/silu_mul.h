// diffusion.silu_mul — replaces the eager chain `F.silu(a) * b` (two kernels: silu, mul), the
// SwiGLU of FLUX.2-style MLPs with gate and up projections as separate tensors or as the two
// halves of one packed projection. Contract: bit-exact in bf16, f16 and f32 against the eager
// replicas of the same backend. Element:
//   s = T(float(a) / (1 + exp(-float(a)))); out = T(float(s) * float(b))
// exp is libdevice expf on CUDA (bit-exact vs torch 2.11) and std::exp(float) on the host, so
// host and CUDA results agree only where the two exps agree.
#pragma once

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"
#include "ops/activation/silu.h"

namespace dfuse::detail {

template <typename T>
struct SiluMul {
  DFUSE_HD T operator()(T a, T b) const {
    using S = Storage<T>;
    const float activated = S::round(silu_f(S::load(a)));
    return S::store(mul_rn(activated, S::load(b)));
  }
};

// Kernel entry: in = {a, b}.
using SiluMulEntry = void (*)(const RowwiseParams& p, Stream stream);

}  // namespace dfuse::detail
