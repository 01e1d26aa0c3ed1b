// Cases of the GEMM-epilogue family, run on the host by the host tests and on CUDA by the GPU
// tests: each op against its eager chain computed on the host from the same inputs, under the
// family's close bound (dfuse/ops/gemm.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

enum class LinearOp : uint8_t { linear_gelu_tanh, qkv_projection_into };

struct LinearCase {
  LinearOp op = LinearOp::linear_gelu_tanh;
  int64_t batch = 1, m = 7, n = 24, k = 40;  // x [batch, m, k]; batch 0: x is 2-D [m, k]
  bool bias = true;
  int64_t x_row_pad = 0;    // x's row stride is k + x_row_pad
  int64_t out_rows_before = 0, out_rows_after = 0;  // out is rows [before, before + m) of a taller buffer
  uint64_t seed = 1;
};

// The cases every backend runs for `op`: batched and 2-D x, padded x rows, no bias, one-token
// rows, out as rows of a taller buffer (one problem at two alignments of out); with `model_shapes`, FLUX.1's FFN up-projection on a
// slice of tokens (linear_gelu_tanh) or Qwen-Image's added QKV projection into the joint buffer.
std::vector<LinearCase> linear_cases(LinearOp op, bool model_shapes);

// "" when every element of the op's output is within |out - eager| <= 2^-7 |eager| + 2^-8 |h| +
// 3 K 2^-24 a + tiny of the eager chain (h = x . weight^T + bias in fp32, rounded; gelu_tanh of it,
// rounded, for linear_gelu_tanh; a = |x| . |weight|^T + |bias|; dfuse/ops/gemm.h), and the buffer rows
// around out are untouched; else what went wrong.
std::string check_linear_op(Device d, DType t, const LinearCase& c);

}  // namespace dfuse::test
