// The grid-stride launch geometry shared by the rope family's CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "dfuse/core/error.h"

namespace dfuse::detail {

constexpr int kRopeThreads = 256;

// Blocks for `items` work items, one per thread, grid-stride: at most as many blocks of `Kernel` as
// `device` keeps resident at once (its occupancy, asked of the runtime once per kernel and device, off
// the launch path), so that every block starts in the first wave and the items spread evenly over
// them. Items < 2^31 (the rope guards), so 32-bit indices plus one grid stride never wrap.
template <auto Kernel>
unsigned rope_blocks(int device, int64_t items) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> per_sm_of[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) throw BackendUnavailable("CUDA device index out of range");
  int per_sm = per_sm_of[device].load(std::memory_order_relaxed);
  if (per_sm == 0) {
    DFUSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, kRopeThreads, 0));
    per_sm = std::max(per_sm, 1);
    per_sm_of[device].store(per_sm, std::memory_order_relaxed);
  }
  const int64_t resident = int64_t(multiprocessor_count(device)) * per_sm;
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((items + kRopeThreads - 1) / kRopeThreads, resident)));
}

// Launches Kernel(args...) with rope_blocks' grid for `items` (times `parts` in y) on `stream`.
template <auto Kernel, typename... Args>
void launch_rope_kernel(int device, int64_t items, unsigned parts, cudaStream_t stream, const Args&... args) {
  Kernel<<<dim3(rope_blocks<Kernel>(device, items), parts), kRopeThreads, 0, stream>>>(args...);
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
