// diffusion.modulate_scale_shift: guards, dispatch, and the host kernel.
#include "ops/adaln/modulate_scale_shift.h"

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_host.h"
#include "dfuse/ops/adaln.h"
#include "common/rowwise_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "modulate_scale_shift";

detail::GuardList check(const TensorView& x, const TensorView& scale, const TensorView& shift,
                        const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_rowwise_input(g, "x", x);
  detail::check_rowwise_operand(g, "scale", scale, x);
  detail::check_rowwise_operand(g, "shift", shift, x);
  detail::check_rowwise_output(g, out, x, {{"x", &x, true}, {"scale", &scale, false}, {"shift", &shift, false}});
  return g;
}

DFUSE_REGISTER_ENTRY(host, "modulate_scale_shift", &detail::rowwise_host_entry<detail::ModulateScaleShift>);

}  // namespace

bool can_use_modulate_scale_shift(const TensorView& x, const TensorView& scale, const TensorView& shift,
                                  const TensorView& out, std::string* why) {
  return check(x, scale, shift, out).answer(why);
}

void modulate_scale_shift(const TensorView& x, const TensorView& scale, const TensorView& shift,
                          const TensorView& out, Stream stream) {
  check(x, scale, shift, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.modulate_scale_shift");
  entry.get<detail::ModulateScaleShiftEntry>(x.device())(detail::rowwise_params(x, {&x, &scale, &shift}, out),
                                                         stream);
}

}  // namespace dfuse
