// diffusion.qk_head_layernorm — replaces the eager pair
//   q = F.layer_norm(q, (Dh,), q_weight, q_bias, eps);  k = F.layer_norm(k, (Dh,), k_weight, k_bias, eps)
// (nn.LayerNorm(head_dim) as norm_q / norm_k on [B, S, H, Dh] heads; two launches, plus aten's
// .contiguous() copies when q/k are views of a packed projection). Contract: bit-exact against
// PyTorch 2.11 eager CUDA in bf16, f16 and f32: each tensor's statistics in the reduction order of
// the path aten takes for it (common/layer_norm_stats.h), that path's affine element formula, one
// rounding to the storage dtype. Limits: the choice of path follows aten 2.11's dispatch; on the
// host rsqrt is the correctly rounded value.
#pragma once

#include "common/layer_norm_stats.h"
#include "common/rows.h"

namespace dfuse::detail {

// One LayerNorm problem: rows of x (geom.cols = Dh) into out, with optional gamma/beta.
struct HeadLayerNorm {
  RowGeometry geom;
  RowOperand x, out;
  const void* weight = nullptr;  // null: no gamma
  const void* bias = nullptr;    // null: no beta
  int64_t weight_stride = 1, bias_stride = 1;
  LayerNormPath path = LayerNormPath::generic;
};

struct QkHeadLayerNormParams {
  DType dtype = DType::f32;
  int device = 0;
  float eps = 0.0f;
  HeadLayerNorm head[2];  // q, k
};

using QkHeadLayerNormEntry = void (*)(const QkHeadLayerNormParams& p, Stream stream);

}  // namespace dfuse::detail
