// diffusion.rmsnorm_scale: guards, dispatch, and the host kernel.
#include "ops/norm/rmsnorm_scale.h"

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse {

namespace {

constexpr RmsNormChain kChain = RmsNormChain::storage_dtype;

detail::GuardList check(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                        const TensorView& out) {
  detail::GuardList g("rmsnorm_scale");
  detail::check_rms_norm_input(g, kChain, x, weight, eps, "x", "weight", true);
  detail::check_rowwise_operand(g, "scale", scale, x);
  detail::check_rowwise_output(g, out, x, {{"x", &x, true}, {"scale", &scale, false}});
  if (weight) g.no_partial_overlap("out", out, "weight", *weight, false);
  return g;
}

DFUSE_REGISTER_ENTRY(host, "rmsnorm_scale", &detail::rms_norm_rows_host_entry<detail::RmsNormScale>);

}  // namespace

bool can_use_rmsnorm_scale(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                           const TensorView& out, std::string* why) {
  return check(x, weight, eps, scale, out).answer(why);
}

void rmsnorm_scale(const TensorView& x, const TensorView* weight, double eps, const TensorView& scale,
                   const TensorView& out, Stream stream) {
  check(x, weight, eps, scale, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.rmsnorm_scale");
  entry.get<detail::RmsNormRowsEntry>(x.device())(detail::rms_norm_rows_params(kChain, x, weight, eps, {&scale}, out),
                                                  stream);
}

}  // namespace dfuse
