// diffusion.layernorm_folded_modulate — the request-gated replacement of
//   F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift            (four kernels)
// by F.layer_norm(x, (D,), weight=1 + scale, bias=shift, eps) in one pass (quality "extra-high").
// Contract: close to that chain (the normalized value and the product are no longer rounded to the
// storage dtype; bound in dfuse/ops/norm.h); bit-exact against torch's own
// F.layer_norm(x, (D,), (1 + scale).reshape(D), shift.reshape(D), eps): 1 + scale rounded to the
// dtype, then aten's affine element (fma(gamma, rstd * (x - mean), beta) in the vectorized path,
// fma((x - mean) * rstd, gamma, beta) in the generic one) for the path aten takes for x and shift.
#pragma once

#include "ops/norm/layernorm_modulate.h"

namespace dfuse::detail {

struct FoldedModulateEpilogue {
  template <LayerNormPath P, typename T>
  static DFUSE_HD T apply(float x, float mean, float rstd, int k4, T scale, T shift) {
    using S = Storage<T>;
    const float gamma = S::round(add_rn(1.0f, S::load(scale)));  // (1 + scale), an eager op
    return S::store(layer_norm_element(P, x, mean, rstd, true, gamma, true, S::load(shift), k4));
  }
};

}  // namespace dfuse::detail
