// diffusion.qk_head_layernorm: guards, dispatch, and the host kernel (aten's reduction order
// emulated sequentially, common/layer_norm_stats.h).
#include "ops/norm/qk_head_layernorm.h"

#include <utility>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/norm.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "qk_head_layernorm";

void check_affine(detail::GuardList& g, const char* name, const TensorView* t, const TensorView& x,
                  const char* x_name) {
  if (!t) return;
  g.same_dtype(name, *t, x, x_name);
  g.same_device(name, *t, x, x_name);
  g.not_null(name, *t);
  if (g.ok() && (t->dim() != 1 || t->size(0) != x.size(-1)))
    g.fail("shape", std::string(name) + " must be [" + std::to_string(x.size(-1)) + "] (" + x_name +
                        "'s head dim), got " + detail::shape_str(*t));
}

void check_output(detail::GuardList& g, const char* name, const TensorView& out, const char* x_name,
                  const TensorView& x) {
  g.same_dtype(name, out, x, x_name);
  g.same_device(name, out, x, x_name);
  g.same_shape(name, out, x, x_name);
  g.not_null(name, out);
  g.last_dim_contiguous(name, out);
  g.non_negative_strides(name, out);
  g.non_overlapping(name, out);
}

detail::GuardList check(const TensorView& q, const TensorView& k, const TensorView* q_weight, const TensorView* q_bias,
                        const TensorView* k_weight, const TensorView* k_bias, const TensorView& q_out,
                        const TensorView& k_out) {
  detail::GuardList g(kOp);
  detail::check_rowwise_input(g, "q", q);
  detail::check_rowwise_input(g, "k", k);
  g.same_dtype("k", k, q, "q");
  g.same_device("k", k, q, "q");
  for (const auto* t : {&q, &k})
    if (g.ok() && t->dim() > 0 && t->size(-1) == 0)
      g.fail("shape", std::string(t == &q ? "q" : "k") + " must have a non-empty head dim, got " + detail::shape_str(*t));
  check_affine(g, "q_weight", q_weight, q, "q");
  check_affine(g, "q_bias", q_bias, q, "q");
  check_affine(g, "k_weight", k_weight, k, "k");
  check_affine(g, "k_bias", k_bias, k, "k");
  check_output(g, "q_out", q_out, "q", q);
  check_output(g, "k_out", k_out, "k", k);
  g.no_partial_overlap("q_out", q_out, "q", q, true);
  g.no_partial_overlap("q_out", q_out, "k", k, false);
  g.no_partial_overlap("k_out", k_out, "k", k, true);
  g.no_partial_overlap("k_out", k_out, "q", q, false);
  g.no_partial_overlap("k_out", k_out, "q_out", q_out, false);
  for (const auto& [name, t] : {std::pair{"q_weight", q_weight}, std::pair{"q_bias", q_bias},
                                std::pair{"k_weight", k_weight}, std::pair{"k_bias", k_bias}}) {
    if (!t) continue;
    g.no_partial_overlap("q_out", q_out, name, *t, false);
    g.no_partial_overlap("k_out", k_out, name, *t, false);
  }
  return g;
}

detail::HeadLayerNorm head(const TensorView& x, const TensorView* weight, const TensorView* bias,
                           const TensorView& out) {
  detail::HeadLayerNorm h;
  h.geom = detail::row_geometry(x);
  h.x = detail::row_operand(x, x);
  h.out = detail::row_operand(out, x);
  if (weight) h.weight = weight->data(), h.weight_stride = weight->stride(0);
  if (bias) h.bias = bias->data(), h.bias_stride = bias->stride(0);
  h.path = detail::layer_norm_path(x, weight, bias);
  return h;
}

template <typename T>
void host_head_layernorm(const detail::HeadLayerNorm& h, float eps) {
  using S = detail::Storage<T>;
  const int64_t n = h.geom.cols;
  const auto* weight = static_cast<const T*>(h.weight);
  const auto* bias = static_cast<const T*>(h.bias);
  for (int64_t r = 0; r < h.geom.rows(); ++r) {
    uint32_t idx[3];
    h.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(h.x.data) + h.x.offset(idx);
    T* out = static_cast<T*>(h.out.data) + h.out.offset(idx);
    const auto stats = detail::layer_norm_stats_host(h.path, [&](int64_t c) { return S::load(x[c]); }, n);
    const float rstd = detail::layer_norm_rstd(stats.var, eps);
    for (int64_t c = 0; c < n; ++c) {
      const float g = weight ? S::load(weight[c * h.weight_stride]) : 1.0f;
      const float b = bias ? S::load(bias[c * h.bias_stride]) : 0.0f;
      out[c] = S::store(detail::layer_norm_element(h.path, S::load(x[c]), stats.mean, rstd, weight != nullptr, g,
                                                   bias != nullptr, b, int(c % 4)));
    }
  }
}

void host_qk_head_layernorm(const detail::QkHeadLayerNormParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.dtype, kOp, [&](auto tag) {
    for (const auto& h : p.head) host_head_layernorm<decltype(tag)>(h, p.eps);
  });
}
DFUSE_REGISTER_ENTRY(host, "qk_head_layernorm", &host_qk_head_layernorm);

}  // namespace

bool can_use_qk_head_layernorm(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                               const TensorView* q_bias, const TensorView* k_weight, const TensorView* k_bias, double,
                               const TensorView& q_out, const TensorView& k_out, std::string* why) {
  return check(q, k, q_weight, q_bias, k_weight, k_bias, q_out, k_out).answer(why);
}

void qk_head_layernorm(const TensorView& q, const TensorView& k, const TensorView* q_weight, const TensorView* q_bias,
                       const TensorView* k_weight, const TensorView* k_bias, double eps, const TensorView& q_out,
                       const TensorView& k_out, Stream stream) {
  check(q, k, q_weight, q_bias, k_weight, k_bias, q_out, k_out).throw_if_failed();
  if (q.numel() == 0 && k.numel() == 0) return;
  detail::QkHeadLayerNormParams p;
  p.dtype = q.dtype();
  p.device = q.device().index;
  p.eps = float(eps);
  p.head[0] = head(q, q_weight, q_bias, q_out);
  p.head[1] = head(k, k_weight, k_bias, k_out);
  static detail::OpEntry entry("diffusion.qk_head_layernorm");
  entry.get<detail::QkHeadLayerNormEntry>(q.device())(p, stream);
}

}  // namespace dfuse
