// Eager copy replica on CUDA: one thread per element, grid-stride, 64-bit indices, as aten's copy
// kernel for two views of one dtype.
#include <algorithm>

#include "common/entries.h"
#include "cuda/check.h"
#include "eager/copy.h"

namespace dfuse::eager::detail {
namespace {

template <typename Element>
__global__ void copy_kernel(const __grid_constant__ CopyParams p) {
  const auto* src = static_cast<const Element*>(p.src);
  auto* dst = static_cast<Element*>(p.dst);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.numel;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i, src_offset = 0, dst_offset = 0;
    for (int d = p.ndim - 1; d >= 0; --d) {
      const int64_t at = rest % p.sizes[d];
      rest /= p.sizes[d];
      src_offset += at * p.src_strides[d];
      dst_offset += at * p.dst_strides[d];
    }
    dst[dst_offset] = src[src_offset];
  }
}

void cuda_copy(const CopyParams& p, Stream stream) {
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((p.numel + threads - 1) / threads, 65535 * 8);
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (p.element_bytes == 4)
    copy_kernel<uint32_t><<<unsigned(blocks), threads, 0, s>>>(p);
  else
    copy_kernel<uint16_t><<<unsigned(blocks), threads, 0, s>>>(p);
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "eager.copy", &cuda_copy);

}  // namespace
}  // namespace dfuse::eager::detail
