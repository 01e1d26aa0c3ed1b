// diffusion.modulate_scale_shift: the CUDA kernel (row-wise, see cuda/rowwise.cuh) on packed pairs
// (ops/adaln/modulate_scale_shift.cuh). Contract and arithmetic: ops/adaln/modulate_scale_shift.h.
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/adaln/modulate_scale_shift.cuh"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "modulate_scale_shift", &rowwise_cuda_entry<ModulateScaleShift>);

}  // namespace dfuse::detail
