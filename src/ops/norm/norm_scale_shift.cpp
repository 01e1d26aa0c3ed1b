// diffusion.norm_scale_shift and diffusion.rmsnorm_modulate_fp32 (LTX-2's diffusers RMSNorm +
// modulate): guards, dispatch, and the host kernel (ops/norm/norm_fp32_rows.h with the fp32 modulate
// epilogue).
#include "ops/norm/norm_scale_shift.h"

#include <cmath>
#include <string>

#include "common/entries.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rmsnorm.h"
#include "ops/norm/rmsnorm_rows.h"

namespace dfuse {

namespace {

detail::GuardList check(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias,
                        double eps, const TensorView& scale, const TensorView& shift,
                        const TensorView& out) {
  detail::GuardList g("norm_scale_shift");
  if (norm != NormKind::layer_norm && norm != NormKind::rms_norm)
    g.fail("norm", "norm must be layer_norm or rms_norm, got " + std::to_string(int(norm)));
  detail::check_rowwise_input(g, "x", x);
  if (!g.ok()) return g;
  const int64_t d = x.size(-1);
  if (d == 0) g.fail("shape", "x must have a non-empty last dim (D), got " + detail::shape_str(x));
  if (d > detail::kNormFp32MaxCols)
    g.fail("extent", "x has rows of " + std::to_string(d) + " elements; at most " +
                         std::to_string(detail::kNormFp32MaxCols) + " are supported");
  if (!(std::isfinite(eps) && eps >= 0.0))
    g.fail("eps", "eps must be finite and non-negative, got " + std::to_string(eps));
  detail::check_rowwise_operand(g, "scale", scale, x);
  detail::check_rowwise_operand(g, "shift", shift, x);
  if (weight) detail::check_norm_affine(g, "weight", *weight, x);
  if (bias && norm == NormKind::rms_norm)
    g.fail("bias", "rms_norm has no bias (F.rms_norm(x, (D,), weight, eps)); bias must be null");
  if (bias) detail::check_norm_affine(g, "bias", *bias, x);
  if (!g.ok()) return g;
  detail::check_rowwise_output(g, out, x, {{"x", &x, true}, {"scale", &scale, false}, {"shift", &shift, false}});
  if (weight) g.no_partial_overlap("out", out, "weight", *weight, false);
  if (bias) g.no_partial_overlap("out", out, "bias", *bias, false);
  return g;
}

// rmsnorm_modulate_fp32: the float mean of x's squares is the diffusers chain's (the same guards on x,
// weight and eps, including the row length its mean reproduces), scale/shift and out as above.
detail::GuardList check_rmsnorm_modulate_fp32(const TensorView& x, const TensorView* weight, double eps,
                                              const TensorView& scale, const TensorView& shift,
                                              const TensorView& out) {
  detail::GuardList g("rmsnorm_modulate_fp32");
  detail::check_rms_norm_input(g, RmsNormChain::diffusers_decomposed, x, weight, eps);
  detail::check_rowwise_operand(g, "scale", scale, x);
  detail::check_rowwise_operand(g, "shift", shift, x);
  if (!g.ok()) return g;
  detail::check_rowwise_output(g, out, x, {{"x", &x, true}, {"scale", &scale, false}, {"shift", &shift, false}});
  if (weight) g.no_partial_overlap("out", out, "weight", *weight, false);
  return g;
}

void run(detail::OpEntry& entry, detail::Fp32NormStats stats, const TensorView& x, const TensorView* weight,
         const TensorView* bias, double eps, const TensorView& scale, const TensorView& shift, const TensorView& out, Stream stream) {
  if (x.numel() == 0) return;
  entry.get<detail::NormFp32RowsEntry>(x.device())(
      detail::norm_fp32_rows_params(stats, x, weight, bias, eps, scale, shift, out), stream);
}

DFUSE_REGISTER_ENTRY(host, "norm_scale_shift", &detail::norm_fp32_rows_host_entry<detail::ModulateFp32>);
DFUSE_REGISTER_ENTRY(host, "rmsnorm_modulate_fp32", &detail::norm_fp32_rows_host_entry<detail::ModulateFp32>);

}  // namespace

bool can_use_norm_scale_shift(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias,
                              double eps, const TensorView& scale, const TensorView& shift, const TensorView& out,
                              std::string* why) {
  return check(norm, x, weight, bias, eps, scale, shift, out).answer(why);
}

void norm_scale_shift(NormKind norm, const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                      const TensorView& scale, const TensorView& shift, const TensorView& out, Stream stream) {
  check(norm, x, weight, bias, eps, scale, shift, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.norm_scale_shift");
  run(entry,
      norm == NormKind::layer_norm ? detail::Fp32NormStats::layer_norm : detail::Fp32NormStats::torch_rms_norm, x,
      weight, bias, eps, scale, shift, out, stream);
}

bool can_use_rmsnorm_modulate_fp32(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                                   const TensorView& shift, const TensorView& out, std::string* why) {
  return check_rmsnorm_modulate_fp32(x, weight, eps, scale, shift, out).answer(why);
}

void rmsnorm_modulate_fp32(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                           const TensorView& shift, const TensorView& out, Stream stream) {
  check_rmsnorm_modulate_fp32(x, weight, eps, scale, shift, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.rmsnorm_modulate_fp32");
  run(entry, detail::Fp32NormStats::mean_of_squares, x, weight, nullptr, eps, scale, shift, out, stream);
}

}  // namespace dfuse
