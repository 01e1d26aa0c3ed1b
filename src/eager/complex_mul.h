// Internal: the eager replica of aten's complex64 multiply (dfuse/eager/rope.h, complex_mul), shared by
// its host loop and CUDA kernel. The layout runs over complex elements: offsets point at the real
// part, the imaginary part is the next float.
#pragma once

#include "common/arith.h"
#include "dfuse/core/device.h"
#include "eager/elementwise.h"

namespace dfuse::eager::detail {

struct ComplexMulParams {
  int device = 0;
  ElementwiseLayout layout;  // out, a, b over complex elements (float offsets)
  float* out = nullptr;
  const float* a = nullptr;
  const float* b = nullptr;
};

// One product: c10::complex<float>'s operator*= (real = a*c - b*d, imag = a*d + b*c) as nvcc
// compiled it into torch 2.11's CUDA mul kernels (SASS: FMUL t, b, d; FFMA re, a, c, -t;
// FMUL u, b, c; FFMA im, a, d, u).
DFUSE_HD void complex_mul_apply(const ComplexMulParams& p, const int64_t off[3]) {
  using dfuse::detail::fma_rn;
  using dfuse::detail::mul_rn;
  const float ar = p.a[off[1]], ai = p.a[off[1] + 1], br = p.b[off[2]], bi = p.b[off[2] + 1];
  p.out[off[0]] = fma_rn(ar, br, -mul_rn(ai, bi));
  p.out[off[0] + 1] = fma_rn(ar, bi, mul_rn(ai, br));
}

using ComplexMulEntry = void (*)(const ComplexMulParams& p, Stream stream);

}  // namespace dfuse::eager::detail
