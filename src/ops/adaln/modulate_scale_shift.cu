// diffusion.modulate_scale_shift: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and
// arithmetic: ops/adaln/modulate_scale_shift.h.
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/adaln/modulate_scale_shift.h"

namespace dfuse::detail {

// The chain on packed pairs: t = 1 + scale, u = x * t, out = u + shift, each rounded once (paired_arith.cuh).
template <typename T>
struct RowwisePair<ModulateScaleShift<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& /*fallback*/, uint32_t x, uint32_t scale, uint32_t shift) {
    using A = PairedArith<T>;
    return A::add(A::mul(x, A::add(A::kOnes, scale)), shift);
  }
};

DFUSE_REGISTER_ENTRY(cuda, "modulate_scale_shift", &rowwise_cuda_entry<ModulateScaleShift>);

}  // namespace dfuse::detail
