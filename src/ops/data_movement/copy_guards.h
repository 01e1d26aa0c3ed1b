// Guards shared by the data-movement ops.
#pragma once

#include <initializer_list>
#include <vector>

#include "common/guards.h"

namespace dfuse::detail {

// A source view: bf16/f16/f32 with `ref`'s dtype and device, rank `rank`, data present,
// non-negative strides, last dim contiguous.
void check_copy_input(GuardList& g, const char* name, const TensorView& t, int rank, const TensorView& ref,
                      const char* ref_name);

struct NamedView {
  const char* name;
  const TensorView* view;
};

// An output: `ref`'s dtype and device, shape `sizes`, contiguous, overlapping none of `others`.
void check_copy_output(GuardList& g, const char* name, const TensorView& out,
                       const std::vector<int64_t>& sizes, const TensorView& ref, const char* ref_name,
                       std::initializer_list<NamedView> others);

}  // namespace dfuse::detail
