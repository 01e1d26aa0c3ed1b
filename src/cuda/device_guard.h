// Device selection for the CUDA backend: kernels launch on their tensors' device, whatever device
// the caller has current, and launch geometry uses that device's SM count.
#pragma once

#include <cuda_runtime.h>

#include "cuda/check.h"

namespace dfuse::detail {

// Makes `index` current for the guard's lifetime and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) {
    DFUSE_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != index) DFUSE_CUDA_CHECK(cudaSetDevice(index));
    index_ = index;
  }
  ~DeviceGuard() {
    if (previous_ != index_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  int index_ = 0;
};

// SM count of a device, queried once per device.
int multiprocessor_count(int device);
// L2 cache size of a device in bytes, queried once per device.
int l2_cache_bytes(int device);

}  // namespace dfuse::detail
