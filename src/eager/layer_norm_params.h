// The eager LayerNorm replica's parameters and entry type, shared by the host loop and the CUDA
// kernels (see dfuse/eager/layer_norm.h).
#pragma once

#include "common/layer_norm_stats.h"
#include "common/rows.h"

namespace dfuse::eager::detail {

struct LayerNormParams {
  DType dtype = DType::f32;
  int device = 0;
  dfuse::detail::RowGeometry geom;  // rows of x; geom.cols = N
  dfuse::detail::RowOperand x, out;
  const void* weight = nullptr;  // null: no gamma
  const void* bias = nullptr;    // null: no beta
  int64_t weight_stride = 1, bias_stride = 1;
  float eps = 0.0f;
  dfuse::detail::LayerNormPath path = dfuse::detail::LayerNormPath::generic;
};

using LayerNormEntry = void (*)(const LayerNormParams& p, Stream stream);

}  // namespace dfuse::eager::detail
