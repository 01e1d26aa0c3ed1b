// diffusion.residual_gate_add: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and
// arithmetic: ops/adaln/residual_gate_add.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/adaln/residual_gate_add.h"

namespace dfuse::detail {
namespace {

void cuda_kernel(const RowwiseParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.dtype, "residual_gate_add", [&](auto tag) {
    using T = decltype(tag);
    launch_rowwise<T>(p, ResidualGateAdd<T>{}, stream);
  });
}
DFUSE_REGISTER_ENTRY(cuda, "residual_gate_add", &cuda_kernel);

}  // namespace
}  // namespace dfuse::detail
