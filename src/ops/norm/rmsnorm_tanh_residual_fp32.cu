// diffusion.rmsnorm_tanh_residual_fp32: the CUDA kernel (cuda/norm_fp32_rows.cuh with the fp32
// gated-residual epilogue). Contract and arithmetic: ops/norm/rmsnorm_tanh_residual_fp32.h.
#include "common/entries.h"
#include "cuda/norm_fp32_rows.cuh"
#include "ops/norm/rmsnorm_tanh_residual_fp32.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_tanh_residual_fp32", &norm_fp32_rows_cuda_entry<TanhResidualFp32>);

}  // namespace dfuse::detail
