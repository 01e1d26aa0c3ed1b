// diffusion.bias_glu: the CUDA kernel (row-wise, see cuda/rowwise.cuh), with four inputs (h, g
// and the bias halves) or two. Contract and arithmetic: ops/activation/bias_glu.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/activation/bias_glu.h"

namespace dfuse::detail {
namespace {

void cuda_kernel(const RowwiseParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.dtype, "bias_glu", [&](auto tag) {
    using T = decltype(tag);
    if (p.in[2].data)
      launch_rowwise<T>(p, BiasGlu<T>{}, stream);
    else
      launch_rowwise<T>(p, Glu<T>{}, stream);
  });
}
DFUSE_REGISTER_ENTRY(cuda, "bias_glu", &cuda_kernel);

}  // namespace
}  // namespace dfuse::detail
