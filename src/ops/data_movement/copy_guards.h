// Guards shared by the data-movement ops.
#pragma once

#include <initializer_list>
#include <vector>

#include "common/guards.h"
#include "dfuse/ops/data_movement.h"

namespace dfuse::detail {

// A source view: bf16/f16/f32 with `ref`'s dtype and device, rank `rank`, data present,
// non-negative strides, last dim contiguous.
void check_copy_input(GuardList& g, const char* name, const TensorView& t, int rank, const TensorView& ref,
                      const char* ref_name);

// check_copy_input, and contiguous (the varlen gathers address whole rows).
void check_contiguous_input(GuardList& g, const char* name, const TensorView& t, int rank, const TensorView& ref,
                            const char* ref_name);

// An index list: int32 or int64, rank 1 of `length` (any length when negative), contiguous, on
// `ref`'s device. Index values are not checked here.
void check_indices(GuardList& g, const char* name, const TensorView& t, int64_t length, const TensorView& ref,
                   const char* ref_name);

struct NamedView {
  const char* name;
  const TensorView* view;
};

// An output: `ref`'s dtype and device, shape `sizes`, contiguous, overlapping none of `others`.
void check_copy_output(GuardList& g, const char* name, const TensorView& out,
                       const std::vector<int64_t>& sizes, const TensorView& ref, const char* ref_name,
                       std::initializer_list<NamedView> others);

// The outputs q, k and v (named "out.q", ...): each check_copy_output against `others`, and no
// two overlapping.
void check_qkv_outputs(GuardList& g, const QkvViews& out, const std::vector<int64_t>& sizes, const TensorView& ref,
                       const char* ref_name, std::initializer_list<NamedView> others);

}  // namespace dfuse::detail
