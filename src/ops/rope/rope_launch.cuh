// The grid-stride launch geometry shared by the rope family's CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/device_guard.h"

namespace dfuse::detail {

constexpr int kRopeThreads = 256;

// Blocks for `items` work items, one per thread, grid-stride: at most eight blocks per SM of
// `device`. Items < 2^31 (the rope guards), so 32-bit indices plus one grid stride never wrap.
inline unsigned rope_blocks(int device, int64_t items) {
  const int64_t resident = int64_t(multiprocessor_count(device)) * 8;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((items + kRopeThreads - 1) / kRopeThreads, resident)));
}

}  // namespace dfuse::detail
