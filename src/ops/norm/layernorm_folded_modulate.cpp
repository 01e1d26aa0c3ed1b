// diffusion.layernorm_folded_modulate: guards, dispatch, and the host kernel (the LayerNorm +
// modulate host loop with the folded epilogue).
#include "ops/norm/layernorm_folded_modulate.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/norm.h"
#include "ops/norm/layernorm_modulate_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "layernorm_folded_modulate";

// scale/shift act as LayerNorm's weight/bias: one row shared by every row of x.
void check_single_row(detail::GuardList& g, const char* name, const TensorView& t) {
  for (int d = 0; g.ok() && d + 1 < t.dim(); ++d)
    if (t.size(d) != 1)
      g.fail("broadcast", std::string(name) + " must be one row for all of x ([D], [1, D], [1, 1, D]), got " +
                              detail::shape_str(t));
}

detail::GuardList check(const TensorView& x, const TensorView& scale, const TensorView& shift,
                        const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_layernorm_modulate_inputs(g, x, scale, shift);
  for (const auto* t : {&scale, &shift})
    if (g.ok() && (t->dim() == 0 || t->size(-1) != x.size(-1)))
      g.fail("broadcast", std::string(t == &scale ? "scale" : "shift") + " must have D = " +
                              std::to_string(x.size(-1)) + " elements per row, got " + detail::shape_str(*t));
  check_single_row(g, "scale", scale);
  check_single_row(g, "shift", shift);
  detail::check_layernorm_modulate_output(g, out, x, scale, shift);
  return g;
}

void host_layernorm_folded_modulate(const detail::LayernormModulateParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.rows.dtype, kOp, [&](auto tag) {
    detail::layernorm_modulate_rows_host<detail::FoldedModulateEpilogue, decltype(tag)>(p);
  });
}
DFUSE_REGISTER_ENTRY(host, "layernorm_folded_modulate", &host_layernorm_folded_modulate);

}  // namespace

bool can_use_layernorm_folded_modulate(const TensorView& x, const TensorView& scale, const TensorView& shift, double,
                                       const TensorView& out, std::string* why) {
  return check(x, scale, shift, out).answer(why);
}

void layernorm_folded_modulate(const TensorView& x, const TensorView& scale, const TensorView& shift, double eps,
                               const TensorView& out, Stream stream) {
  check(x, scale, shift, out).throw_if_failed();
  if (x.numel() == 0) return;
  static detail::OpEntry entry("diffusion.layernorm_folded_modulate");
  // aten sees weight = (1 + scale), a fresh tensor, and bias = shift viewed as [D].
  entry.get<detail::LayernormModulateEntry>(x.device())(
      detail::layernorm_modulate_params(x, scale, shift, eps, out, &shift), stream);
}

}  // namespace dfuse
