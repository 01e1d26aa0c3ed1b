// Shared by the torch binding's op files (one per op family, each a TORCH_LIBRARY_FRAGMENT of the
// dfuse library defined in torch_ops.cpp): at::Tensor -> dfuse::TensorView, the current stream,
// and dfuse errors reported as torch errors.
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/util/Exception.h>

#include <optional>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/error.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/policy/gate.h"

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

// The integer type of t's element size, for bitwise comparisons through integer views.
inline at::ScalarType same_size_integer(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1: return at::kByte;
    case 2: return at::kShort;
    case 4: return at::kInt;
    default: return at::kLong;
  }
}

// Runs a bit-exact op through the first-sight Gate (dfuse/policy/gate.h). `outs` are the op's
// outputs (one or more separate tensors); `fused()` writes them; `chain()` returns the eager
// chain's results as a std::vector<at::Tensor> matching `outs` in shape and dtype (any strides):
// the reference on first sight and, copied into `outs`, the fallback. `sig` holds the operands'
// views; the SM is added here.
template <typename Fused, typename Chain>
void run_gated(const char* op, dfuse::Signature& sig, const std::vector<at::Tensor>& outs, Fused fused, Chain chain) {
  bool capturing = false;
  if (outs.front().is_cuda()) {
    const cudaDeviceProp* props = at::cuda::getDeviceProperties(outs.front().get_device());
    sig.set_sm(props->major, props->minor);
    capturing = c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
  }
  try {
    dfuse::Gate::global().run(
        sig, capturing, fused,
        [&] {
          const std::vector<at::Tensor> reference = chain();
          for (size_t k = 0; k < outs.size(); ++k) outs[k].copy_(reference[k]);
        },
        [&]() -> std::string {
          fused();
          const std::vector<at::Tensor> reference = chain();
          if (reference.size() != outs.size()) return "the chain returns another number of results";
          for (size_t k = 0; k < outs.size(); ++k) {
            const at::Tensor& out = outs[k];
            if (reference[k].scalar_type() != out.scalar_type() || reference[k].sizes() != out.sizes())
              return "result " + std::to_string(k) + " of the chain has another dtype or shape";
            const at::Tensor dense = reference[k].contiguous();
            const at::ScalarType bits = same_size_integer(out);
            if (at::equal(out.view(bits), dense.view(bits))) continue;
            const at::Tensor fused_host = out.cpu(), eager_host = dense.cpu();
            return "result " + std::to_string(k) + ": " +
                   dfuse::describe_bitwise_mismatch(fused_host.const_data_ptr(), eager_host.const_data_ptr(),
                                                    *dfuse_dtype(out.scalar_type()), fused_host.numel());
          }
          return "";
        });
  } catch (const dfuse::Error& e) {
    TORCH_CHECK(false, "dfuse ", op, ": ", e.what());
  }
}

}  // namespace dfuse::torch_binding
