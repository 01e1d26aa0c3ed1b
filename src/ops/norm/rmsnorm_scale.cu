// diffusion.rmsnorm_scale: the CUDA kernel (one block per row, see cuda/rms_norm_rows.cuh). Contract and
// arithmetic: ops/norm/rmsnorm_scale.h.
#include "common/entries.h"
#include "cuda/rms_norm_rows.cuh"
#include "ops/norm/rmsnorm_scale.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_scale", &rms_norm_rows_cuda_entry<RmsNormScale>);

}  // namespace dfuse::detail
