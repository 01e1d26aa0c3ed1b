#include "dfuse/core/tensor_view.h"

#include <algorithm>
#include <cstdint>

#include "dfuse/core/error.h"

namespace dfuse {

namespace {

void check_rank(int ndim) {
  if (ndim < 0 || ndim > TensorView::kMaxDims)
    throw InvalidArgument("TensorView: rank " + std::to_string(ndim) + " outside [0, " +
                          std::to_string(TensorView::kMaxDims) + "]");
}

}  // namespace

TensorView::TensorView(void* data, DType dtype, std::initializer_list<int64_t> sizes, Device device)
    : data_(data), dtype_(dtype), device_(device), ndim_(int(sizes.size())) {
  check_rank(ndim_);
  std::copy(sizes.begin(), sizes.end(), sizes_.begin());
  int64_t s = 1;
  for (int d = ndim_ - 1; d >= 0; --d) {
    if (sizes_[d] < 0) throw InvalidArgument("TensorView: negative size");
    strides_[d] = s;
    s *= std::max<int64_t>(sizes_[d], 1);
  }
}

TensorView::TensorView(void* data, DType dtype, const int64_t* sizes, const int64_t* strides, int ndim,
                       Device device)
    : data_(data), dtype_(dtype), device_(device), ndim_(ndim) {
  check_rank(ndim);
  for (int d = 0; d < ndim; ++d) {
    if (sizes[d] < 0) throw InvalidArgument("TensorView: negative size");
    sizes_[d] = sizes[d];
    strides_[d] = strides[d];
  }
}

TensorView TensorView::contiguous(void* data, DType dtype, const int64_t* sizes, int ndim, Device device) {
  check_rank(ndim);
  int64_t strides[kMaxDims];
  int64_t s = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    strides[d] = s;
    s *= std::max<int64_t>(sizes[d], 1);
  }
  return TensorView(data, dtype, sizes, strides, ndim, device);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim_; ++d) n *= sizes_[d];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int d = ndim_ - 1; d >= 0; --d) {
    if (sizes_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= sizes_[d];
  }
  return true;
}

int TensorView::alignment() const {
  auto addr = reinterpret_cast<uintptr_t>(data_);
  int a = 1;
  while (a < 16 && (addr % (2 * a)) == 0) a *= 2;
  return a;
}

TensorView TensorView::restrided(const int64_t* sizes, const int64_t* strides, int ndim) const {
  return TensorView(data_, dtype_, sizes, strides, ndim, device_);
}

TensorView TensorView::narrow(int d, int64_t start, int64_t length) const {
  const int dim = wrap(d);
  if (dim < 0 || dim >= ndim_ || start < 0 || length < 0 || start + length > sizes_[dim])
    throw InvalidArgument("TensorView::narrow: [" + std::to_string(start) + ", " + std::to_string(start + length) +
                          ") is outside dim " + std::to_string(d) + " of " + str());
  TensorView v = *this;
  v.sizes_[dim] = length;
  if (data_) v.data_ = static_cast<char*>(data_) + start * strides_[dim] * int64_t(dtype_size(dtype_));
  return v;
}

void* TensorView::element_ptr(const int64_t* index) const {
  int64_t off = 0;
  for (int d = 0; d < ndim_; ++d) off += index[d] * strides_[d];
  return static_cast<char*>(data_) + off * int64_t(dtype_size(dtype_));
}

std::pair<int64_t, int64_t> TensorView::byte_extent() const {
  if (numel() == 0) return {0, 0};
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < ndim_; ++d) {
    int64_t span = (sizes_[d] - 1) * strides_[d];
    (span < 0 ? lo : hi) += span;
  }
  const auto es = int64_t(dtype_size(dtype_));
  return {lo * es, hi * es + es - 1};
}

std::string TensorView::str() const {
  std::string s = std::string(dtype_name(dtype_)) + "[";
  for (int d = 0; d < ndim_; ++d) s += (d ? ", " : "") + std::to_string(sizes_[d]);
  s += "] strides [";
  for (int d = 0; d < ndim_; ++d) s += (d ? ", " : "") + std::to_string(strides_[d]);
  return s + "] on " + device_.str();
}

}  // namespace dfuse
