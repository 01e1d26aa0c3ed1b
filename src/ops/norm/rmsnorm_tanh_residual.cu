// diffusion.rmsnorm_tanh_residual: the CUDA kernel (one block per row, see cuda/rms_norm_rows.cuh). Contract and
// arithmetic: ops/norm/rmsnorm_tanh_residual.h.
#include "common/entries.h"
#include "cuda/rms_norm_rows.cuh"
#include "ops/adaln/residual_gate_add.cuh"
#include "ops/norm/rmsnorm_tanh_residual.h"

namespace dfuse::detail {

// The epilogues on packed pairs (cuda/paired_arith.cuh): with tanh(gate) given, residual_gate_add's;
// from the gate, tanh per element first, rounded to T by one packed conversion.
template <typename T>
struct RowwisePair<RmsNormGatedResidual<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& fallback, uint32_t normed, uint32_t residual, uint32_t tanh_of_gate) {
    return RowwisePair<ResidualGateAdd<T>>::apply(fallback, residual, tanh_of_gate, normed);
  }
};

template <typename T>
struct RowwisePair<RmsNormTanhResidual<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& fallback, uint32_t normed, uint32_t residual, uint32_t gate) {
    using A = PairedArith<T>;
    const float2 g = A::unpack(gate);
    return RowwisePair<RmsNormGatedResidual<T>>::apply(fallback, normed, residual, A::pack(tanh_f(g.x), tanh_f(g.y)));
  }
};

// The gate enters only through tanh(gate): a gate shared by a run of rows (per batch, per frame) has its
// tanh computed once per block and run (cuda/rms_norm_rows.cuh).
template <typename T>
struct RmsNormCachedOperand<RmsNormTanhResidual<T>> {
  static constexpr bool kDefined = true;
  static constexpr int kIndex = 1;  // the gate, the epilogue's second operand
  using Epilogue = RmsNormGatedResidual<T>;
  __device__ static T transform(T gate) { return tanh_gate(gate); }
};

DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_tanh_residual", &rms_norm_rows_cuda_entry<RmsNormTanhResidual>);

}  // namespace dfuse::detail
