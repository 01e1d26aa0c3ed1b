// diffusion.fp32_layernorm_bf16 — replaces the eager chain (diffusers FP32LayerNorm)
//   F.layer_norm(x.float(), (D,), weight, bias, eps).to(x.dtype)     (three kernels, an fp32 copy
//   of x and an fp32 result in HBM)
// with x bf16/f16 and fp32 weight/bias. Contract: bit-exact against PyTorch 2.11 eager CUDA.
// x.float() is exact, so aten's fp32 LayerNorm sees float(x): its path (common/layer_norm_stats.h)
// is decided for an fp32 tensor that is a fresh allocation (aligned) with fp32 weight/bias (16-byte
// alignment), its output element is computed in float with no rounding (T = float), and .to()
// rounds it once to x's dtype (RNE). Limits: the path choice follows aten 2.11; on the host rsqrt is
// the correctly rounded value.
#pragma once

#include "common/layer_norm_stats.h"
#include "common/rows.h"

namespace dfuse::detail {

struct Fp32LayerNormParams {
  DType dtype = DType::bf16;  // x's and out's dtype; statistics and weight/bias in f32
  int device = 0;
  RowGeometry geom;
  RowOperand x, out;
  const float* weight = nullptr;  // null: no gamma
  const float* bias = nullptr;    // null: no beta
  int64_t weight_stride = 1, bias_stride = 1;
  float eps = 0.0f;
  LayerNormPath path = LayerNormPath::generic;
};

// One output element of row statistics (mean, rstd) in `path`: aten's fp32 element, then .to(T); g and b are
// the element's gamma and beta (any value where p has none), k4 its position in its 4-element chunk.
template <typename T>
DFUSE_HD T fp32_layernorm_element(const Fp32LayerNormParams& p, float x, float mean, float rstd, float g, float b,
                                  int k4) {
  return Storage<T>::store(layer_norm_element(p.path, x, mean, rstd, p.weight != nullptr, g, p.bias != nullptr, b, k4));
}

// The same for column c, reading its gamma and beta.
template <typename T>
DFUSE_HD T fp32_layernorm_element(const Fp32LayerNormParams& p, float x, float mean, float rstd, int64_t c) {
  const float g = p.weight ? p.weight[c * p.weight_stride] : 1.0f;
  const float b = p.bias ? p.bias[c * p.bias_stride] : 0.0f;
  return fp32_layernorm_element<T>(p, x, mean, rstd, g, b, int(c % 4));
}

using Fp32LayerNormEntry = void (*)(const Fp32LayerNormParams& p, Stream stream);

}  // namespace dfuse::detail
