// Eager replica of aten's complex64 multiply on CUDA: one thread per complex element, grid-stride.
// The arithmetic is eager/complex_mul.h's, shared with the host loop.
#include <algorithm>

#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "eager/complex_mul.h"

namespace dfuse::eager::detail {
namespace {

__global__ void complex_mul_kernel(ComplexMulParams p) {
  const int64_t n = p.layout.numel();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    p.layout.offsets(i, off);
    complex_mul_apply(p, off);
  }
}

void cuda_complex_mul(const ComplexMulParams& p, Stream stream) {
  const int64_t n = p.layout.numel();
  if (n == 0) return;
  const dfuse::detail::DeviceGuard device(p.device);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535 * 8);
  complex_mul_kernel<<<unsigned(blocks), threads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "eager.complex_mul", &cuda_complex_mul);

}  // namespace
}  // namespace dfuse::eager::detail
