#include "ops/data_movement/copy_guards.h"

#include <string>

namespace dfuse::detail {

void check_copy_input(GuardList& g, const char* name, const TensorView& t, int rank, const TensorView& ref,
                      const char* ref_name) {
  g.dtype_in(name, t, {DType::bf16, DType::f16, DType::f32});
  g.same_dtype(name, t, ref, ref_name);
  g.same_device(name, t, ref, ref_name);
  g.rank_between(name, t, rank, rank);
  g.not_null(name, t);
  g.non_negative_strides(name, t);
  g.last_dim_contiguous(name, t);
}

void check_contiguous_input(GuardList& g, const char* name, const TensorView& t, int rank, const TensorView& ref,
                            const char* ref_name) {
  check_copy_input(g, name, t, rank, ref, ref_name);
  if (g.ok() && t.numel() > 0 && !t.is_contiguous())
    g.fail("layout", std::string(name) + " must be contiguous, got strides " + strides_str(t));
}

void check_indices(GuardList& g, const char* name, const TensorView& t, int64_t length, const TensorView& ref,
                   const char* ref_name) {
  g.dtype_in(name, t, {DType::i32, DType::i64});
  g.same_device(name, t, ref, ref_name);
  g.rank_between(name, t, 1, 1);
  g.not_null(name, t);
  if (!g.ok()) return;
  if (length >= 0 && t.size(0) != length)
    g.fail("shape", std::string(name) + " must have " + std::to_string(length) + " entries, got " +
                        shape_str(t));
  if (!t.is_contiguous())
    g.fail("layout", std::string(name) + " must be contiguous, got strides " + strides_str(t));
}

void check_copy_output(GuardList& g, const char* name, const TensorView& out,
                       const std::vector<int64_t>& sizes, const TensorView& ref, const char* ref_name,
                       std::initializer_list<NamedView> others) {
  g.same_dtype(name, out, ref, ref_name);
  g.same_device(name, out, ref, ref_name);
  g.not_null(name, out);
  bool shape_ok = out.dim() == int(sizes.size());
  for (int d = 0; shape_ok && d < out.dim(); ++d) shape_ok = out.size(d) == sizes[d];
  if (!shape_ok) {
    std::string want = "[";
    for (size_t d = 0; d < sizes.size(); ++d) want += (d ? ", " : "") + std::to_string(sizes[d]);
    g.fail("shape", std::string(name) + " must have shape " + want + "], got " + shape_str(out));
    return;
  }
  if (!out.is_contiguous())
    g.fail("out_layout", std::string(name) + " must be contiguous, got strides " + strides_str(out));
  for (const NamedView& other : others) g.no_partial_overlap(name, out, other.name, *other.view, false);
}

void check_qkv_outputs(GuardList& g, const QkvViews& out, const std::vector<int64_t>& sizes, const TensorView& ref,
                       const char* ref_name, std::initializer_list<NamedView> others) {
  check_copy_output(g, "out.q", out.q, sizes, ref, ref_name, others);
  check_copy_output(g, "out.k", out.k, sizes, ref, ref_name, others);
  check_copy_output(g, "out.v", out.v, sizes, ref, ref_name, others);
  g.no_partial_overlap("out.k", out.k, "out.q", out.q, false);
  g.no_partial_overlap("out.v", out.v, "out.q", out.q, false);
  g.no_partial_overlap("out.v", out.v, "out.k", out.k, false);
}

}  // namespace dfuse::detail
