// The CUDA kernel of the data-movement copy: every copy of StridedCopyParams in one launch. Each
// thread moves one unit (16 bytes, or one element) per step of a grid-stride loop over the
// concatenated units of all copies; a unit's copy and multi-index come from its linear index.
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/strided_copy.cuh"

namespace dfuse::detail {
namespace {

template <typename Unit>
__device__ __forceinline__ void move_unit(const uint8_t* src, uint8_t* dst) {
  *reinterpret_cast<Unit*>(dst) = *reinterpret_cast<const Unit*>(src);
}

// Index: uint32_t when the total number of units fits, else uint64_t. Offsets are 64-bit.
template <typename Index>
__global__ void strided_copy_kernel(const __grid_constant__ StridedCopyParams p, Index total) {
  const Index step = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int k = 0;
    Index local = i;
    while (local >= Index(p.pairs[k].units)) local -= Index(p.pairs[k].units), ++k;
    const CopyPair& c = p.pairs[k];
    int64_t src_offset = 0, dst_offset = 0;
    for (int d = c.ndim - 1; d >= 0; --d) {
      const Index size = Index(c.sizes[d]);
      const Index at = local % size;
      local /= size;
      src_offset += int64_t(at) * c.src_strides[d];
      dst_offset += int64_t(at) * c.dst_strides[d];
    }
    const uint8_t* src = c.src + src_offset * c.unit_bytes;
    uint8_t* dst = c.dst + dst_offset * c.unit_bytes;
    switch (c.unit_bytes) {
      case 16: move_unit<uint4>(src, dst); break;
      case 8: move_unit<uint64_t>(src, dst); break;
      case 4: move_unit<uint32_t>(src, dst); break;
      case 2: move_unit<uint16_t>(src, dst); break;
      default: move_unit<uint8_t>(src, dst); break;
    }
  }
}

}  // namespace

void launch_strided_copy(const StridedCopyParams& p, Stream stream) {
  const int64_t total = p.total_units();
  if (total == 0) return;
  const DeviceGuard device(p.device);
  const int sms = multiprocessor_count(p.device);
  constexpr int kThreads = 256, kBlocksPerSm = 8;
  const int blocks = int(std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(sms) * kBlocksPerSm));
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (total <= int64_t(UINT32_MAX) - int64_t(blocks) * kThreads)
    strided_copy_kernel<uint32_t><<<blocks, kThreads, 0, s>>>(p, uint32_t(total));
  else
    strided_copy_kernel<uint64_t><<<blocks, kThreads, 0, s>>>(p, uint64_t(total));
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
