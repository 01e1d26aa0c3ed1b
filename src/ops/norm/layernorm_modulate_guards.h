// The guards diffusion.layernorm_modulate and diffusion.layernorm_folded_modulate share (the
// folded op adds its own checks on scale and shift between the two), and their launch parameters.
#pragma once

#include "common/guards.h"
#include "common/layer_norm_stats.h"
#include "common/rowwise_guards.h"
#include "ops/norm/layernorm_modulate.h"

namespace dfuse::detail {

// x: a row-wise input with a non-empty last dim (D); scale and shift: operands broadcast against x.
inline void check_layernorm_modulate_inputs(GuardList& g, const TensorView& x, const TensorView& scale,
                                            const TensorView& shift) {
  check_rowwise_input(g, "x", x);
  if (g.ok() && x.size(-1) == 0) g.fail("shape", "x must have a non-empty last dim (D), got " + shape_str(x));
  check_rowwise_operand(g, "scale", scale, x);
  check_rowwise_operand(g, "shift", shift, x);
}

// out: shaped like x; it may be x itself (in place), never overlap scale or shift.
inline void check_layernorm_modulate_output(GuardList& g, const TensorView& out, const TensorView& x,
                                            const TensorView& scale, const TensorView& shift) {
  check_rowwise_output(g, out, x, {{"x", &x, true}, {"scale", &scale, false}, {"shift", &shift, false}});
}

// The parameters of either op on guarded inputs: x's rows with scale and shift, eps, and the LayerNorm path
// aten takes for x given `aten_bias` (the tensor aten sees as bias, or nullptr; neither op hands aten a
// weight it could check: the folded op's 1 + scale is a fresh tensor).
inline LayernormModulateParams layernorm_modulate_params(const TensorView& x, const TensorView& scale,
                                                         const TensorView& shift, double eps, const TensorView& out,
                                                         const TensorView* aten_bias) {
  LayernormModulateParams p;
  p.rows = rowwise_params(x, {&x, &scale, &shift}, out);
  p.eps = float(eps);
  p.path = layer_norm_path(x, nullptr, aten_bias);
  return p;
}

}  // namespace dfuse::detail
