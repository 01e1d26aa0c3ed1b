// The gated residual chain on packed pairs of 16-bit storage values (cuda/paired_arith.cuh), for the CUDA
// kernels that compute it: residual_gate_add's row-wise kernel and scale_residual_norm_scale_shift's r.
#pragma once

#include "cuda/paired_arith.cuh"
#include "ops/adaln/residual_gate_add.h"

namespace dfuse::detail {

// p = gate * update, out = residual + p, each rounded once (paired_arith.cuh).
template <typename T>
struct RowwisePair<ResidualGateAdd<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& /*fallback*/, uint32_t residual, uint32_t gate, uint32_t update) {
    using A = PairedArith<T>;
    return A::add(residual, A::mul(gate, update));
  }
};

}  // namespace dfuse::detail
