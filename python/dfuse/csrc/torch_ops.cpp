// torch.ops.dfuse: the dfuse ops as PyTorch custom ops, in C++ so that no Python runs on the call
// path. Each op computes what the eager chain model code writes would compute (same shape, same
// dtype, bit for bit) and returns it as a new contiguous tensor:
//   modulate_scale_shift(x, scale, shift)     x * (1 + scale) + shift
//   residual_gate_add(residual, gate, update)  residual + gate * update
// Inputs the dfuse kernel accepts (dfuse::can_use_<op>) run through the first-sight Gate
// (dfuse/policy/gate.h); everything else runs the eager chain with ATen calls. The Meta
// implementation is the fake tensor rule torch.compile traces with.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/TypeProperties.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dfuse/core/error.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/ops/adaln.h"
#include "dfuse/policy/gate.h"

namespace {

using dfuse::TensorView;

std::optional<dfuse::DType> dfuse_dtype(at::ScalarType t) {
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
std::optional<TensorView> view_of(const at::Tensor& t, void* data) {
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

std::optional<TensorView> input_view(const at::Tensor& t) {
  return view_of(t, const_cast<void*>(t.const_data_ptr()));
}

// ---- result dtype and shape, as the eager chain would produce them -------------------------------

// at::native::update_result_type_state for an intermediate result of the chain, known only by its
// dtype and whether it is 0-dim (promotion looks at nothing else).
at::native::ResultTypeState fold_intermediate(at::native::ResultTypeState s, at::ScalarType dtype,
                                              bool zero_dim) {
  at::ScalarType& slot = zero_dim ? s.zeroResult : s.dimResult;
  slot = slot == at::ScalarType::Undefined ? dtype : at::promote_types(slot, dtype);
  return s;
}

at::ScalarType binary_dtype(const at::Tensor& a, const at::Tensor& b) {
  using at::native::update_result_type_state;
  return at::native::result_type(update_result_type_state(b, update_result_type_state(a, {})));
}

// dtype of x * (1 + scale) + shift.
at::ScalarType modulate_dtype(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  using at::native::update_result_type_state;
  const auto one_plus_scale =
      at::native::result_type(update_result_type_state(at::Scalar(1), update_result_type_state(scale, {})));
  const auto scaled = at::native::result_type(
      fold_intermediate(update_result_type_state(x, {}), one_plus_scale, scale.dim() == 0));
  const bool scaled_zero_dim = x.dim() == 0 && scale.dim() == 0;
  return at::native::result_type(
      update_result_type_state(shift, fold_intermediate({}, scaled, scaled_zero_dim)));
}

// dtype of residual + gate * update.
at::ScalarType residual_gate_dtype(const at::Tensor& residual, const at::Tensor& gate,
                                   const at::Tensor& update) {
  const bool product_zero_dim = gate.dim() == 0 && update.dim() == 0;
  return at::native::result_type(at::native::update_result_type_state(
      residual, fold_intermediate({}, binary_dtype(gate, update), product_zero_dim)));
}

// ---- the eager chains, as model code writes them; `out` receives the last op's result ------------

// x * (1 + scale) + shift. The last add writes into `out`: the same kernel and values as the
// chain's own result, without a copy.
void modulate_eager(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, at::Tensor& out) {
  at::add_out(out, at::mul(x, at::add(scale, 1)), shift);
}

// residual + gate * update.
void residual_gate_eager(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& update,
                         at::Tensor& out) {
  at::add_out(out, residual, at::mul(gate, update));
}

// ---- running an op through the Gate --------------------------------------------------------------

struct OpInfo {
  const char* name;  // the dfuse op name, as the Gate and the registry know it
  bool (*can_use)(const TensorView&, const TensorView&, const TensorView&, const TensorView&, std::string*);
  void (*fused)(const TensorView&, const TensorView&, const TensorView&, const TensorView&, dfuse::Stream);
  void (*eager)(const at::Tensor&, const at::Tensor&, const at::Tensor&, at::Tensor&);
};

constexpr OpInfo kModulate{"diffusion.modulate_scale_shift", &dfuse::can_use_modulate_scale_shift,
                           &dfuse::modulate_scale_shift, &modulate_eager};
constexpr OpInfo kResidualGate{"diffusion.residual_gate_add", &dfuse::can_use_residual_gate_add,
                               &dfuse::residual_gate_add, &residual_gate_eager};

// Everything one call needs, so that the Gate's callbacks capture a single reference and
// std::function stores them without allocating.
struct Call {
  const OpInfo& op;
  const at::Tensor& a;
  const at::Tensor& b;
  const at::Tensor& c;
  at::Tensor& out;
  TensorView va, vb, vc, vout;
  dfuse::Stream stream;
};

at::ScalarType same_size_integer(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1: return at::kByte;
    case 2: return at::kShort;
    case 4: return at::kInt;
    default: return at::kLong;
  }
}

// Runs the fused kernel into call.out and the eager chain into a scratch tensor; "" when every bit
// matches (integer views, so -0/+0 and NaN payloads count), else where they differ.
std::string verify(Call& call) {
  call.op.fused(call.va, call.vb, call.vc, call.vout, call.stream);
  at::Tensor reference = at::empty_like(call.out);
  call.op.eager(call.a, call.b, call.c, reference);
  const at::ScalarType bits = same_size_integer(call.out);
  if (at::equal(call.out.view(bits), reference.view(bits))) return "";
  const at::Tensor fused_host = call.out.cpu();
  const at::Tensor eager_host = reference.cpu();
  return dfuse::describe_bitwise_mismatch(fused_host.const_data_ptr(), eager_host.const_data_ptr(),
                                          call.vout.dtype(), fused_host.numel());
}

// The device the eager chain computes on: the first operand off the CPU (0-dim CPU tensors
// take part as scalars).
c10::Device compute_device(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  for (const at::Tensor* t : {&a, &b, &c})
    if (!t->is_cpu()) return t->device();
  return a.device();
}

at::Tensor run(const OpInfo& op, const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
               at::IntArrayRef shape, at::ScalarType dtype) {
  const c10::Device device = compute_device(a, b, c);
  const c10::OptionalDeviceGuard device_guard(device);
  at::Tensor out = at::empty(shape, a.options().dtype(dtype).device(device));
  const auto va = input_view(a), vb = input_view(b), vc = input_view(c);
  const auto vout = view_of(out, out.mutable_data_ptr());
  if (!va || !vb || !vc || !vout || !op.can_use(*va, *vb, *vc, *vout, nullptr)) {
    op.eager(a, b, c, out);
    return out;
  }
  Call call{op, a, b, c, out, *va, *vb, *vc, *vout, {}};
  try {
    dfuse::Signature sig(op.name);
    sig.add(call.va).add(call.vb).add(call.vc).add(call.vout);
    bool capturing = false;
    if (device.is_cuda()) {
      const cudaDeviceProp* props = at::cuda::getDeviceProperties(device.index());
      sig.set_sm(props->major, props->minor);
      // The c10 query: the tensors already live on this device, so its context exists.
      capturing = c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None;
      call.stream.handle = at::cuda::getCurrentCUDAStream(device.index()).stream();
    }
    dfuse::Gate::global().run(
        sig, capturing, [&call] { call.op.fused(call.va, call.vb, call.vc, call.vout, call.stream); },
        [&call] { call.op.eager(call.a, call.b, call.c, call.out); }, [&call] { return verify(call); });
  } catch (const dfuse::Error& e) {
    TORCH_CHECK(false, "dfuse ", op.name, ": ", e.what());
  }
  return out;
}

at::DimVector broadcast_shape(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return at::infer_size_dimvector(at::infer_size_dimvector(a.sizes(), b.sizes()), c.sizes());
}

c10::SymDimVector broadcast_sym_shape(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return at::infer_size_symdimvector(at::infer_size_symdimvector(a.sym_sizes(), b.sym_sizes()),
                                     c.sym_sizes());
}

// ---- the ops -------------------------------------------------------------------------------------

at::Tensor modulate_scale_shift(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  return run(kModulate, x, scale, shift, broadcast_shape(x, scale, shift), modulate_dtype(x, scale, shift));
}

at::Tensor residual_gate_add(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& update) {
  return run(kResidualGate, residual, gate, update, broadcast_shape(residual, gate, update),
             residual_gate_dtype(residual, gate, update));
}

// Fake implementations: symbolic shapes, so that dynamic-shape tracing works too.
at::Tensor modulate_scale_shift_meta(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  return at::empty_symint(broadcast_sym_shape(x, scale, shift),
                          x.options().dtype(modulate_dtype(x, scale, shift)));
}

at::Tensor residual_gate_add_meta(const at::Tensor& residual, const at::Tensor& gate,
                                  const at::Tensor& update) {
  return at::empty_symint(broadcast_sym_shape(residual, gate, update),
                          residual.options().dtype(residual_gate_dtype(residual, gate, update)));
}

// "modulate_scale_shift" and "diffusion.modulate_scale_shift" both name the op.
std::string qualified_op(std::string_view op) {
  return op.find('.') == std::string_view::npos ? "diffusion." + std::string(op) : std::string(op);
}

std::string gate_report() { return dfuse::Gate::global().report(); }

// [fused_calls, eager_calls, verifications, fallbacks]
std::vector<int64_t> op_counters(std::string_view op) {
  const dfuse::OpCounters n = dfuse::Gate::global().counters(qualified_op(op));
  return {int64_t(n.fused_calls), int64_t(n.eager_calls), int64_t(n.verifications), int64_t(n.fallbacks)};
}

void gate_reset() { dfuse::Gate::global().reset(); }

}  // namespace

TORCH_LIBRARY(dfuse, m) {
  m.def("modulate_scale_shift(Tensor x, Tensor scale, Tensor shift) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("residual_gate_add(Tensor residual, Tensor gate, Tensor update) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("gate_report() -> str", &gate_report);
  m.def("op_counters(str op) -> int[]", &op_counters);
  m.def("gate_reset() -> ()", &gate_reset);
}

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) {
  m.impl("modulate_scale_shift", &modulate_scale_shift);
  m.impl("residual_gate_add", &residual_gate_add);
}

TORCH_LIBRARY_IMPL(dfuse, CPU, m) {
  m.impl("modulate_scale_shift", &modulate_scale_shift);
  m.impl("residual_gate_add", &residual_gate_add);
}

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("modulate_scale_shift", &modulate_scale_shift_meta);
  m.impl("residual_gate_add", &residual_gate_add_meta);
}
