// Eager LayerNorm replica: the public entry point (guards, aten's path choice) and the host loop,
// which emulates each path's reduction order sequentially (common/layer_norm_stats.h).
#include "dfuse/eager/layer_norm.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "eager/layer_norm_params.h"

namespace dfuse::eager {

namespace {

using dfuse::detail::LayerNormPath;

template <typename T>
void host_layer_norm_typed(const detail::LayerNormParams& p) {
  using S = dfuse::detail::Storage<T>;
  const int64_t n = p.geom.cols;
  const auto* weight = static_cast<const T*>(p.weight);
  const auto* bias = static_cast<const T*>(p.bias);
  for (int64_t r = 0; r < p.geom.rows(); ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    const auto stats = dfuse::detail::layer_norm_stats_host(p.path, [&](int64_t k) { return S::load(x[k]); }, n);
    const float rstd = dfuse::detail::layer_norm_rstd(stats.var, p.eps);
    for (int64_t k = 0; k < n; ++k) {
      const float g = weight ? S::load(weight[k * p.weight_stride]) : 1.0f;
      const float b = bias ? S::load(bias[k * p.bias_stride]) : 0.0f;
      out[k] = S::store(dfuse::detail::layer_norm_element(p.path, S::load(x[k]), stats.mean, rstd, weight != nullptr,
                                                          g, bias != nullptr, b, int(k % 4)));
    }
  }
}

void host_layer_norm(const detail::LayerNormParams& p, Stream) {
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.layer_norm",
                                       [&](auto tag) { host_layer_norm_typed<decltype(tag)>(p); });
}
DFUSE_REGISTER_ENTRY(host, "eager.layer_norm", &host_layer_norm);

void check_affine(dfuse::detail::GuardList& g, const char* name, const TensorView* t, const TensorView& x) {
  if (!t) return;
  g.same_dtype(name, *t, x, "x");
  g.same_device(name, *t, x, "x");
  g.not_null(name, *t);
  if (g.ok() && (t->dim() != 1 || t->size(0) != x.size(-1)))
    g.fail("shape", std::string(name) + " must be [" + std::to_string(x.size(-1)) + "], got " +
                        dfuse::detail::shape_str(*t));
}

}  // namespace

void layer_norm(const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                const TensorView& out, Stream stream) {
  dfuse::detail::GuardList g("eager.layer_norm");
  dfuse::detail::check_rowwise_input(g, "x", x);
  check_affine(g, "weight", weight, x);
  check_affine(g, "bias", bias, x);
  dfuse::detail::check_rowwise_output(g, out, x, {{"x", &x, false}});
  g.throw_if_failed();
  detail::LayerNormParams p;
  p.dtype = x.dtype();
  p.device = x.device().index;
  p.geom = dfuse::detail::row_geometry(x);
  p.x = dfuse::detail::row_operand(x, x);
  p.out = dfuse::detail::row_operand(out, x);
  if (weight) p.weight = weight->data(), p.weight_stride = weight->stride(0);
  if (bias) p.bias = bias->data(), p.bias_stride = bias->stride(0);
  p.eps = float(eps);
  p.path = dfuse::detail::layer_norm_path(x, weight, bias);
  if (x.numel() == 0) return;
  auto entry = reinterpret_cast<detail::LayerNormEntry>(
      dfuse::detail::find_entry(dfuse::detail::backend_for(x.device()), "eager.layer_norm"));
  entry(p, stream);
}

}  // namespace dfuse::eager
