// diffusion.modulate_scale_shift: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and
// arithmetic: ops/adaln/modulate_scale_shift.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/adaln/modulate_scale_shift.h"

namespace dfuse::detail {
namespace {

void cuda_kernel(const RowwiseParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.dtype, "modulate_scale_shift", [&](auto tag) {
    using T = decltype(tag);
    launch_rowwise<T>(p, ModulateScaleShift<T>{}, stream);
  });
}
DFUSE_REGISTER_ENTRY(cuda, "modulate_scale_shift", &cuda_kernel);

}  // namespace
}  // namespace dfuse::detail
