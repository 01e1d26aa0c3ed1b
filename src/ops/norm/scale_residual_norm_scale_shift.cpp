// diffusion.scale_residual_norm_scale_shift: guards, dispatch, and the host kernel (aten's
// reduction orders emulated sequentially over the row's r values).
#include "ops/norm/scale_residual_norm_scale_shift.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/norm.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "scale_residual_norm_scale_shift";

// One of the two outputs: residual's dtype, device and shape, last dim contiguous, no internal
// overlap, and no overlap with an input except (residual_out) residual itself, in place.
void check_output(detail::GuardList& g, const char* name, const TensorView& o, const TensorView& residual,
                  std::initializer_list<detail::NamedInput> inputs) {
  g.same_dtype(name, o, residual, "residual");
  g.same_device(name, o, residual, "residual");
  g.same_shape(name, o, residual, "residual");
  g.not_null(name, o);
  g.last_dim_contiguous(name, o);
  g.non_negative_strides(name, o);
  g.non_overlapping(name, o);
  for (const detail::NamedInput& in : inputs) g.no_partial_overlap(name, o, in.name, *in.view, in.in_place_ok);
}

detail::GuardList check(ResidualNorm norm, const TensorView& residual, const TensorView& gate,
                        const TensorView& update, const TensorView* weight, double eps, const TensorView& scale,
                        const TensorView& shift, const TensorView& residual_out, const TensorView& out) {
  detail::GuardList g(kOp);
  if (norm != ResidualNorm::layer_norm && norm != ResidualNorm::rms_norm)
    g.fail("norm", "norm must be layer_norm or rms_norm, got " + std::to_string(int(norm)));
  detail::check_rowwise_input(g, "residual", residual);
  if (!g.ok()) return g;
  const int64_t d = residual.dim() > 0 ? residual.size(-1) : 0;
  if (d == 0) g.fail("shape", "residual must have a non-empty last dim (D), got " + detail::shape_str(residual));
  if (d > detail::kScaleResidualNormMaxCols)
    g.fail("extent", "residual has rows of " + std::to_string(d) + " elements; at most " +
                         std::to_string(detail::kScaleResidualNormMaxCols) + " are supported");
  if (!(std::isfinite(eps) && eps >= 0.0))
    g.fail("eps", "eps must be finite and non-negative, got " + std::to_string(eps));
  detail::check_rowwise_operand(g, "gate", gate, residual, "residual");
  detail::check_rowwise_operand(g, "update", update, residual, "residual");
  detail::check_rowwise_operand(g, "scale", scale, residual, "residual");
  detail::check_rowwise_operand(g, "shift", shift, residual, "residual");
  if (weight && norm == ResidualNorm::layer_norm)
    g.fail("weight", "layer_norm is affine-free here (F.layer_norm(r, (D,), eps=eps)); weight must be null");
  if (weight && norm == ResidualNorm::rms_norm) {
    g.same_dtype("weight", *weight, residual, "residual");
    g.same_device("weight", *weight, residual, "residual");
    g.not_null("weight", *weight);
    if (g.ok() && (weight->dim() != 1 || weight->size(0) != d))
      g.fail("shape", "weight must be [" + std::to_string(d) + "] (residual's last dim), got " +
                          detail::shape_str(*weight));
    if (g.ok() && weight->stride(0) != 1 && d > 1)
      g.fail("layout", "weight must be contiguous, got stride " + std::to_string(weight->stride(0)));
  }
  if (!g.ok()) return g;
  check_output(g, "residual_out", residual_out, residual,
               {{"residual", &residual, true}, {"gate", &gate, false}, {"update", &update, false},
                {"scale", &scale, false}, {"shift", &shift, false}});
  check_output(g, "out", out, residual,
               {{"residual", &residual, false}, {"gate", &gate, false}, {"update", &update, false},
                {"scale", &scale, false}, {"shift", &shift, false}, {"residual_out", &residual_out, false}});
  if (weight) {
    g.no_partial_overlap("residual_out", residual_out, "weight", *weight, false);
    g.no_partial_overlap("out", out, "weight", *weight, false);
  }
  return g;
}

// Per row: r computed and written (each element read before it is written: residual_out may be
// residual), the statistics folded from the r values, then every output element.
template <typename T>
void host_rows(const detail::ScaleResidualNormParams& p) {
  using S = detail::Storage<T>;
  const detail::RowwiseParams& q = p.rows;
  const int64_t n = q.geom.cols;
  const T* weight = static_cast<const T*>(p.weight);
  std::vector<T> r(static_cast<size_t>(n));
  for (int64_t row = 0; row < q.geom.rows(); ++row) {
    uint32_t idx[3];
    q.geom.split(uint32_t(row), idx);
    const auto in = [&](int k) { return static_cast<const T*>(q.in[k].data) + q.in[k].offset(idx); };
    const T *residual = in(0), *gate = in(1), *update = in(2), *scale = in(3);
    const T* shift = static_cast<const T*>(p.shift.data) + p.shift.offset(idx);
    T* r_out = static_cast<T*>(q.out.data) + q.out.offset(idx);
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    for (int64_t k = 0; k < n; ++k) {
      r[size_t(k)] = detail::ResidualGateAdd<T>{}(residual[k * q.in[0].col_stride], gate[k * q.in[1].col_stride],
                                                  update[k * q.in[2].col_stride]);
      r_out[k] = r[size_t(k)];
    }
    const auto stats = detail::scale_residual_norm_stats_host(p, [&](int64_t k) { return S::load(r[size_t(k)]); }, n);
    for (int64_t k = 0; k < n; ++k)
      out[k] = detail::scale_residual_norm_element<T>(p, S::load(r[size_t(k)]), stats, int(k % 4),
                                                      weight ? S::load(weight[k]) : 1.0f,
                                                      scale[k * q.in[3].col_stride], shift[k * p.shift.col_stride]);
  }
}

void host_scale_residual_norm_scale_shift(const detail::ScaleResidualNormParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.rows.dtype, kOp, [&](auto tag) { host_rows<decltype(tag)>(p); });
}
DFUSE_REGISTER_ENTRY(host, "scale_residual_norm_scale_shift", &host_scale_residual_norm_scale_shift);

}  // namespace

bool can_use_scale_residual_norm_scale_shift(ResidualNorm norm, const TensorView& residual, const TensorView& gate,
                                             const TensorView& update, const TensorView* weight, double eps,
                                             const TensorView& scale, const TensorView& shift,
                                             const TensorView& residual_out, const TensorView& out,
                                             std::string* why) {
  return check(norm, residual, gate, update, weight, eps, scale, shift, residual_out, out).answer(why);
}

void scale_residual_norm_scale_shift(ResidualNorm norm, const TensorView& residual, const TensorView& gate,
                                     const TensorView& update, const TensorView* weight, double eps,
                                     const TensorView& scale, const TensorView& shift, const TensorView& residual_out,
                                     const TensorView& out, Stream stream) {
  check(norm, residual, gate, update, weight, eps, scale, shift, residual_out, out).throw_if_failed();
  if (residual.numel() == 0) return;
  detail::ScaleResidualNormParams p;
  p.rows = detail::rowwise_params(residual, {&residual, &gate, &update, &scale}, residual_out);
  p.shift = detail::row_operand(shift, residual);
  p.out = detail::row_operand(out, residual);
  p.weight = weight ? weight->data() : nullptr;
  p.norm = norm == ResidualNorm::layer_norm ? detail::ResidualNormKind::layer_norm : detail::ResidualNormKind::rms_norm;
  p.eps = float(eps);
  // r is a fresh contiguous tensor in the chain: aligned, so only D and the weight decide the path.
  const bool weight_aligned = !weight || detail::layer_norm_pointer_aligned(*weight);
  p.path = detail::layer_norm_path(residual.size(-1), weight_aligned);
  static detail::OpEntry entry("diffusion.scale_residual_norm_scale_shift");
  entry.get<detail::ScaleResidualNormEntry>(residual.device())(p, stream);
}

}  // namespace dfuse
