// The grid-stride kernels that move `total` units (the data-movement copies and the varlen row gather): the
// unit move, and the launch with 256-thread blocks and 32-bit index arithmetic whenever every index stays below
// 2^31 (the range of common/uint_divider.h) and an index plus one grid stride fits in 32 bits. The grid
// (GridStrideGrid) is the caller's, each measured on the H200 (docs/BENCHMARKS.md, session 9): one block per
// 256 units made the strided copies faster (joint_qkv_cat 47.7 -> 45.2 us) and the row gather slower
// (varlen_pack_qkv 1785 -> 1925 us at Wan 2.1) than a persistent grid of eight blocks per SM.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

// Moves one unit of `unit_bytes` (16, 8, 4, 2 or 1) from src to dst; a null src writes zero
// bytes (+0.0), the padding of the varlen scatter.
__device__ __forceinline__ void move_unit(const uint8_t* src, uint8_t* dst, int unit_bytes) {
  const auto move = [&](auto unit) {
    using Unit = decltype(unit);
    *reinterpret_cast<Unit*>(dst) = src ? *reinterpret_cast<const Unit*>(src) : Unit{};
  };
  switch (unit_bytes) {
    case 16: return move(uint4{});
    case 8: return move(uint64_t{});
    case 4: return move(uint32_t{});
    case 2: return move(uint16_t{});
    default: return move(uint8_t{});
  }
}

enum class GridStrideGrid {
  per_unit,  // one thread per unit (the loop runs once per thread where gridDim.x allows)
  resident,  // eight blocks per SM on the device, each thread looping over many units
};

// Calls launch(Index{}, blocks, threads, stream) with Index uint32_t or uint64_t; the callback
// launches its kernel<Index>.
template <typename Launch>
void launch_grid_stride(int device, int64_t total, GridStrideGrid grid, Stream stream, Launch launch) {
  if (total == 0) return;
  const DeviceGuard guard(device);
  constexpr int kThreads = 256, kResidentPerSm = 8;
  const int64_t limit = grid == GridStrideGrid::resident ? int64_t(multiprocessor_count(device)) * kResidentPerSm
                                                         : (int64_t(1) << 31) - 1;  // gridDim.x
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, limit);
  const int64_t step = blocks * kThreads;
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (total <= (int64_t(1) << 31) && total + step <= (int64_t(1) << 32))
    launch(uint32_t{}, int(blocks), kThreads, s);
  else
    launch(uint64_t{}, int(blocks), kThreads, s);
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
