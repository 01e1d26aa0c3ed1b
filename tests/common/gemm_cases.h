// Cases of the GEMM-epilogue family, run on the host by the host tests and on CUDA by the GPU
// tests: the fused op against the eager chain computed on the host from the same inputs, under the
// op's close bound.
#pragma once

#include <cstdint>
#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

struct LinearGeluCase {
  int64_t batch = 1, m = 7, n = 24, k = 40;  // x [batch, m, k] (batch 0: x is 2-D [m, k])
  bool bias = true;
  int64_t x_row_pad = 0;  // x's row stride is k + x_row_pad (2-D x only)
  uint64_t seed = 1;
};

// "" when every element of linear_gelu_tanh's output is within |out - eager| <= 2^-7 |eager| +
// 2^-8 |h| of the eager chain gelu(round(h)) with h = x . weight^T + bias in fp32; else the count
// of violations and the worst one.
std::string check_linear_gelu_tanh(Device d, DType t, const LinearGeluCase& c);

}  // namespace dfuse::test
