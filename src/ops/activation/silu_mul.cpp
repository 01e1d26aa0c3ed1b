// diffusion.silu_mul: guards, dispatch, and the host kernel.
#include "ops/activation/silu_mul.h"

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "common/rowwise_host.h"
#include "dfuse/ops/activation.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "silu_mul";

detail::GuardList check(const TensorView& a, const TensorView& b, const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_rowwise_input(g, "a", a);
  detail::check_rowwise_operand(g, "b", b, a, "a");
  g.same_shape("b", b, a, "a");
  detail::check_rowwise_output(g, out, a, {{"a", &a, true}, {"b", &b, true}}, "a");
  return g;
}

DFUSE_REGISTER_ENTRY(host, "silu_mul", &detail::rowwise_host_entry<detail::SiluMul>);

}  // namespace

bool can_use_silu_mul(const TensorView& a, const TensorView& b, const TensorView& out, std::string* why) {
  return check(a, b, out).answer(why);
}

void silu_mul(const TensorView& a, const TensorView& b, const TensorView& out, Stream stream) {
  check(a, b, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.silu_mul");
  entry.get<detail::SiluMulEntry>(a.device())(detail::rowwise_params(a, {&a, &b}, out), stream);
}

}  // namespace dfuse
