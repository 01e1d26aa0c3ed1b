// diffusion.rmsnorm_scale_shift / diffusion.rmsnorm_decomposed_scale_shift: guards, dispatch, and the
// host kernel.
#include "ops/norm/rmsnorm_scale_shift.h"

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "rmsnorm_scale_shift";

detail::GuardList check(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                        const TensorView& scale, const TensorView& shift, const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_rms_norm_input(g, chain, x, weight, eps);
  detail::check_rowwise_operand(g, "scale", scale, x);
  detail::check_rowwise_operand(g, "shift", shift, x);
  if (weight)
    detail::check_rowwise_output(g, out, x,
                                 {{"x", &x, true}, {"weight", weight, false}, {"scale", &scale, false},
                                  {"shift", &shift, false}});
  else
    detail::check_rowwise_output(g, out, x, {{"x", &x, true}, {"scale", &scale, false}, {"shift", &shift, false}});
  return g;
}

const char* op_id(RmsNormChain chain) {
  return chain == RmsNormChain::torch_rms_norm ? "diffusion.rmsnorm_scale_shift"
                                               : "diffusion.rmsnorm_decomposed_scale_shift";
}

DFUSE_REGISTER_ENTRY(host, "rmsnorm_scale_shift", &detail::rms_norm_rows_host_entry<detail::RmsNormScaleShift>);
DFUSE_REGISTER_ENTRY(host, "rmsnorm_decomposed_scale_shift",
                     &detail::rms_norm_rows_host_entry<detail::RmsNormScaleShift>);

}  // namespace

bool can_use_rmsnorm_scale_shift(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                                 const TensorView& scale, const TensorView& shift, const TensorView& out,
                                 std::string* why) {
  return check(chain, x, weight, eps, scale, shift, out).answer(why);
}

void rmsnorm_scale_shift(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                         const TensorView& scale, const TensorView& shift, const TensorView& out, Stream stream) {
  check(chain, x, weight, eps, scale, shift, out).throw_if_failed();
  static detail::OpEntry torch_entry(op_id(RmsNormChain::torch_rms_norm));
  static detail::OpEntry decomposed_entry(op_id(RmsNormChain::diffusers_decomposed));
  detail::OpEntry& entry = chain == RmsNormChain::torch_rms_norm ? torch_entry : decomposed_entry;
  entry.get<detail::RmsNormRowsEntry>(x.device())(
      detail::rms_norm_rows_params(chain, x, weight, eps, {&scale, &shift}, out), stream);
}

}  // namespace dfuse
