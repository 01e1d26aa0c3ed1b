// dfuse core: devices and streams. No CUDA headers: a stream is an opaque handle.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dfuse {

enum class DeviceKind : uint8_t { host, cuda };

std::string_view device_kind_name(DeviceKind k);

struct Device {
  DeviceKind kind = DeviceKind::host;
  int index = 0;

  static Device host() { return {DeviceKind::host, 0}; }
  static Device cuda(int index = 0) { return {DeviceKind::cuda, index}; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "host", "cuda:0"
};

// A CUDA stream (cudaStream_t) carried as an opaque pointer; null is the legacy default
// stream. Ignored by host kernels.
struct Stream {
  void* handle = nullptr;
};

}  // namespace dfuse
