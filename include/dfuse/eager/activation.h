// dfuse eager replicas: PyTorch 2.11's elementwise activations (aten unary kernels through
// TensorIterator), host and CUDA. The element is loaded, converted to float (opmath for bf16/f16/
// f32), passed through the activation as aten's CUDA kernel writes it, and rounded once to the
// storage dtype.
//
// Replicated: F.silu, x / (1 + exp(-x)) with an IEEE division (reference/pytorch-eager-arithmetic.md
// §4); F.gelu(approximate="tanh"), (0.5 x)(tanh(fma(x^3, 0.044715, x) * sqrt(2/pi)) + 1) (§4's table).
// exp and tanh are libdevice's on CUDA, as aten's kernels, and the C++ library's on the host, so the
// host replica is bit-exact against torch only where the two agree. Same-dtype operands
// (bf16, f16, f32), any rank <= 8 with any strides.
#pragma once

#include <cstdint>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::eager {

enum class ActivationOp : uint8_t { silu, gelu_tanh };

// out = op(x); out has x's shape (x may broadcast to it).
void activation(ActivationOp op, const TensorView& x, const TensorView& out, Stream stream = {});

}  // namespace dfuse::eager
