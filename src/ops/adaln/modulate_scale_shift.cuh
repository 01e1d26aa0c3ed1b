// The modulate chain on packed pairs of 16-bit storage values (cuda/paired_arith.cuh), for the CUDA
// kernels that end in it: modulate_scale_shift's row-wise kernel and rmsnorm_scale_shift's epilogue.
#pragma once

#include "cuda/paired_arith.cuh"
#include "ops/adaln/modulate_scale_shift.h"

namespace dfuse::detail {

// t = 1 + scale, u = x * t, out = u + shift, each rounded once (paired_arith.cuh).
template <typename T>
struct RowwisePair<ModulateScaleShift<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& /*fallback*/, uint32_t x, uint32_t scale, uint32_t shift) {
    using A = PairedArith<T>;
    return A::add(A::mul(x, A::add(A::kOnes, scale)), shift);
  }
};

}  // namespace dfuse::detail
