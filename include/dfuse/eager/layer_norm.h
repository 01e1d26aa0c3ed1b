// dfuse eager replica: PyTorch 2.11's CUDA F.layer_norm forward (aten native_layer_norm), host
// and CUDA, over the last dim: out = F.layer_norm(x, (x.size(-1),), weight, bias, eps).
//
// Replicated (reference/pytorch-eager-arithmetic.md §1): aten's path choice (the vectorized kernel
// when N % 4 == 0, N <= 2^24 and the X/gamma/beta pointers are 4-element aligned, a non-contiguous
// operand counting as aligned because aten copies it first; otherwise the generic two-kernel path),
// each path's Welford variant and reduction order, rsqrtf(var + float(eps)), and each path's
// output element with its affine variants (including the vectorized beta-only artefact), one
// rounding to the storage dtype. Statistics are float for bf16, f16 and f32. The CUDA replica runs
// the same block geometry and shuffles as aten; the host replica emulates those orders
// sequentially. rsqrt is rsqrtf on CUDA and the correctly rounded value on the host, so the host
// replica is bit-exact against torch only where the two agree (the statistics always are).
//
// Accepted: x of rank 1..4 (bf16, f16, f32), last dim contiguous, any outer strides; weight and
// bias null or 1-D [N] of x's dtype, any stride; out of x's shape, last dim contiguous.
#pragma once

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::eager {

void layer_norm(const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                const TensorView& out, Stream stream = {});

}  // namespace dfuse::eager
