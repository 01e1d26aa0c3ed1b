// diffusion.bias_silu: guards, dispatch, and the host kernel.
#include "ops/activation/bias_silu.h"

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "common/rowwise_host.h"
#include "dfuse/ops/activation.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "bias_silu";

// A per-channel bias of a channel-first x ([C, 1, 1] against [B, C, H, W]) is an operand with one
// value per row, so both layouts are the row-wise form.
detail::GuardList check(const TensorView& x, const TensorView& bias, const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_rowwise_input(g, "x", x);
  detail::check_rowwise_operand(g, "bias", bias, x);
  detail::check_rowwise_output(g, out, x, {{"x", &x, true}, {"bias", &bias, false}});
  return g;
}

DFUSE_REGISTER_ENTRY(host, "bias_silu", &detail::rowwise_host_entry<detail::BiasSilu>);

}  // namespace

bool can_use_bias_silu(const TensorView& x, const TensorView& bias, const TensorView& out, std::string* why) {
  return check(x, bias, out).answer(why);
}

void bias_silu(const TensorView& x, const TensorView& bias, const TensorView& out, Stream stream) {
  check(x, bias, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.bias_silu");
  entry.get<detail::BiasSiluEntry>(x.device())(detail::rowwise_params(x, {&x, &bias}, out), stream);
}

}  // namespace dfuse
