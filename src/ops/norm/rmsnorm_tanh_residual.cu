// diffusion.rmsnorm_tanh_residual: the CUDA kernel (one block per row, see cuda/rms_norm_rows.cuh). Contract and
// arithmetic: ops/norm/rmsnorm_tanh_residual.h.
#include "common/entries.h"
#include "cuda/rms_norm_rows.cuh"
#include "ops/norm/rmsnorm_tanh_residual.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_tanh_residual", &rms_norm_rows_cuda_entry<RmsNormTanhResidual>);

}  // namespace dfuse::detail
