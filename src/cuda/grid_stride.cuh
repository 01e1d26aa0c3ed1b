// The grid-stride kernels that move `total` units (the data-movement copies and the varlen row gather): the
// unit move, and the launch: one 256-thread block per 256 units (the loop runs once per thread where the grid
// limit allows), and 32-bit index arithmetic whenever every index stays below 2^31 (the range of
// common/uint_divider.h) and an index plus one grid stride fits in 32 bits. A persistent grid of eight blocks
// per SM, one unit per thread and step, measured 8% slower for a plain 16-byte copy at Wan 2.1 size and 4% at
// FLUX.1 size (docs/BENCHMARKS.md, session 8): each thread then had one load in flight at a time.
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

// Calls launch(Index{}, blocks, threads, stream) with Index uint32_t or uint64_t; the callback
// launches its kernel<Index>.
template <typename Launch>
void launch_grid_stride(int device, int64_t total, Stream stream, Launch launch) {
  if (total == 0) return;
  const DeviceGuard guard(device);
  constexpr int kThreads = 256;
  constexpr int64_t kMaxBlocks = (int64_t(1) << 31) - 1;  // gridDim.x
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, kMaxBlocks);
  const int64_t step = blocks * kThreads;
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (total <= (int64_t(1) << 31) && total + step <= (int64_t(1) << 32))
    launch(uint32_t{}, int(blocks), kThreads, s);
  else
    launch(uint64_t{}, int(blocks), kThreads, s);
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
