// diffusion.layernorm_folded_modulate: the CUDA kernel (cuda/layer_norm_modulate_rows.cuh with the
// folded epilogue). Contract: layernorm_folded_modulate.h.
#include "common/entries.h"
#include "cuda/layer_norm_modulate_rows.cuh"
#include "ops/norm/layernorm_folded_modulate.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "layernorm_folded_modulate", &layernorm_modulate_rows_cuda<FoldedModulateEpilogue>);

}  // namespace dfuse::detail
