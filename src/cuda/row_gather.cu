// The CUDA kernel of the varlen row gather: every job of RowGatherParams in one launch. Each
// thread moves one unit (16 bytes, or one element) per step of a grid-stride loop over the units
// of all jobs' output rows; a unit's job, row and column come from its linear index, its source
// row from the row's index (RowGatherParams::source_row). Index values are not checked.
#include <cuda_runtime.h>

#include <algorithm>

#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/row_gather.cuh"

namespace dfuse::detail {
namespace {

template <typename Unit>
__device__ __forceinline__ void move_unit(const uint8_t* src, uint8_t* dst) {
  *reinterpret_cast<Unit*>(dst) = src ? *reinterpret_cast<const Unit*>(src) : Unit{};
}

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
    switch (p.unit_bytes) {
      case 16: move_unit<uint4>(src, dst); break;
      case 4: move_unit<uint32_t>(src, dst); break;
      default: move_unit<uint16_t>(src, dst); break;
    }
  }
}

}  // namespace

void launch_row_gather(const RowGatherParams& p, Stream stream) {
  const int64_t total = int64_t(p.count) * p.rows * p.row_units;
  if (total == 0) return;
  const DeviceGuard device(p.device);
  const int sms = multiprocessor_count(p.device);
  constexpr int kThreads = 256, kBlocksPerSm = 8;
  const int blocks = int(std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t(sms) * kBlocksPerSm));
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (total <= int64_t(UINT32_MAX) - int64_t(blocks) * kThreads)
    row_gather_kernel<uint32_t><<<blocks, kThreads, 0, s>>>(p, uint32_t(total));
  else
    row_gather_kernel<uint64_t><<<blocks, kThreads, 0, s>>>(p, uint64_t(total));
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
