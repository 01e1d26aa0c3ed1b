// diffusion.silu_mul: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and arithmetic:
// ops/activation/silu_mul.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/activation/silu_mul.h"

namespace dfuse::detail {
namespace {

void cuda_kernel(const RowwiseParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.dtype, "silu_mul", [&](auto tag) {
    using T = decltype(tag);
    launch_rowwise<T>(p, SiluMul<T>{}, stream);
  });
}
DFUSE_REGISTER_ENTRY(cuda, "silu_mul", &cuda_kernel);

}  // namespace
}  // namespace dfuse::detail
