// How many blocks of a kernel a device keeps resident at once: the launch geometry of the persistent and
// grid-stride kernels (every block in the first wave).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "dfuse/core/error.h"

namespace dfuse::detail {

// The blocks of `Kernel` at `threads` threads and `smem` bytes of dynamic shared memory that `device` keeps
// resident at once (at least one per SM). The runtime's occupancy is asked on a kernel's first launch and again
// only when its block shape changes: each kernel and device keep the last (threads, smem) asked and its answer in
// one 64-bit word (smem below 2^32, threads below 2^16, blocks per SM below 2^16), so a launch with the same
// shape as the one before reads it without a runtime call.
template <auto Kernel>
int64_t resident_blocks(int device, int threads, size_t smem = 0) {
  constexpr int kMaxDevices = 64;
  static std::atomic<uint64_t> last_of[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices) throw BackendUnavailable("CUDA device index out of range");
  const uint64_t shape = uint64_t(smem) << 32 | uint64_t(threads) << 16;
  uint64_t last = last_of[device].load(std::memory_order_relaxed);
  if (last == 0 || (last & ~uint64_t(0xffff)) != shape) {
    int per_sm = 0;
    DFUSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, smem));
    last = shape | uint64_t(std::clamp(per_sm, 1, 0xffff));
    last_of[device].store(last, std::memory_order_relaxed);
  }
  return int64_t(multiprocessor_count(device)) * int64_t(last & 0xffff);
}

}  // namespace dfuse::detail
