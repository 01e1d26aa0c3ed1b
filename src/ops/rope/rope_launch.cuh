// The grid-stride launch geometry shared by the rope family's CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/device_guard.h"

namespace dfuse::detail {

constexpr int kRopeThreads = 256;

// Blocks for `items` work items, one per thread, grid-stride: at most as many blocks of `kernel` as
// `device` keeps resident at once (its occupancy), so that every block starts in the first wave and the
// items spread evenly over them. Items < 2^31 (the rope guards), so 32-bit indices plus one grid stride
// never wrap.
template <typename... Args>
unsigned rope_blocks(void (*kernel)(Args...), int device, int64_t items) {
  int per_sm = 0;
  DFUSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kRopeThreads, 0));
  const int64_t resident = int64_t(multiprocessor_count(device)) * std::max(per_sm, 1);
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((items + kRopeThreads - 1) / kRopeThreads, resident)));
}

}  // namespace dfuse::detail
