// The CUDA implementation of dfuse::Runtime, registered with the core library when this
// backend library is loaded.
#include <cuda_runtime.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "dfuse/core/error.h"
#include "dfuse/core/runtime.h"

namespace dfuse::detail {
namespace {

cudaStream_t as_cuda(Stream s) { return static_cast<cudaStream_t>(s.handle); }

class CudaTimer final : public Timer {
 public:
  CudaTimer() {
    DFUSE_CUDA_CHECK(cudaEventCreate(&start_));
    DFUSE_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~CudaTimer() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  void start(Stream s) override { DFUSE_CUDA_CHECK(cudaEventRecord(start_, as_cuda(s))); }
  void stop(Stream s) override { DFUSE_CUDA_CHECK(cudaEventRecord(stop_, as_cuda(s))); }
  double elapsed_ms() override {
    DFUSE_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    DFUSE_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaEvent_t start_{}, stop_{};
};

class CudaRuntime final : public Runtime {
 public:
  explicit CudaRuntime(int index) : index_(index) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess)
      throw BackendUnavailable(std::string("no usable CUDA driver or device: ") + cudaGetErrorString(err));
    if (index < 0 || index >= count)
      throw BackendUnavailable("CUDA device " + std::to_string(index) + " does not exist (" +
                               std::to_string(count) + " present)");
    cudaDeviceProp p{};
    DFUSE_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
    info_.name = p.name;
    info_.sm_major = p.major;
    info_.sm_minor = p.minor;
    info_.multiprocessors = p.multiProcessorCount;
    info_.l2_bytes = p.l2CacheSize;
    info_.memory_bytes = int64_t(p.totalGlobalMem);
  }
  Device device() const override { return Device::cuda(index_); }
  DeviceInfo info() const override { return info_; }
  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    DeviceGuard g(index_);
    void* p = nullptr;
    DFUSE_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  void release(void* p) override {
    DeviceGuard g(index_);
    cudaFree(p);
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    DeviceGuard g(index_);
    DFUSE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    DeviceGuard g(index_);
    DFUSE_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_on_device(void* dst, const void* src, size_t bytes, Stream s) override {
    DeviceGuard g(index_);
    DFUSE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_cuda(s)));
  }
  void synchronize(Stream s) override {
    DeviceGuard g(index_);
    DFUSE_CUDA_CHECK(cudaStreamSynchronize(as_cuda(s)));
  }
  bool is_capturing(Stream s) const override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    const cudaError_t err = cudaStreamIsCapturing(as_cuda(s), &status);
    // Asking about the legacy stream while another stream captures in global mode is itself an
    // error: that stream is part of the capture as far as the caller is concerned.
    if (err == cudaErrorStreamCaptureImplicit) {
      cudaGetLastError();
      return true;
    }
    DFUSE_CUDA_CHECK(err);
    return status != cudaStreamCaptureStatusNone;
  }
  std::unique_ptr<Timer> make_timer() override {
    DeviceGuard g(index_);
    return std::make_unique<CudaTimer>();
  }

 private:
  int index_;
  DeviceInfo info_;
};

Runtime* create_cuda_runtime(int index) { return new CudaRuntime(index); }

struct RegisterRuntime {
  RegisterRuntime() { register_cuda_runtime(&create_cuda_runtime); }
} register_runtime;

}  // namespace

namespace {

constexpr int kMaxDevices = 64;

// A device attribute, queried once per device and attribute (`cache`: one slot per device, 0 until asked).
int cached_attribute(std::atomic<int>* cache, cudaDeviceAttr attribute, int device) {
  if (device < 0 || device >= kMaxDevices) throw BackendUnavailable("CUDA device index out of range");
  int value = cache[device].load(std::memory_order_relaxed);
  if (value == 0) {
    DFUSE_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
    cache[device].store(value, std::memory_order_relaxed);
  }
  return value;
}

}  // namespace

int multiprocessor_count(int device) {
  static std::atomic<int> counts[kMaxDevices] = {};
  return cached_attribute(counts, cudaDevAttrMultiProcessorCount, device);
}

int l2_cache_bytes(int device) {
  static std::atomic<int> bytes[kMaxDevices] = {};
  return cached_attribute(bytes, cudaDevAttrL2CacheSize, device);
}

}  // namespace dfuse::detail
