// diffusion.rmsnorm_tanh_residual: guards, dispatch, and the host kernel.
#include "ops/norm/rmsnorm_tanh_residual.h"

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse {

namespace {

constexpr RmsNormChain kChain = RmsNormChain::storage_dtype;

detail::GuardList check(const TensorView& residual, const TensorView& gate, const TensorView& y,
                        const TensorView* weight, double eps, const TensorView& out) {
  detail::GuardList g("rmsnorm_tanh_residual");
  detail::check_rms_norm_input(g, kChain, y, weight, eps, "y", "weight", true);
  detail::check_rowwise_operand(g, "residual", residual, y, "y");
  g.same_shape("residual", residual, y, "y");
  detail::check_rowwise_operand(g, "gate", gate, y, "y");
  detail::check_rowwise_output(g, out, y, {{"residual", &residual, true}, {"gate", &gate, false}, {"y", &y, false}},
                               "y");
  if (weight) g.no_partial_overlap("out", out, "weight", *weight, false);
  return g;
}

DFUSE_REGISTER_ENTRY(host, "rmsnorm_tanh_residual", &detail::rms_norm_rows_host_entry<detail::RmsNormTanhResidual>);

}  // namespace

bool can_use_rmsnorm_tanh_residual(const TensorView& residual, const TensorView& gate, const TensorView& y,
                                   const TensorView* weight, double eps, const TensorView& out, std::string* why) {
  return check(residual, gate, y, weight, eps, out).answer(why);
}

void rmsnorm_tanh_residual(const TensorView& residual, const TensorView& gate, const TensorView& y,
                           const TensorView* weight, double eps, const TensorView& out, Stream stream) {
  check(residual, gate, y, weight, eps, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.rmsnorm_tanh_residual");
  entry.get<detail::RmsNormRowsEntry>(y.device())(
      detail::rms_norm_rows_params(kChain, y, weight, eps, {&residual, &gate}, out), stream);
}

}  // namespace dfuse
