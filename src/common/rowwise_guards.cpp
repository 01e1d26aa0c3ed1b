#include "common/rowwise_guards.h"

#include <limits>

namespace dfuse::detail {

namespace {
constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();
}

void check_rowwise_input(GuardList& g, const char* name, const TensorView& x) {
  g.dtype_in(name, x, {DType::bf16, DType::f16, DType::f32});
  g.rank_between(name, x, 1, 4);
  g.not_null(name, x);
  g.last_dim_contiguous(name, x);
  g.non_negative_strides(name, x);
  if (g.ok() && x.numel() > 0) {
    const RowGeometry geom = row_geometry(x);
    // The CUDA kernel runs one block per (row, column block of at least 128 columns) in a 1-D
    // grid of fewer than 2^31 blocks; counting 64-column chunks keeps a margin.
    const bool too_many_items = geom.rows() * ((geom.cols + 63) / 64) >= (int64_t(1) << 31);
    if (geom.rows() > kMaxExtent || geom.cols > kMaxExtent || too_many_items)
      g.fail("extent", std::string(name) + " " + shape_str(x) +
                           " is too large (rows or columns >= 2^31, or about 2^37 elements)");
  }
}

void check_rowwise_operand(GuardList& g, const char* name, const TensorView& t, const TensorView& x,
                           const char* x_name) {
  g.same_dtype(name, t, x, x_name);
  g.same_device(name, t, x, x_name);
  g.not_null(name, t);
  g.broadcastable_rows(name, t, x, x_name);
  g.non_negative_strides(name, t);
}

void check_rowwise_output(GuardList& g, const TensorView& out, const TensorView& x,
                          std::initializer_list<NamedInput> inputs, const char* x_name) {
  g.same_dtype("out", out, x, x_name);
  g.same_device("out", out, x, x_name);
  g.same_shape("out", out, x, x_name);
  g.not_null("out", out);
  g.last_dim_contiguous("out", out);
  g.non_negative_strides("out", out);
  g.non_overlapping("out", out);
  for (const NamedInput& in : inputs) g.no_partial_overlap("out", out, in.name, *in.view, in.in_place_ok);
}

RowwiseParams rowwise_params(const TensorView& x, std::initializer_list<const TensorView*> inputs,
                             const TensorView& out) {
  RowwiseParams p;
  p.dtype = x.dtype();
  p.device = x.device().index;
  p.geom = row_geometry(x);
  if (inputs.size() > size_t(kRowwiseMaxInputs)) throw InvalidArgument("rowwise_params: more than 4 inputs");
  int k = 0;
  for (const TensorView* t : inputs) p.in[k++] = row_operand(*t, x);
  p.out = row_operand(out, x);
  return p;
}

}  // namespace dfuse::detail
