// dfuse core: TensorView, a non-owning view of a strided tensor (strides in elements).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse {

class TensorView {
 public:
  static constexpr int kMaxDims = 8;

  TensorView() = default;
  // Contiguous (row-major) view.
  TensorView(void* data, DType dtype, std::initializer_list<int64_t> sizes, Device device = Device::host());
  // Arbitrary strides (elements). Throws InvalidArgument on rank > kMaxDims or negative sizes.
  TensorView(void* data, DType dtype, const int64_t* sizes, const int64_t* strides, int ndim,
             Device device = Device::host());
  static TensorView contiguous(void* data, DType dtype, const int64_t* sizes, int ndim,
                               Device device = Device::host());

  void* data() const { return data_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int dim() const { return ndim_; }
  int64_t size(int d) const { return sizes_[wrap(d)]; }
  int64_t stride(int d) const { return strides_[wrap(d)]; }
  const int64_t* sizes() const { return sizes_.data(); }
  const int64_t* strides() const { return strides_.data(); }
  int64_t numel() const;
  bool is_contiguous() const;
  // Largest power of two (<= 16) dividing the data address, in bytes.
  int alignment() const;
  // A view of the same memory with other sizes/strides (same dtype and device).
  TensorView restrided(const int64_t* sizes, const int64_t* strides, int ndim) const;
  // The elements [start, start + length) of dim `d`, as torch's narrow (and chunk) view them.
  // Throws InvalidArgument when the range is outside the dim.
  TensorView narrow(int d, int64_t start, int64_t length) const;
  // Pointer to element at the given multi-index (bytes computed with dtype_size).
  void* element_ptr(const int64_t* index) const;
  // Byte extent [lowest, highest] touched by the view, relative to data(); {0,0} when empty.
  std::pair<int64_t, int64_t> byte_extent() const;
  // "bf16[1, 4608, 3072] strides [14155776, 3072, 1] on cuda:0"
  std::string str() const;

 private:
  int wrap(int d) const { return d < 0 ? d + ndim_ : d; }
  void* data_ = nullptr;
  DType dtype_ = DType::f32;
  Device device_{};
  int ndim_ = 0;
  std::array<int64_t, kMaxDims> sizes_{};
  std::array<int64_t, kMaxDims> strides_{};
};

}  // namespace dfuse
