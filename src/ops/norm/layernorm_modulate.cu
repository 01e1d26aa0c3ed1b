// diffusion.layernorm_modulate: the CUDA kernel (cuda/layer_norm_modulate_rows.cuh with the
// modulate epilogue). Contract: layernorm_modulate.h.
#include "common/entries.h"
#include "cuda/layer_norm_modulate_rows.cuh"
#include "ops/norm/layernorm_modulate.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "layernorm_modulate", &layernorm_modulate_rows_cuda<ModulateEpilogue>);

}  // namespace dfuse::detail
