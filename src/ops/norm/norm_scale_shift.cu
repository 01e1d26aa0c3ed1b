// diffusion.norm_scale_shift and diffusion.rmsnorm_modulate_fp32: the CUDA kernel
// (cuda/norm_fp32_rows.cuh with the fp32 modulate epilogue). Contract: ops/norm/norm_scale_shift.h.
#include "common/entries.h"
#include "cuda/norm_fp32_rows.cuh"
#include "ops/norm/norm_scale_shift.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "norm_scale_shift", &norm_fp32_rows_cuda_entry<ModulateFp32>);
DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_modulate_fp32", &norm_fp32_rows_cuda_entry<ModulateFp32>);

}  // namespace dfuse::detail
