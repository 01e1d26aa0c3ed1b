// diffusion.layernorm_modulate: the CUDA kernel (cuda/layer_norm_modulate_rows.cuh with the
// modulate epilogue). Contract: layernorm_modulate.h.
#include "common/entries.h"
#include "cuda/layer_norm_modulate_rows.cuh"
#include "ops/adaln/modulate_scale_shift.cuh"
#include "ops/norm/layernorm_modulate.h"

namespace dfuse::detail {

// The epilogue on packed pairs of normalized values rounded to T: modulate_scale_shift's.
template <>
struct LayerNormPairEpilogue<ModulateEpilogue> {
  static constexpr bool kDefined = true;
  template <LayerNormPath P>
  __device__ static float normalized(float x, float mean, float rstd, int k4) {
    return ModulateEpilogue::normalized<P>(x, mean, rstd, k4);
  }
  template <typename T>
  __device__ static uint32_t apply(uint32_t normed, uint32_t scale, uint32_t shift) {
    bool fallback = false;  // modulate's pair form has none
    return RowwisePair<ModulateScaleShift<T>>::apply(fallback, normed, scale, shift);
  }
};

DFUSE_REGISTER_ENTRY(cuda, "layernorm_modulate", &layernorm_modulate_rows_cuda<ModulateEpilogue>);

}  // namespace dfuse::detail
