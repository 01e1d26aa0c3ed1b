// diffusion.residual_gate_add: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and
// arithmetic: ops/adaln/residual_gate_add.h.
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/adaln/residual_gate_add.h"

namespace dfuse::detail {

// The chain on packed pairs: p = gate * update, out = residual + p, each rounded once (paired_arith.cuh).
template <typename T>
struct RowwisePair<ResidualGateAdd<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& /*fallback*/, uint32_t residual, uint32_t gate, uint32_t update) {
    using A = PairedArith<T>;
    return A::add(residual, A::mul(gate, update));
  }
};

DFUSE_REGISTER_ENTRY(cuda, "residual_gate_add", &rowwise_cuda_entry<ResidualGateAdd>);

}  // namespace dfuse::detail
