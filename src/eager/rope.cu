// Eager replicas of the rope family's primitives on CUDA: one thread per output element,
// grid-stride. The arithmetic is eager/rope_elementwise.h's, shared with the host loop.
#include <algorithm>

#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "eager/rope_elementwise.h"

namespace dfuse::eager::detail {
namespace {

__global__ void mixed_kernel(MixedParams p) {
  const int64_t n = p.layout.numel();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    p.layout.offsets(i, off);
    mixed_apply(p, off);
  }
}

void cuda_mixed(const MixedParams& p, Stream stream) {
  const int64_t n = p.layout.numel();
  if (n == 0) return;
  const dfuse::detail::DeviceGuard device(p.device);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535 * 8);
  mixed_kernel<<<unsigned(blocks), threads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "eager.rope_mixed", &cuda_mixed);

}  // namespace
}  // namespace dfuse::eager::detail
