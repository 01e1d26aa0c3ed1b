// torch.ops.dfuse: the dfuse ops as PyTorch custom ops, in C++ so that no Python runs on the call
// path. Each op computes what the eager chain model code writes would compute (same shape, same
// dtype, bit for bit) and returns it as a new contiguous tensor:
//   modulate_scale_shift(x, scale, shift)     x * (1 + scale) + shift
//   residual_gate_add(residual, gate, update)  residual + gate * update
//   silu_mul(a, b)                             F.silu(a) * b
//   bias_silu(x, bias)                         F.silu(x + bias)
//   bias_glu(x, bias=None)                     h, g = (x + bias).chunk(2, dim=-1); h * F.silu(g)
// Inputs the dfuse kernel accepts (dfuse::can_use_<op>) run through the first-sight Gate
// (dfuse/policy/gate.h); everything else runs the eager chain with ATen calls. The Meta
// implementation is the fake tensor rule torch.compile traces with.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dfuse/core/tensor_view.h"
#include "dfuse/ops/activation.h"
#include "dfuse/ops/adaln.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "tensor_views.h"

namespace {

using dfuse::TensorView;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::view_of;

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

// dtype of x + bias (F.silu keeps it), or of x alone.
at::ScalarType biased_dtype(const at::Tensor& x, const std::optional<at::Tensor>& bias) {
  return bias ? binary_dtype(x, *bias) : x.scalar_type();
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

// F.silu(a) * b.
void silu_mul_eager(const at::Tensor& a, const at::Tensor& b, at::Tensor& out) {
  at::mul_out(out, at::silu(a), b);
}

// F.silu(x + bias).
void bias_silu_eager(const at::Tensor& x, const at::Tensor& bias, at::Tensor& out) {
  at::silu_out(out, at::add(x, bias));
}

// h, g = (x + bias).chunk(2, dim=-1); h * F.silu(g)   (without a bias: x.chunk(2, dim=-1)).
void bias_glu_eager(const at::Tensor& x, const at::Tensor* bias, at::Tensor& out) {
  const at::Tensor biased = bias ? at::add(x, *bias) : x;
  const std::vector<at::Tensor> halves = biased.chunk(2, -1);
  at::mul_out(out, halves[0], at::silu(halves[1]));
}

// ---- running an op through the Gate --------------------------------------------------------------

constexpr int kMaxInputs = 3;

// An op's tensor inputs, by reference (no reference-count traffic on the call path).
class Inputs {
 public:
  Inputs(std::initializer_list<const at::Tensor*> tensors) {
    for (const at::Tensor* t : tensors) tensors_[size_++] = t;
  }
  int size() const { return size_; }
  const at::Tensor& operator[](int i) const { return *tensors_[i]; }

 private:
  std::array<const at::Tensor*, kMaxInputs> tensors_{};
  int size_ = 0;
};

using Views = std::span<const TensorView>;

struct OpInfo {
  const char* name;  // the dfuse op name, as the Gate and the registry know it
  bool (*can_use)(Views in, const TensorView& out, std::string* why);
  void (*fused)(Views in, const TensorView& out, dfuse::Stream stream);
  void (*eager)(const Inputs& in, at::Tensor& out);
};

constexpr OpInfo kModulate{
    "diffusion.modulate_scale_shift",
    [](Views in, const TensorView& out, std::string* why) {
      return dfuse::can_use_modulate_scale_shift(in[0], in[1], in[2], out, why);
    },
    [](Views in, const TensorView& out, dfuse::Stream s) {
      dfuse::modulate_scale_shift(in[0], in[1], in[2], out, s);
    },
    [](const Inputs& in, at::Tensor& out) { modulate_eager(in[0], in[1], in[2], out); }};
constexpr OpInfo kResidualGate{
    "diffusion.residual_gate_add",
    [](Views in, const TensorView& out, std::string* why) {
      return dfuse::can_use_residual_gate_add(in[0], in[1], in[2], out, why);
    },
    [](Views in, const TensorView& out, dfuse::Stream s) {
      dfuse::residual_gate_add(in[0], in[1], in[2], out, s);
    },
    [](const Inputs& in, at::Tensor& out) { residual_gate_eager(in[0], in[1], in[2], out); }};
constexpr OpInfo kSiluMul{
    "diffusion.silu_mul",
    [](Views in, const TensorView& out, std::string* why) {
      return dfuse::can_use_silu_mul(in[0], in[1], out, why);
    },
    [](Views in, const TensorView& out, dfuse::Stream s) { dfuse::silu_mul(in[0], in[1], out, s); },
    [](const Inputs& in, at::Tensor& out) { silu_mul_eager(in[0], in[1], out); }};
constexpr OpInfo kBiasSilu{
    "diffusion.bias_silu",
    [](Views in, const TensorView& out, std::string* why) {
      return dfuse::can_use_bias_silu(in[0], in[1], out, why);
    },
    [](Views in, const TensorView& out, dfuse::Stream s) { dfuse::bias_silu(in[0], in[1], out, s); },
    [](const Inputs& in, at::Tensor& out) { bias_silu_eager(in[0], in[1], out); }};
// Inputs {x} or {x, bias}.
constexpr OpInfo kBiasGlu{
    "diffusion.bias_glu",
    [](Views in, const TensorView& out, std::string* why) {
      return dfuse::can_use_bias_glu(in[0], in.size() > 1 ? &in[1] : nullptr, out, why);
    },
    [](Views in, const TensorView& out, dfuse::Stream s) {
      dfuse::bias_glu(in[0], in.size() > 1 ? &in[1] : nullptr, out, s);
    },
    [](const Inputs& in, at::Tensor& out) { bias_glu_eager(in[0], in.size() > 1 ? &in[1] : nullptr, out); }};

// The device the eager chain computes on: the first operand off the CPU (0-dim CPU tensors
// take part as scalars).
c10::Device compute_device(const Inputs& in) {
  for (int k = 0; k < in.size(); ++k)
    if (!in[k].is_cpu()) return in[k].device();
  return in[0].device();
}

// The views of the inputs and the output; false when a tensor has none or the kernel refuses them.
bool fused_views(const OpInfo& op, const Inputs& in, const at::Tensor& out, std::array<TensorView, kMaxInputs>& views,
                 TensorView& vout) {
  for (int k = 0; k < in.size(); ++k) {
    const auto v = input_view(in[k]);
    if (!v) return false;
    views[size_t(k)] = *v;
  }
  const auto o = view_of(out, out.mutable_data_ptr());
  if (!o) return false;
  vout = *o;
  return op.can_use(Views(views.data(), size_t(in.size())), vout, nullptr);
}

at::Tensor run(const OpInfo& op, const Inputs& in, at::IntArrayRef shape, at::ScalarType dtype) {
  const c10::Device device = compute_device(in);
  const c10::OptionalDeviceGuard device_guard(device);
  at::Tensor out = at::empty(shape, in[0].options().dtype(dtype).device(device));
  std::array<TensorView, kMaxInputs> views;
  TensorView vout;
  if (!fused_views(op, in, out, views, vout)) {
    op.eager(in, out);
    return out;
  }
  const Views input_views(views.data(), size_t(in.size()));
  dfuse::Signature sig(op.name);
  for (const TensorView& v : input_views) sig.add(v);
  sig.add(vout);
  run_gated(
      op.name, sig, std::span<at::Tensor>(&out, 1), [&](dfuse::Stream s) { op.fused(input_views, vout, s); },
      [&](std::span<at::Tensor> dst) { op.eager(in, dst[0]); });
  return out;
}

at::DimVector broadcast_shape(const at::Tensor& a, const at::Tensor& b) {
  return at::infer_size_dimvector(a.sizes(), b.sizes());
}

at::DimVector broadcast_shape(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return at::infer_size_dimvector(broadcast_shape(a, b), c.sizes());
}

c10::SymDimVector broadcast_sym_shape(const at::Tensor& a, const at::Tensor& b) {
  return at::infer_size_symdimvector(a.sym_sizes(), b.sym_sizes());
}

c10::SymDimVector broadcast_sym_shape(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
  return at::infer_size_symdimvector(broadcast_sym_shape(a, b), c.sym_sizes());
}

// Shape of h * F.silu(g) for h, g = (x + bias).chunk(2, dim=-1): the last dim halved. An odd last
// dim is refused (torch.chunk would give unequal halves).
template <typename Shape>
Shape glu_shape(Shape biased) {
  TORCH_CHECK(!biased.empty(), "dfuse bias_glu: x must have at least one dim");
  TORCH_CHECK(biased.back() % 2 == 0, "dfuse bias_glu: the last dim of x (+ bias) must be even, got ",
              biased.back());
  biased.back() /= 2;
  return biased;
}

// ---- the ops -------------------------------------------------------------------------------------

at::Tensor modulate_scale_shift(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift) {
  return run(kModulate, {&x, &scale, &shift}, broadcast_shape(x, scale, shift),
             modulate_dtype(x, scale, shift));
}

at::Tensor residual_gate_add(const at::Tensor& residual, const at::Tensor& gate, const at::Tensor& update) {
  return run(kResidualGate, {&residual, &gate, &update}, broadcast_shape(residual, gate, update),
             residual_gate_dtype(residual, gate, update));
}

at::Tensor silu_mul(const at::Tensor& a, const at::Tensor& b) {
  return run(kSiluMul, {&a, &b}, broadcast_shape(a, b), binary_dtype(a, b));
}

at::Tensor bias_silu(const at::Tensor& x, const at::Tensor& bias) {
  return run(kBiasSilu, {&x, &bias}, broadcast_shape(x, bias), binary_dtype(x, bias));
}

at::Tensor bias_glu(const at::Tensor& x, const std::optional<at::Tensor>& bias) {
  const at::DimVector biased = bias ? broadcast_shape(x, *bias) : at::DimVector(x.sizes());
  const Inputs in = bias ? Inputs{&x, &*bias} : Inputs{&x};
  return run(kBiasGlu, in, glu_shape(biased), biased_dtype(x, bias));
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

at::Tensor silu_mul_meta(const at::Tensor& a, const at::Tensor& b) {
  return at::empty_symint(broadcast_sym_shape(a, b), a.options().dtype(binary_dtype(a, b)));
}

at::Tensor bias_silu_meta(const at::Tensor& x, const at::Tensor& bias) {
  return at::empty_symint(broadcast_sym_shape(x, bias), x.options().dtype(binary_dtype(x, bias)));
}

at::Tensor bias_glu_meta(const at::Tensor& x, const std::optional<at::Tensor>& bias) {
  const c10::SymDimVector biased = bias ? broadcast_sym_shape(x, *bias) : c10::SymDimVector(x.sym_sizes());
  return at::empty_symint(glu_shape(biased), x.options().dtype(biased_dtype(x, bias)));
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
  m.def("silu_mul(Tensor a, Tensor b) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("bias_silu(Tensor x, Tensor bias) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("bias_glu(Tensor x, Tensor? bias=None) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("gate_report() -> str", &gate_report);
  m.def("op_counters(str op) -> int[]", &op_counters);
  m.def("gate_reset() -> ()", &gate_reset);
}

namespace {
// The same kernels serve CUDA and CPU tensors: the dfuse op picks its backend by device.
void register_device_impls(torch::Library& m) {
  m.impl("modulate_scale_shift", &modulate_scale_shift);
  m.impl("residual_gate_add", &residual_gate_add);
  m.impl("silu_mul", &silu_mul);
  m.impl("bias_silu", &bias_silu);
  m.impl("bias_glu", &bias_glu);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("modulate_scale_shift", &modulate_scale_shift_meta);
  m.impl("residual_gate_add", &residual_gate_add_meta);
  m.impl("silu_mul", &silu_mul_meta);
  m.impl("bias_silu", &bias_silu_meta);
  m.impl("bias_glu", &bias_glu_meta);
}
