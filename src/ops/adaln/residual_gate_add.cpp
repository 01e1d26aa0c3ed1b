// diffusion.residual_gate_add: guards, dispatch, and the host kernel.
#include "ops/adaln/residual_gate_add.h"

#include "common/entries.h"
#include "common/rowwise_guards.h"
#include "common/rowwise_host.h"
#include "dfuse/ops/adaln.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "residual_gate_add";

detail::GuardList check(const TensorView& residual, const TensorView& gate, const TensorView& update,
                        const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_rowwise_input(g, "residual", residual);
  detail::check_rowwise_operand(g, "gate", gate, residual);
  detail::check_rowwise_operand(g, "update", update, residual);
  g.same_shape("update", update, residual, "residual");
  detail::check_rowwise_output(g, out, residual,
                               {{"residual", &residual, true}, {"gate", &gate, false}, {"update", &update, false}});
  return g;
}

DFUSE_REGISTER_ENTRY(host, "residual_gate_add", &detail::rowwise_host_entry<detail::ResidualGateAdd>);

}  // namespace

bool can_use_residual_gate_add(const TensorView& residual, const TensorView& gate, const TensorView& update,
                               const TensorView& out, std::string* why) {
  return check(residual, gate, update, out).answer(why);
}

void residual_gate_add(const TensorView& residual, const TensorView& gate, const TensorView& update,
                       const TensorView& out, Stream stream) {
  check(residual, gate, update, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.residual_gate_add");
  entry.get<detail::ResidualGateAddEntry>(residual.device())(
      detail::rowwise_params(residual, {&residual, &gate, &update}, out), stream);
}

}  // namespace dfuse
