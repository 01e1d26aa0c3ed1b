// dfuse core: the device runtime. Memory, copies, synchronization, timing and device facts
// for one device kind, behind an interface so that code using it (tests, the CLI, C++
// engines) never links the CUDA runtime: the CUDA implementation lives in the CUDA backend
// library, which is loaded the first time runtime(Device::cuda()) is asked for.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "dfuse/core/device.h"

namespace dfuse {

struct DeviceInfo {
  std::string name;          // "NVIDIA H200", or the host's description
  int sm_major = 0;          // 0 on the host
  int sm_minor = 0;
  int multiprocessors = 0;   // SM count; host: hardware threads
  int64_t l2_bytes = 0;      // 0 on the host
  int64_t memory_bytes = 0;  // device memory; host: 0 (not queried)
};

// Measures elapsed time of work submitted to a stream: CUDA events on a GPU, a steady clock on
// the host.
class Timer {
 public:
  virtual ~Timer();
  virtual void start(Stream s) = 0;
  virtual void stop(Stream s) = 0;
  // Waits for the stop point, returns milliseconds between start and stop.
  virtual double elapsed_ms() = 0;
};

class Runtime {
 public:
  virtual ~Runtime();
  virtual Device device() const = 0;
  virtual DeviceInfo info() const = 0;
  virtual void* allocate(size_t bytes) = 0;  // throws on failure; never returns null for bytes > 0
  virtual void release(void* p) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_on_device(void* dst, const void* src, size_t bytes, Stream s) = 0;
  virtual void synchronize(Stream s) = 0;
  // True while `s` is being captured into a CUDA graph (always false on the host).
  virtual bool is_capturing(Stream s) const = 0;
  virtual std::unique_ptr<Timer> make_timer() = 0;
};

// The runtime of a device kind. Host: always available. CUDA: loads the CUDA backend library
// on first use; throws BackendUnavailable (with the reason: library not found, no driver, no
// device) when it cannot.
Runtime& runtime(Device d);

// Owning device buffer allocated through a Runtime.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device d, size_t bytes);
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  Device device_{};
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace dfuse
