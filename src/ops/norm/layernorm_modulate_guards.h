// The guards diffusion.layernorm_modulate and diffusion.layernorm_folded_modulate share (the
// folded op adds its own checks on scale and shift between the two).
#pragma once

#include "common/guards.h"
#include "common/rowwise_guards.h"

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

}  // namespace dfuse::detail
