// dfuse ops, GEMM-epilogue family: elementwise chains folded into the epilogue of the GEMM that
// produces their input, so that the GEMM's output never makes an HBM round trip.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts (and,
// given `why`, says which guard failed), and <op>(...) re-checks and throws dfuse::Unsupported
// naming the failed guard. The backend is chosen by the device of the tensors. Outputs are
// caller-owned.
#pragma once

#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

// diffusion.linear_gelu_tanh: out = gelu_tanh(x @ weight^T + bias), the FFN up-projection of
// FLUX-style MLPs (`F.gelu(F.linear(x, weight, bias), approximate="tanh")`).
// Contract: close, tier extra-high. The accumulation, the bias add and the GELU stay in fp32 and
// round to the storage dtype once, where the eager chain rounds the linear's output first; on
// CUDA the GELU is cuBLASLt's epilogue. Bound, per element, with h = x @ weight^T + bias in fp32
// (tested; measured errors in docs/BENCHMARKS.md): |out - eager| <= 2^-7 * |eager| + 2^-8 * |h|.
// (The eager chain's rounding of h moves GELU's argument by up to 2^-9 |h| in bf16; GELU's slope
// is below 1.13; each result is rounded once more.)
//   x:      [..., K], rank 2..3, bf16 or f16, rows dense (outer dims collapse to M rows of K)
//   weight: [N, K], x's dtype, rows dense, row stride >= K
//   bias:   [N], x's dtype, contiguous; null for none
//   out:    [..., N] (x's outer dims), x's dtype, contiguous, not overlapping the inputs
// On CUDA, pointers and row strides are 16-byte aligned.
bool can_use_linear_gelu_tanh(const TensorView& x, const TensorView& weight, const TensorView* bias,
                              const TensorView& out, std::string* why = nullptr);
void linear_gelu_tanh(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out,
                      Stream stream = {});

}  // namespace dfuse
