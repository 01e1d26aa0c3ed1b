// dfuse ops, GEMM-epilogue family: linear layers whose consumers are folded into the GEMM, so
// that the GEMM's output makes no extra HBM round trip. On CUDA each is one cuBLASLt matmul.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts (and,
// given `why`, says which guard failed), and <op>(...) re-checks and throws dfuse::Unsupported
// naming the failed guard. The backend is chosen by the device of the tensors. Outputs are
// caller-owned.
//
// Contract of the family: close, tier extra-high (mounted only when a request's quality allows).
// cuBLASLt may sum the K products in another order than the eager GEMM, and the fused epilogue
// skips the eager chain's rounding of the linear's output. Bound, per element, with
// h = x @ weight^T + bias in fp32 and a = |x| @ |weight|^T + |bias|:
//   |out - eager| <= 2^-7 * |eager| + 2^-8 * |h| + 3 * K * 2^-24 * a + tiny,
// tiny being the dtype's smallest subnormal (2^-24 for f16, 2^-133 for bf16). (bf16 rounding moves h
// by up to 2^-9 |h|; GELU's slope is below 1.13; each result is rounded once more; two fp32 sums of the
// same K products in different orders differ by at most 2 * K * 2^-24 * a, which matters where the
// products cancel and |h| is small against a: measured on the H200, 3 of the 46080 elements of a
// 5 x 3072 x 9216 projection beyond the first two terms by up to 1.3e-6; near zero the f16 roundings are
// absolute, half a subnormal each: errors of 5e-8 where |eager| < 1e-6.) The eager chain is taken with
// fp32 split-K reductions: PyTorch's default
// (torch.backends.cuda.matmul.allow_{bf16,fp16}_reduced_precision_reduction) lets cuBLAS round partial
// sums to the storage dtype, which moves the eager GEMM itself off the exact product (measured: 0.002
// at M = 1, K = 3072). The fused GEMM keeps its own split-K partial sums in fp32 (cuBLASLt's in-place and
// output-type reduction schemes are excluded).
// Measured errors: docs/BENCHMARKS.md.
//
// Operands of every op:
//   x:      [M, K] or [B, S, K], bf16 or f16, last dim contiguous, rows and batches at any
//           non-overlapping strides
//   weight: [N, K], x's dtype, last dim contiguous, row stride >= K
//   bias:   [N], x's dtype, contiguous; null for none
//   out:    x's outer dims with last dim N, x's dtype, last dim contiguous, rows and batches at
//           any non-overlapping strides (rows of a larger buffer), not overlapping the inputs
// On CUDA, pointers and row/batch strides are 16-byte aligned (multiples of 8 elements), and row
// strides are at least the row length, also where a dim holds one row.
#pragma once

#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

// diffusion.linear_gelu_tanh: out = gelu_tanh(x @ weight^T + bias), the FFN up-projection of
// FLUX-style MLPs (`F.gelu(F.linear(x, weight, bias), approximate="tanh")`), bias and GELU in
// the GEMM epilogue.
bool can_use_linear_gelu_tanh(const TensorView& x, const TensorView& weight, const TensorView* bias,
                              const TensorView& out, std::string* why = nullptr);
void linear_gelu_tanh(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out,
                      Stream stream = {});

// diffusion.qkv_projection_into: out = x @ weight^T + bias into rows of a larger buffer. Qwen-Image's
// added Q/K/V projections as one GEMM of the concatenated [3D, D] weight, written straight into
// the text rows of the joint [B, S_txt + S_img, 3D] QKV buffer (the image projection likewise into
// the image rows), in place of three linears per stream and the joint torch.cat.
bool can_use_qkv_projection_into(const TensorView& x, const TensorView& weight, const TensorView* bias,
                                 const TensorView& out, std::string* why = nullptr);
void qkv_projection_into(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out,
                         Stream stream = {});

}  // namespace dfuse
