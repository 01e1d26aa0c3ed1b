// diffusion.bias_glu — replaces the eager chain
//   h, g = (x + bias).chunk(2, dim=-1); out = h * F.silu(g)
// (three kernels: add, silu, mul; two without a bias), the gated activation of Sana's GLUMBConv
// on channels-last rows. Contract: bit-exact in bf16, f16 and f32 against the eager replicas of
// the same backend. Element, with h and g the two halves of a row of x:
//   h' = T(h + bias_h); g' = T(g + bias_g); s = T(g' / (1 + exp(-g'))); out = T(h' * s)
// and without a bias h' = h, g' = g. exp is libdevice expf on CUDA (bit-exact vs torch 2.11) and
// std::exp(float) on the host, so host and CUDA results agree only where the two exps agree.
#pragma once

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"
#include "ops/activation/silu.h"

namespace dfuse::detail {

// No bias: out = h * silu(g).
template <typename T>
struct Glu {
  DFUSE_HD T operator()(T h, T g) const {
    using S = Storage<T>;
    const float activated = S::round(silu_f(S::load(g)));
    return S::store(mul_rn(S::load(h), activated));
  }
};

template <typename T>
struct BiasGlu {
  DFUSE_HD T operator()(T h, T g, T bias_h, T bias_g) const {
    using S = Storage<T>;
    const T biased_h = S::store(add_rn(S::load(h), S::load(bias_h)));
    const T biased_g = S::store(add_rn(S::load(g), S::load(bias_g)));
    return Glu<T>{}(biased_h, biased_g);
  }
};

// Kernel entry: in = {h, g} without a bias, {h, g, bias_h, bias_g} with one (in[2] set).
using BiasGluEntry = void (*)(const RowwiseParams& p, Stream stream);

}  // namespace dfuse::detail
