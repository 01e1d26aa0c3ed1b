// Internal: the layout and arithmetic of the eager elementwise replicas (binary ops and
// activations), shared by the host loops and the CUDA kernels. Operand 0 is the output, 1 and 2
// the inputs; a scalar or absent input has all-zero strides (a binary op's scalar value is in
// `scalar`).
#pragma once

#include <cstdint>

#include "common/arith.h"
#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/eager/activation.h"
#include "dfuse/eager/binary.h"

namespace dfuse::eager::detail {

struct ElementwiseLayout {
  int ndim = 0;
  int64_t sizes[TensorView::kMaxDims] = {};
  int64_t strides[3][TensorView::kMaxDims] = {};  // out, a, b (elements; 0 where broadcast)

  DFUSE_HD int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
  DFUSE_HD void offsets(int64_t linear, int64_t off[3]) const {
    off[0] = off[1] = off[2] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
      off[0] += i * strides[0][d];
      off[1] += i * strides[1][d];
      off[2] += i * strides[2][d];
    }
  }
};

// Builds the layout of out = a <op> b (b may be absent: a scalar), broadcasting a and b to out,
// and merges adjacent dims that every operand traverses contiguously. Throws InvalidArgument
// when a or b does not broadcast to out.
ElementwiseLayout make_layout(const TensorView& out, const TensorView& a, const TensorView* b);

struct BinaryParams {
  BinaryOp op = BinaryOp::add;
  DType dtype = DType::f32;
  ElementwiseLayout layout;
  void* out = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;   // null: b is `scalar`
  float scalar = 0.0f;       // the Python scalar, in float (opmath) precision
  bool scalar_first = false;  // compute scalar <op> a instead of a <op> scalar
  float alpha = 1.0f;
};

// One element of an aten binary op in float opmath.
DFUSE_HD float binary_apply(BinaryOp op, float a, float b, float alpha) {
  using dfuse::detail::div_rn;
  using dfuse::detail::fma_rn;
  using dfuse::detail::mul_rn;
  switch (op) {
    case BinaryOp::add:
      return fma_rn(b, alpha, a);  // add(a, b, alpha) = a + alpha * b, one rounding
    case BinaryOp::sub:
      return fma_rn(b, -alpha, a);
    case BinaryOp::mul:
      return mul_rn(a, b);
    case BinaryOp::div:
      return div_rn(a, b);
  }
  return 0.0f;
}

using BinaryEntry = void (*)(const BinaryParams& p, Stream stream);

struct ActivationParams {
  ActivationOp op = ActivationOp::silu;
  DType dtype = DType::f32;
  ElementwiseLayout layout;  // operand 2 unused
  void* out = nullptr;
  const void* x = nullptr;
};

// One element of an aten activation in float opmath, as aten's CUDA kernel writes it.
DFUSE_HD float activation_apply(ActivationOp op, float x) {
  using dfuse::detail::add_rn;
  using dfuse::detail::div_rn;
  using dfuse::detail::exp_f;
  using dfuse::detail::fma_rn;
  using dfuse::detail::mul_rn;
  using dfuse::detail::tanh_f;
  switch (op) {
    case ActivationOp::silu:
      return div_rn(x, add_rn(1.0f, exp_f(-x)));  // silu_kernel: x / (1.0f + expf(-x))
    case ActivationOp::gelu_tanh: {  // GeluCUDAKernelImpl, approximate "tanh"
      const float inner = mul_rn(fma_rn(mul_rn(x, mul_rn(x, x)), 0.044715f, x), 0.79788458347320556641f);
      return mul_rn(mul_rn(0.5f, x), add_rn(tanh_f(inner), 1.0f));
    }
  }
  return 0.0f;
}

using ActivationEntry = void (*)(const ActivationParams& p, Stream stream);

}  // namespace dfuse::eager::detail
