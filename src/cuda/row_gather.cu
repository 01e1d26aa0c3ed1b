// The CUDA kernel of the varlen row gather: every job of RowGatherParams in one launch. Each
// thread moves one unit (16 bytes, or one element) per step of a grid-stride loop over the units
// of all jobs' output rows; a unit's job, row and column come from its linear index, its source
// row from the row's index (RowGatherParams::source_row). Index values are not checked.
#include <cuda_runtime.h>

#include "cuda/grid_stride.cuh"
#include "cuda/row_gather.cuh"

namespace dfuse::detail {
namespace {

// Index: uint32_t when the total number of units fits, else uint64_t. Offsets are 64-bit.
template <typename Index>
__global__ void row_gather_kernel(const __grid_constant__ RowGatherParams p, Index total) {
  const Index step = Index(gridDim.x) * blockDim.x;
  const Index row_units = Index(p.row_units), job_units = Index(p.rows) * row_units;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += step) {
    const Index job = i / job_units, in_job = i % job_units;
    const Index r = in_job / row_units, column = in_job % row_units;
    const RowGatherJob& j = p.jobs[job];
    const int64_t at = p.index_at(int64_t(r));
    const uint8_t* src = nullptr;  // null: a padding row of zeros
    if (at >= 0) {
      int source = 0;
      int64_t row = 0;
      p.source_row(at, source, row);
      src = j.sources[source] + (row * p.row_units + int64_t(column)) * p.unit_bytes;
    }
    uint8_t* dst = j.dst + int64_t(in_job) * p.unit_bytes;
    move_unit(src, dst, p.unit_bytes);
  }
}

}  // namespace

void launch_row_gather(const RowGatherParams& p, Stream stream) {
  const int64_t total = int64_t(p.count) * p.rows * p.row_units;
  launch_grid_stride(p.device, total, GridStrideGrid::resident, stream,
                     [&](auto index, int blocks, int threads, cudaStream_t s) {
                       using Index = decltype(index);
                       row_gather_kernel<Index><<<blocks, threads, 0, s>>>(p, Index(total));
                     });
}

}  // namespace dfuse::detail
