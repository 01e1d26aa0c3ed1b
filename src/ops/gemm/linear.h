// The GEMM-epilogue family's shared problem description, guards and host reference: a batch of
// linear layers out[b, m, n] = epilogue(sum_k x[b, m, k] * weight[n, k] + bias[n]) in row-major
// terms, each operand with its own row and batch strides (out may be rows of a larger buffer).
#pragma once

#include <cstdint>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::detail {

enum class LinearEpilogue : uint8_t {
  bias,       // + bias (or nothing without one)
  gelu_tanh,  // + bias, then aten's tanh-GELU
};

struct LinearParams {
  DType dtype = DType::bf16;
  int device = 0;
  LinearEpilogue epilogue = LinearEpilogue::bias;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  const void* x = nullptr;
  int64_t x_row_stride = 0, x_batch_stride = 0;  // elements
  const void* weight = nullptr;
  int64_t weight_row_stride = 0;
  const void* bias = nullptr;  // null: no bias
  void* out = nullptr;
  int64_t out_row_stride = 0, out_batch_stride = 0;
};

using LinearEntry = void (*)(const LinearParams& p, Stream stream);

class GuardList;

// Guards of a linear op. x [M, K] or [B, S, K] and out of x's outer shape with last dim N: last
// dims contiguous, rows and batches at any non-overlapping strides; weight [N, K] with dense rows;
// bias [N] or null; one dtype among `dtypes`; on CUDA 16-byte aligned pointers and strides.
void check_linear(GuardList& g, const TensorView& x, const TensorView& weight, const TensorView* bias,
                  const TensorView& out);
LinearParams linear_params(const TensorView& x, const TensorView& weight, const TensorView* bias,
                           const TensorView& out, LinearEpilogue epilogue);

// The host entry (LinearEntry) of every linear op, the family's reference arithmetic: fp32
// products summed in k order, + bias, the epilogue, one rounding to the storage dtype.
void linear_host_entry(const LinearParams& p, Stream stream);
// The CUDA entry of every linear op: one cuBLASLt matmul (cuda/cublaslt_linear.cu).
void cublaslt_linear(const LinearParams& p, Stream stream);

}  // namespace dfuse::detail
