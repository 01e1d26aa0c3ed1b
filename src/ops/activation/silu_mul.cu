// diffusion.silu_mul: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and arithmetic:
// ops/activation/silu_mul.h.
#include "common/entries.h"
#include "cuda/paired_silu.cuh"
#include "cuda/rowwise.cuh"
#include "ops/activation/silu_mul.h"

namespace dfuse::detail {

// On packed pairs: s = T(silu(a)) (paired_silu.cuh), then s * b rounded once (paired_arith.cuh).
template <typename T>
struct RowwisePair<SiluMul<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& fallback, uint32_t a, uint32_t b) {
    return PairedArith<T>::mul(paired_silu<T>(a, fallback), b);
  }
};

DFUSE_REGISTER_ENTRY(cuda, "silu_mul", &rowwise_cuda_entry<SiluMul>);

}  // namespace dfuse::detail
