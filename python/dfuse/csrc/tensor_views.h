// Shared by the torch binding's op files (one per op family, each a TORCH_LIBRARY_FRAGMENT of the
// dfuse library defined in torch_ops.cpp): at::Tensor -> dfuse::TensorView, the current stream,
// and dfuse errors reported as torch errors. Bit-exact ops run through the Gate with
// gate_runner.h.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>

#include <optional>

#include "dfuse/core/device.h"
#include "dfuse/core/error.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::torch_binding {

using dfuse::TensorView;

inline std::optional<dfuse::DType> dfuse_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return dfuse::DType::bf16;
    case at::kHalf: return dfuse::DType::f16;
    case at::kFloat: return dfuse::DType::f32;
    case at::kDouble: return dfuse::DType::f64;
    case at::kInt: return dfuse::DType::i32;
    case at::kLong: return dfuse::DType::i64;
    case at::kByte: return dfuse::DType::u8;
    case at::kFloat8_e4m3fn: return dfuse::DType::f8_e4m3fn;
    case at::kFloat8_e5m2: return dfuse::DType::f8_e5m2;
    case at::kFloat4_e2m1fn_x2: return dfuse::DType::f4_e2m1x2;
    default: return std::nullopt;
  }
}

// The TensorView of a plain strided CPU or CUDA tensor; nullopt for anything a TensorView cannot
// describe (other layouts, lazily negated or conjugated views, unmapped dtypes, rank > 8).
inline std::optional<TensorView> view_of(const at::Tensor& t, void* data) {
  const auto dtype = dfuse_dtype(t.scalar_type());
  if (!dtype || t.layout() != at::kStrided || t.is_neg() || t.is_conj() || t.dim() > TensorView::kMaxDims)
    return std::nullopt;
  dfuse::Device device;
  if (t.is_cuda()) {
    device = dfuse::Device::cuda(t.get_device());
  } else if (!t.is_cpu()) {
    return std::nullopt;
  }
  return TensorView(data, *dtype, t.sizes().data(), t.strides().data(), int(t.dim()), device);
}

inline std::optional<TensorView> input_view(const at::Tensor& t) {
  return view_of(t, const_cast<void*>(t.const_data_ptr()));
}

// The current CUDA stream of t's device; the null stream for CPU tensors (host kernels ignore it).
inline dfuse::Stream stream_of(const at::Tensor& t) {
  return {t.is_cuda() ? at::cuda::getCurrentCUDAStream(t.get_device()).stream() : nullptr};
}

// Runs a dfuse kernel, reporting its errors as torch errors.
template <typename Run>
void run_kernel(const char* op, Run run) {
  try {
    run();
  } catch (const dfuse::Error& e) {
    TORCH_CHECK(false, "dfuse ", op, ": ", e.what());
  }
}

}  // namespace dfuse::torch_binding
