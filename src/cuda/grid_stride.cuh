// The grid-stride kernels that move `total` units (the data-movement copies): the unit move, and
// the launch: a grid of
// at most eight 256-thread blocks per SM on the operands' device, and 32-bit index arithmetic
// whenever the index plus one grid stride stays below 2^31 (the range of common/uint_divider.h).
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
  constexpr int kThreads = 256, kBlocksPerSm = 8;
  const int64_t resident = int64_t(multiprocessor_count(device)) * kBlocksPerSm;
  const int blocks = int(std::min<int64_t>((total + kThreads - 1) / kThreads, resident));
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (total <= (int64_t(1) << 31) - int64_t(blocks) * kThreads)
    launch(uint32_t{}, blocks, kThreads, s);
  else
    launch(uint64_t{}, blocks, kThreads, s);
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
