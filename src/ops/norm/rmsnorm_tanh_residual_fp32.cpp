// diffusion.rmsnorm_tanh_residual_fp32: guards, dispatch, and the host kernel
// (ops/norm/norm_fp32_rows.h with the fp32 gated-residual epilogue).
#include "ops/norm/rmsnorm_tanh_residual_fp32.h"

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rmsnorm.h"
#include "ops/norm/rmsnorm_rows.h"

namespace dfuse {

namespace {

detail::GuardList check(const TensorView& residual, const TensorView& gate, const TensorView& y,
                        const TensorView* weight, double eps, const TensorView& out) {
  detail::GuardList g("rmsnorm_tanh_residual_fp32");
  // The float mean of y's squares is the diffusers chain's mean: the same guards on y, weight, eps.
  detail::check_rms_norm_input(g, RmsNormChain::diffusers_decomposed, y, weight, eps, "y", "weight");
  detail::check_rowwise_operand(g, "residual", residual, y, "y");
  g.same_shape("residual", residual, y, "y");
  detail::check_rowwise_operand(g, "gate", gate, y, "y");
  detail::check_rowwise_output(g, out, y, {{"residual", &residual, true}, {"gate", &gate, false}, {"y", &y, false}},
                               "y");
  if (weight) g.no_partial_overlap("out", out, "weight", *weight, false);
  return g;
}

DFUSE_REGISTER_ENTRY(host, "rmsnorm_tanh_residual_fp32", &detail::norm_fp32_rows_host_entry<detail::TanhResidualFp32>);

}  // namespace

bool can_use_rmsnorm_tanh_residual_fp32(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                        const TensorView* weight, double eps, const TensorView& out,
                                        std::string* why) {
  return check(residual, gate, y, weight, eps, out).answer(why);
}

void rmsnorm_tanh_residual_fp32(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                const TensorView* weight, double eps, const TensorView& out, Stream stream) {
  check(residual, gate, y, weight, eps, out).throw_if_failed();
  if (y.numel() == 0) return;
  static detail::OpEntry entry("diffusion.rmsnorm_tanh_residual_fp32");
  entry.get<detail::NormFp32RowsEntry>(y.device())(
      detail::norm_fp32_rows_params(detail::Fp32NormStats::mean_of_squares, y, weight, nullptr, eps, residual, gate,
                                    out),
      stream);
}

}  // namespace dfuse
