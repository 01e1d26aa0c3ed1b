// diffusion.layernorm_modulate: guards, dispatch, and the host kernel (aten's reduction order
// emulated sequentially, common/layer_norm_stats.h).
#include "ops/norm/layernorm_modulate.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/norm.h"
#include "ops/norm/layernorm_modulate_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "layernorm_modulate";

detail::GuardList check(const TensorView& x, const TensorView& scale, const TensorView& shift,
                        const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_layernorm_modulate_inputs(g, x, scale, shift);
  detail::check_layernorm_modulate_output(g, out, x, scale, shift);
  return g;
}

void host_layernorm_modulate(const detail::LayernormModulateParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.rows.dtype, kOp, [&](auto tag) {
    detail::layernorm_modulate_rows_host<detail::ModulateEpilogue, decltype(tag)>(p);
  });
}
DFUSE_REGISTER_ENTRY(host, "layernorm_modulate", &host_layernorm_modulate);

}  // namespace

bool can_use_layernorm_modulate(const TensorView& x, const TensorView& scale, const TensorView& shift, double,
                                const TensorView& out, std::string* why) {
  return check(x, scale, shift, out).answer(why);
}

void layernorm_modulate(const TensorView& x, const TensorView& scale, const TensorView& shift, double eps,
                        const TensorView& out, Stream stream) {
  check(x, scale, shift, out).throw_if_failed();
  if (x.numel() == 0) return;
  static detail::OpEntry entry("diffusion.layernorm_modulate");
  entry.get<detail::LayernormModulateEntry>(x.device())(
      detail::layernorm_modulate_params(x, scale, shift, eps, out, nullptr), stream);
}

}  // namespace dfuse
