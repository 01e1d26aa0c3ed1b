// Guards and parameter building shared by the row-wise elementwise ops.
#pragma once

#include <initializer_list>

#include "common/guards.h"
#include "common/rows.h"

namespace dfuse::detail {

// The operand that defines the geometry: bf16/f16/f32, rank 1..4, last dim contiguous,
// non-negative strides, fewer than 2^31 rows and columns and about 2^37 elements.
void check_rowwise_input(GuardList& g, const char* name, const TensorView& x);
// An operand broadcast against x: x's dtype and device, right-aligned broadcastable, last dim
// contiguous or of size 1. `x_name` names x in the messages.
void check_rowwise_operand(GuardList& g, const char* name, const TensorView& t, const TensorView& x,
                           const char* x_name = "x");

struct NamedInput {
  const char* name;
  const TensorView* view;
  bool in_place_ok;  // out may be exactly this view
};
// The output: x's dtype, device and shape, last dim contiguous, no zero strides, and no
// overlap with an input except an identical view where in-place is allowed. `x_name` names x
// in the messages.
void check_rowwise_output(GuardList& g, const TensorView& out, const TensorView& x,
                          std::initializer_list<NamedInput> inputs, const char* x_name = "x");

// Kernel parameters: geometry of x, up to four inputs broadcast against x (unused slots stay
// null).
RowwiseParams rowwise_params(const TensorView& x, std::initializer_list<const TensorView*> inputs,
                             const TensorView& out);

}  // namespace dfuse::detail
