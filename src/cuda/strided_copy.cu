// The CUDA kernel of the data-movement copy: every copy of StridedCopyParams in one launch. Each
// thread moves one unit (16 bytes, or one element) per step of a grid-stride loop over the
// concatenated units of all copies; a unit's copy and multi-index come from its linear index.
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/grid_stride.cuh"
#include "cuda/strided_copy.cuh"

namespace dfuse::detail {
namespace {

// Index: uint32_t when the total number of units fits, else uint64_t. Offsets are 64-bit. kDims: the dims of
// every pair (strided_copy_padded), so that the loop over them unrolls and a pair's sizes, strides and
// dividers are read at constant offsets (a loop over a runtime count measured 43.2 us against 40.9 for
// pack_qkv_destination_major's [4096, 24, 128] q, k, v on the H200, docs/BENCHMARKS.md, session 13).
template <typename Index, int kDims>
__global__ void strided_copy_kernel(const __grid_constant__ StridedCopyParams p, Index total) {
  const Index step = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    int k = 0;
    Index local = i;
    while (local >= Index(p.pairs[k].units)) local -= Index(p.pairs[k].units), ++k;
    const CopyPair& c = p.pairs[k];
    int64_t src_offset = 0, dst_offset = 0;
#pragma unroll
    for (int d = kDims - 1; d >= 0; --d) {
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

// p with every pair given `dims` dims: outer dims of size 1 (stride 0) ahead of a pair's own.
StridedCopyParams strided_copy_padded(const StridedCopyParams& p, int dims) {
  StridedCopyParams padded = p;
  for (int k = 0; k < padded.count; ++k) {
    CopyPair& c = padded.pairs[k];
    const int pad = dims - c.ndim;
    for (int d = dims - 1; d >= 0; --d) {
      const bool own = d >= pad;
      c.sizes[d] = own ? c.sizes[d - pad] : 1;
      c.src_strides[d] = own ? c.src_strides[d - pad] : 0;
      c.dst_strides[d] = own ? c.dst_strides[d - pad] : 0;
      c.size_dividers[d] = own ? c.size_dividers[d - pad] : UintDivider(1);
    }
    c.ndim = dims;
  }
  return padded;
}

template <int kDims>
void launch_strided_copy_dims(const StridedCopyParams& p, int64_t total, Stream stream) {
  const StridedCopyParams padded = strided_copy_padded(p, kDims);
  launch_grid_stride(p.device, total, GridStrideGrid::per_unit, stream,
                     [&](auto index, int blocks, int threads, cudaStream_t s) {
                       using Index = decltype(index);
                       strided_copy_kernel<Index, kDims><<<blocks, threads, 0, s>>>(padded, Index(total));
                     });
}

}  // namespace

void launch_strided_copy(const StridedCopyParams& p, Stream stream) {
  const int64_t total = p.total_units();
  int dims = 1;
  for (int k = 0; k < p.count; ++k) dims = std::max(dims, p.pairs[k].ndim);
  static_assert(kCopyMaxDims == 6, "one instantiation per dim count");
  switch (dims) {
    case 1: return launch_strided_copy_dims<1>(p, total, stream);
    case 2: return launch_strided_copy_dims<2>(p, total, stream);
    case 3: return launch_strided_copy_dims<3>(p, total, stream);
    case 4: return launch_strided_copy_dims<4>(p, total, stream);
    case 5: return launch_strided_copy_dims<5>(p, total, stream);
    default: return launch_strided_copy_dims<6>(p, total, stream);
  }
}

}  // namespace dfuse::detail
