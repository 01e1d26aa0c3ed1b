// diffusion.rmsnorm_tanh_residual: the CUDA kernel (one block per row, see cuda/rms_norm_rows.cuh). Contract and
// arithmetic: ops/norm/rmsnorm_tanh_residual.h.
#include "common/entries.h"
#include "cuda/rms_norm_rows.cuh"
#include "ops/norm/rmsnorm_tanh_residual.h"

namespace dfuse::detail {

// The epilogue on packed pairs: tanh(gate) per element, each rounded to T by one packed conversion, then
// the product and the sum each rounded once (cuda/paired_arith.cuh).
template <typename T>
struct RowwisePair<RmsNormTanhResidual<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  __device__ static uint32_t apply(bool& /*fallback*/, uint32_t normed, uint32_t residual, uint32_t gate) {
    using A = PairedArith<T>;
    const float2 g = A::unpack(gate);
    return A::add(residual, A::mul(A::pack(tanh_f(g.x), tanh_f(g.y)), normed));
  }
};

DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_tanh_residual", &rms_norm_rows_cuda_entry<RmsNormTanhResidual>);

}  // namespace dfuse::detail
