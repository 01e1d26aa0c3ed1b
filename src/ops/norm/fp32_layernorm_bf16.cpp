// diffusion.fp32_layernorm_bf16: guards, dispatch, and the host kernel (aten's reduction order
// emulated sequentially, common/layer_norm_stats.h).
#include "ops/norm/fp32_layernorm_bf16.h"

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/norm.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "fp32_layernorm_bf16";

void check_affine(detail::GuardList& g, const char* name, const TensorView* t, const TensorView& x) {
  if (!t) return;
  g.dtype_in(name, *t, {DType::f32});
  g.same_device(name, *t, x, "x");
  g.not_null(name, *t);
  if (g.ok() && (t->dim() != 1 || t->size(0) != x.size(-1)))
    g.fail("shape", std::string(name) + " must be [" + std::to_string(x.size(-1)) + "], got " + detail::shape_str(*t));
}

detail::GuardList check(const TensorView& x, const TensorView* weight, const TensorView* bias, const TensorView& out) {
  detail::GuardList g(kOp);
  g.dtype_in("x", x, {DType::bf16, DType::f16});
  detail::check_rowwise_input(g, "x", x);
  if (g.ok() && x.size(-1) == 0) g.fail("shape", "x must have a non-empty last dim (D), got " + detail::shape_str(x));
  check_affine(g, "weight", weight, x);
  check_affine(g, "bias", bias, x);
  detail::check_rowwise_output(g, out, x, {{"x", &x, true}});
  if (weight) g.no_partial_overlap("out", out, "weight", *weight, false);
  if (bias) g.no_partial_overlap("out", out, "bias", *bias, false);
  return g;
}

template <typename T>
void host_fp32_layernorm(const detail::Fp32LayerNormParams& p) {
  using S = detail::Storage<T>;
  const int64_t n = p.geom.cols;
  for (int64_t r = 0; r < p.geom.rows(); ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    const auto stats = detail::layer_norm_stats_host(p.path, [&](int64_t c) { return S::load(x[c]); }, n);
    const float rstd = detail::layer_norm_rstd(stats.var, p.eps);
    for (int64_t c = 0; c < n; ++c) out[c] = detail::fp32_layernorm_element<T>(p, S::load(x[c]), stats.mean, rstd, c);
  }
}

void host_fp32_layernorm_bf16(const detail::Fp32LayerNormParams& p, Stream) {
  if (p.dtype == DType::bf16)
    host_fp32_layernorm<bf16_t>(p);
  else
    host_fp32_layernorm<f16_t>(p);
}
DFUSE_REGISTER_ENTRY(host, "fp32_layernorm_bf16", &host_fp32_layernorm_bf16);

}  // namespace

bool can_use_fp32_layernorm_bf16(const TensorView& x, const TensorView* weight, const TensorView* bias, double,
                                 const TensorView& out, std::string* why) {
  return check(x, weight, bias, out).answer(why);
}

void fp32_layernorm_bf16(const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                         const TensorView& out, Stream stream) {
  check(x, weight, bias, out).throw_if_failed();
  if (x.numel() == 0) return;
  detail::Fp32LayerNormParams p;
  p.dtype = x.dtype();
  p.device = x.device().index;
  p.geom = detail::row_geometry(x);
  p.x = detail::row_operand(x, x);
  p.out = detail::row_operand(out, x);
  if (weight) p.weight = static_cast<const float*>(weight->data()), p.weight_stride = weight->stride(0);
  if (bias) p.bias = static_cast<const float*>(bias->data()), p.bias_stride = bias->stride(0);
  p.eps = float(eps);
  // The fp32 copy x.float() is a fresh allocation: only weight and bias can be misaligned.
  const bool aligned = (!weight || detail::layer_norm_pointer_aligned(*weight)) &&
                       (!bias || detail::layer_norm_pointer_aligned(*bias));
  p.path = detail::layer_norm_path(x.size(-1), aligned);
  static detail::OpEntry entry("diffusion.fp32_layernorm_bf16");
  entry.get<detail::Fp32LayerNormEntry>(x.device())(p, stream);
}

}  // namespace dfuse
