// The eager RMSNorm replicas' parameters and entry types, shared by the host loops and the CUDA
// kernels (see dfuse/eager/rms_norm.h).
#pragma once

#include "common/layer_norm_stats.h"
#include "common/rows.h"
#include "eager/elementwise.h"

namespace dfuse::eager::detail {

struct RmsNormParams {
  DType dtype = DType::f32;
  int device = 0;
  dfuse::detail::RowGeometry geom;  // rows of x; geom.cols = N
  dfuse::detail::RowOperand x, out;
  const void* weight = nullptr;  // [N] contiguous; null: no weight
  float eps = 0.0f;
  dfuse::detail::LayerNormPath path = dfuse::detail::LayerNormPath::generic;
};

// Reduce.cuh's launch configuration for a mean over the contiguous last dim (float accumulation,
// the result rounded to the input dtype).
struct MeanParams {
  DType dtype = DType::f32;
  int device = 0;
  const void* x = nullptr;   // contiguous [rows, n]
  void* out = nullptr;       // [rows]
  int64_t rows = 0, n = 0;
  int bw = 32, bh = 16;      // block (bw, bh): bw threads per row, bh rows per block
  int vec = 4;               // input_vec_size: 16 bytes of the dtype
  bool vectorized = false;
  float factor = 0.0f;
};

enum class UnaryOp : uint8_t { to_dtype, rsqrt, tanh };

struct UnaryParams {
  UnaryOp op = UnaryOp::to_dtype;
  DType in_dtype = DType::f32, out_dtype = DType::f32;
  ElementwiseLayout layout;  // operand 0 out, 1 x
  void* out = nullptr;
  const void* x = nullptr;
};

using RmsNormEntry = void (*)(const RmsNormParams& p, Stream stream);
using MeanEntry = void (*)(const MeanParams& p, Stream stream);
using UnaryEntry = void (*)(const UnaryParams& p, Stream stream);

}  // namespace dfuse::eager::detail
