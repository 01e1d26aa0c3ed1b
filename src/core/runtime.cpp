// The host runtime, runtime() dispatch, and DeviceBuffer.
#include "dfuse/core/runtime.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>

#include "common/entries.h"
#include "dfuse/core/error.h"

namespace dfuse {

Timer::~Timer() = default;
Runtime::~Runtime() = default;

namespace {

class HostTimer final : public Timer {
 public:
  void start(Stream) override { t0_ = std::chrono::steady_clock::now(); }
  void stop(Stream) override { t1_ = std::chrono::steady_clock::now(); }
  double elapsed_ms() override { return std::chrono::duration<double, std::milli>(t1_ - t0_).count(); }

 private:
  std::chrono::steady_clock::time_point t0_, t1_;
};

class HostRuntime final : public Runtime {
 public:
  Device device() const override { return Device::host(); }
  DeviceInfo info() const override {
    DeviceInfo i;
    i.name = "host";
    i.multiprocessors = int(std::thread::hardware_concurrency());
    return i;
  }
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    // 64-byte alignment, like a device allocation is (at least) 256-byte aligned: kernels that
    // take aligned fast paths see the same alignment on both.
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* p) override { std::free(p); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(void* dst, const void* src, size_t bytes, Stream) override { std::memcpy(dst, src, bytes); }
  void synchronize(Stream) override {}
  bool is_capturing(Stream) const override { return false; }
  std::unique_ptr<Timer> make_timer() override { return std::make_unique<HostTimer>(); }
};

}  // namespace

Runtime& runtime(Device d) {
  if (!d.is_cuda()) {
    static HostRuntime host;
    return host;
  }
  static std::mutex mu;
  static std::map<int, std::unique_ptr<Runtime>> cuda;
  std::lock_guard lock(mu);
  auto& slot = cuda[d.index];
  if (!slot) slot.reset(detail::make_cuda_runtime(d.index));
  return *slot;
}

DeviceBuffer::DeviceBuffer(Device d, size_t bytes) : device_(d), ptr_(runtime(d).allocate(bytes)), bytes_(bytes) {}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : device_(o.device_), ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) runtime(device_).release(ptr_);
    device_ = o.device_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) runtime(device_).release(ptr_);
}

}  // namespace dfuse
