// dfuse eager replicas: PyTorch 2.11's elementwise binary ops (aten add/sub/mul/div through
// TensorIterator), host and CUDA. Inputs are loaded, converted to float (the "opmath" type for
// bf16/f16/f32), combined with one IEEE operation, and rounded once to the storage dtype, as
// PyTorch does for every op of a chain. A Python scalar stays in float precision (it is never
// narrowed to the tensor dtype). add with alpha is one fused multiply-add, fma(b, alpha, a).
//
// These are the reference side of every bit-exact test: an op's eager chain is composed from
// them, independently of the fused kernel.
//
// Replicated: same-dtype operands (bf16, f16, f32), broadcasting of any rank <= 8 with any
// strides, Python-scalar operands. Not replicated: type promotion between different tensor
// dtypes, 0-dim CUDA tensor operands (torch narrows them to the tensor dtype first), integer
// and complex types.
#pragma once

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::eager {

enum class BinaryOp : uint8_t { add, sub, mul, div };

// out = a <op> b with broadcasting of a and b to out's shape. For add/sub, `alpha` scales b
// (torch.add(a, b, alpha=...)); it is ignored for mul/div.
void binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out, double alpha = 1.0,
            Stream stream = {});
// out = a <op> s with a Python scalar s (for sub: a - s; for div: a * float(1/s), the
// reciprocal taken in double as torch does).
void binary_scalar(BinaryOp op, const TensorView& a, double s, const TensorView& out, Stream stream = {});
// out = s <op> a, the reflected forms (1 + scale, 1 - gate, ...). Not for div.
void scalar_binary(BinaryOp op, double s, const TensorView& a, const TensorView& out, Stream stream = {});

}  // namespace dfuse::eager
