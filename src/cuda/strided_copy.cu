// The CUDA kernel of the data-movement copy: every copy of StridedCopyParams in one launch. Each
// thread moves one unit (16 bytes, or one element) per step of a grid-stride loop over the
// concatenated units of all copies; a unit's copy and multi-index come from its linear index.
#include <cuda_runtime.h>

#include "cuda/grid_stride.cuh"
#include "cuda/strided_copy.cuh"

namespace dfuse::detail {
namespace {

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
      Index at;
      if constexpr (sizeof(Index) == 4) {  // every index below 2^31 (launch_grid_stride): multiply and shift
        const Index quotient = c.size_dividers[d].div(local);
        at = c.size_dividers[d].mod(local, quotient);
        local = quotient;
      } else {
        const Index size = Index(c.sizes[d]);
        at = local % size;
        local /= size;
      }
      src_offset += int64_t(at) * c.src_strides[d];
      dst_offset += int64_t(at) * c.dst_strides[d];
    }
    const uint8_t* src = c.src + src_offset * c.unit_bytes;
    uint8_t* dst = c.dst + dst_offset * c.unit_bytes;
    move_unit(src, dst, c.unit_bytes);
  }
}

}  // namespace

void launch_strided_copy(const StridedCopyParams& p, Stream stream) {
  const int64_t total = p.total_units();
  launch_grid_stride(p.device, total, GridStrideGrid::per_unit, stream,
                     [&](auto index, int blocks, int threads, cudaStream_t s) {
                       using Index = decltype(index);
                       strided_copy_kernel<Index><<<blocks, threads, 0, s>>>(p, Index(total));
                     });
}

}  // namespace dfuse::detail
