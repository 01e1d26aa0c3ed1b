// diffusion.rmsnorm_scale_shift / diffusion.rmsnorm_decomposed_scale_shift: the CUDA kernel (one block
// per row, see cuda/rms_norm_rows.cuh). Contract and arithmetic: ops/norm/rmsnorm_scale_shift.h.
#include "common/entries.h"
#include "cuda/rms_norm_rows.cuh"
#include "ops/adaln/modulate_scale_shift.cuh"
#include "ops/norm/rmsnorm_scale_shift.h"

namespace dfuse::detail {

// The epilogue on packed pairs: modulate_scale_shift's.
template <typename T>
struct RowwisePair<RmsNormScaleShift<T>> : RowwisePair<ModulateScaleShift<T>> {};

DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_scale_shift", &rms_norm_rows_cuda_entry<RmsNormScaleShift>);
DFUSE_REGISTER_ENTRY(cuda, "rmsnorm_decomposed_scale_shift", &rms_norm_rows_cuda_entry<RmsNormScaleShift>);

}  // namespace dfuse::detail
