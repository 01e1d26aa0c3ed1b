// diffusion.bias_silu: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and arithmetic:
// ops/activation/bias_silu.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/activation/bias_silu.h"

namespace dfuse::detail {
namespace {

void cuda_kernel(const RowwiseParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.dtype, "bias_silu", [&](auto tag) {
    using T = decltype(tag);
    launch_rowwise<T>(p, BiasSilu<T>{}, stream);
  });
}
DFUSE_REGISTER_ENTRY(cuda, "bias_silu", &cuda_kernel);

}  // namespace
}  // namespace dfuse::detail
