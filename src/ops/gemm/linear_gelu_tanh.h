// diffusion.linear_gelu_tanh — replaces `F.gelu(F.linear(x, weight, bias), approximate="tanh")`
// (a GEMM whose [tokens, 4*dim] output is written, then read back by the GELU kernel). Contract:
// close, tier extra-high (bound in dfuse/ops/gemm.h). The CUDA kernel is a cuBLASLt matmul with
// the GELU_BIAS epilogue; the host kernel is the reference arithmetic: fp32 products summed in
// k order, + bias, then aten's tanh-GELU formula, rounded once.
#pragma once

#include <cstdint>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::detail {

// One GEMM problem in row-major terms: out[m, n] = gelu(sum_k x[m, k] * weight[n, k] + bias[n]).
struct LinearGeluParams {
  DType dtype = DType::bf16;
  int device = 0;
  int64_t m = 0, n = 0, k = 0;
  const void* x = nullptr;
  int64_t x_row_stride = 0;  // elements
  const void* weight = nullptr;
  int64_t weight_row_stride = 0;
  const void* bias = nullptr;  // null: no bias
  void* out = nullptr;         // dense [m, n]
};

using LinearGeluEntry = void (*)(const LinearGeluParams& p, Stream stream);

}  // namespace dfuse::detail
