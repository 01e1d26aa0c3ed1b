// diffusion.rmsnorm_scale: the CUDA kernel (one block per row, see cuda/rms_norm_rows.cuh). Contract and
// arithmetic: ops/norm/rmsnorm_scale.h.
#include "common/entries.h"
#include "cuda/rms_norm_rows.cuh"
#include "ops/norm/rmsnorm_scale.h"

namespace dfuse::detail {

// The epilogue on packed pairs: normed * scale, rounded once (cuda/paired_arith.cuh).
template <typename T>
struct RowwisePair<RmsNormScale<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& /*fallback*/, uint32_t normed, uint32_t scale) {
    return PairedArith<T>::mul(normed, scale);
  }
};

DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_scale", &rms_norm_rows_cuda_entry<RmsNormScale>);

}  // namespace dfuse::detail
