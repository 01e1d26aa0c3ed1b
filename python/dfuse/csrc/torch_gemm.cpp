// torch.ops.dfuse, GEMM-epilogue family (a fragment of the library torch_ops.cpp defines):
//   linear_gelu_tanh(x, weight, bias=None) -> out
//     F.gelu(F.linear(x, weight, bias), approximate="tanh") with the bias and the GELU in the
//     cuBLASLt epilogue.
//   qkv_projection_into(x, weight, bias, out) -> ()
//     out.copy_(F.linear(x, weight, bias)) as one GEMM writing into out, a view of rows of a larger
//     buffer: Qwen-Image's added Q/K/V projections (concatenated weight) into the joint QKV buffer.
// Contract of both: close (bound in dfuse/ops/gemm.h); tier extra-high, so model code calls them
// only when the request's quality allows. CUDA inputs the kernels do not accept, and CPU inputs
// (the host kernels are reference loops, not a CPU GEMM), run the aten chain.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "dfuse/ops/gemm.h"
#include "tensor_views.h"

namespace {

using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_kernel;
using dfuse::torch_binding::stream_of;
using dfuse::torch_binding::view_of;

at::Tensor linear_gelu_tanh_chain(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  return at::gelu(at::linear(x, weight, bias), "tanh");
}

at::DimVector linear_shape(const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2, "dfuse linear_gelu_tanh: x must be [..., K] and weight [N, K]");
  at::DimVector shape(x.sizes());
  shape.back() = weight.size(0);
  return shape;
}

at::Tensor linear_gelu_tanh(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  if (!x.is_cuda()) return linear_gelu_tanh_chain(x, weight, bias);
  const c10::OptionalDeviceGuard device_guard(x.device());
  at::Tensor out = at::empty(linear_shape(x, weight), x.options());
  const auto vx = input_view(x), vw = input_view(weight), vout = view_of(out, out.mutable_data_ptr());
  const auto vb = bias ? input_view(*bias) : std::nullopt;
  if (!vx || !vw || !vout || (bias && !vb) ||
      !dfuse::can_use_linear_gelu_tanh(*vx, *vw, bias ? &*vb : nullptr, *vout))
    return linear_gelu_tanh_chain(x, weight, bias);
  run_kernel("linear_gelu_tanh",
             [&] { dfuse::linear_gelu_tanh(*vx, *vw, bias ? &*vb : nullptr, *vout, stream_of(x)); });
  return out;
}

void qkv_projection_into(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         at::Tensor& out) {
  const auto chain = [&] { out.copy_(at::linear(x, weight, bias)); };
  if (!x.is_cuda()) return chain();
  const c10::OptionalDeviceGuard device_guard(x.device());
  const auto vx = input_view(x), vw = input_view(weight), vout = view_of(out, out.mutable_data_ptr());
  const auto vb = bias ? input_view(*bias) : std::nullopt;
  if (!vx || !vw || !vout || (bias && !vb) ||
      !dfuse::can_use_qkv_projection_into(*vx, *vw, bias ? &*vb : nullptr, *vout))
    return chain();
  run_kernel("qkv_projection_into",
             [&] { dfuse::qkv_projection_into(*vx, *vw, bias ? &*vb : nullptr, *vout, stream_of(x)); });
}

void qkv_projection_into_meta(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, at::Tensor&) {}

at::Tensor linear_gelu_tanh_meta(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>&) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 2, "dfuse linear_gelu_tanh: x must be [..., K] and weight [N, K]");
  c10::SymDimVector shape(x.sym_sizes().begin(), x.sym_sizes().end());
  shape.back() = weight.sym_size(0);
  return at::empty_symint(shape, x.options());
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("linear_gelu_tanh(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("qkv_projection_into(Tensor x, Tensor weight, Tensor? bias, Tensor(a!) out) -> ()",
        {at::Tag::pt2_compliant_tag});
}

namespace {
void register_device_impls(torch::Library& m) {
  m.impl("linear_gelu_tanh", &linear_gelu_tanh);
  m.impl("qkv_projection_into", &qkv_projection_into);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("linear_gelu_tanh", &linear_gelu_tanh_meta);
  m.impl("qkv_projection_into", &qkv_projection_into_meta);
}
