// diffusion.scaled_residual_bf16: guards, dispatch, and the host kernel.
#include "ops/adaln/scaled_residual_bf16.h"

#include "common/entries.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/adaln.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "scaled_residual_bf16";

detail::GuardList check(const TensorView& residual, const TensorView& update, const TensorView& gate,
                        const TensorView& out) {
  detail::GuardList g(kOp);
  g.dtype_in("residual", residual, {DType::bf16});
  detail::check_rowwise_input(g, "residual", residual);
  detail::check_rowwise_operand(g, "update", update, residual, "residual");
  g.same_shape("update", update, residual, "residual");
  g.dtype_in("gate", gate, {DType::f32});
  g.same_device("gate", gate, residual, "residual");
  g.not_null("gate", gate);
  g.broadcastable_rows("gate", gate, residual, "residual");
  g.non_negative_strides("gate", gate);
  detail::check_rowwise_output(g, out, residual,
                               {{"residual", &residual, true}, {"update", &update, false}, {"gate", &gate, false}},
                               "residual");
  return g;
}

void scaled_residual_bf16_host(const detail::RowwiseParams& p, Stream) {
  const detail::ScaledResidualBf16 fn;
  const int64_t rows = p.geom.rows(), cols = p.geom.cols;
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const auto* residual = static_cast<const bf16_t*>(p.in[0].data) + p.in[0].offset(idx);
    const auto* update = static_cast<const bf16_t*>(p.in[1].data) + p.in[1].offset(idx);
    const auto* gate = static_cast<const float*>(p.in[2].data) + p.in[2].offset(idx);
    auto* out = static_cast<bf16_t*>(p.out.data) + p.out.offset(idx);
    for (int64_t c = 0; c < cols; ++c) out[c] = fn(residual[c], update[c], gate[c * p.in[2].col_stride]);
  }
}

DFUSE_REGISTER_ENTRY(host, "scaled_residual_bf16", &scaled_residual_bf16_host);

}  // namespace

bool can_use_scaled_residual_bf16(const TensorView& residual, const TensorView& update, const TensorView& gate,
                                  const TensorView& out, std::string* why) {
  return check(residual, update, gate, out).answer(why);
}

void scaled_residual_bf16(const TensorView& residual, const TensorView& update, const TensorView& gate,
                          const TensorView& out, Stream stream) {
  check(residual, update, gate, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.scaled_residual_bf16");
  entry.get<detail::ScaledResidualBf16Entry>(residual.device())(
      detail::rowwise_params(residual, {&residual, &update, &gate}, out), stream);
}

}  // namespace dfuse
