// Guards shared by the rope family.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <tuple>

#include "common/guards.h"
#include "dfuse/ops/rope.h"

namespace dfuse::detail {

// The rope kernels number (head, vector) work items with 32 bits: fewer than 2^31 elements.
inline void check_rope_extent(GuardList& g, const char* name, const TensorView& x) {
  if (x.numel() >= (int64_t(1) << 31))
    g.fail("extent", std::string(name) + " " + shape_str(x) + " has 2^31 or more elements");
}

// Paired q and k of a RoPE op that takes both: q bf16/f16/f32 of rank `rank` (`layout` names its
// dims in the message), k of q's dtype, device and shape; both last-dim contiguous, non-negative
// strides, fewer than 2^31 elements.
inline void check_paired_qk(GuardList& g, const TensorView& q, const TensorView& k, int rank, const char* layout) {
  g.dtype_in("q", q, {DType::bf16, DType::f16, DType::f32});
  g.not_null("q", q);
  if (g.ok() && q.dim() != rank)
    g.fail("rank", std::string("q must be ") + layout + " (rank " + std::to_string(rank) + "), got " + shape_str(q));
  if (!g.ok()) return;
  g.same_dtype("k", k, q, "q");
  g.same_device("k", k, q, "q");
  g.not_null("k", k);
  g.same_shape("k", k, q, "q");
  for (const auto& [name, t] : {std::pair{"q", &q}, std::pair{"k", &k}}) {
    g.last_dim_contiguous(name, *t);
    g.non_negative_strides(name, *t);
    if (g.ok()) check_rope_extent(g, name, *t);
  }
}

// A table a paired op reads (cos, sin, freqs), for the outputs' overlap checks.
struct RopeTableView {
  const char* name;
  const TensorView* view;
};

// q_out and k_out of a paired op: q's dtype, device and shape, last dim contiguous, non-negative
// strides, no element written twice; each may be exactly its own input (in place) and overlaps
// nothing else: the other input, the other output, the tables.
inline void check_paired_qk_outputs(GuardList& g, const TensorView& q, const TensorView& k, const TensorView& q_out,
                                    const TensorView& k_out, std::initializer_list<RopeTableView> tables) {
  for (const auto& [name, out, in] : {std::tuple{"q_out", &q_out, &q}, std::tuple{"k_out", &k_out, &k}}) {
    g.same_dtype(name, *out, q, "q");
    g.same_device(name, *out, q, "q");
    g.not_null(name, *out);
    g.same_shape(name, *out, q, "q");
    g.last_dim_contiguous(name, *out);
    g.non_negative_strides(name, *out);
    if (!g.ok()) return;
    g.non_overlapping(name, *out);
    g.no_partial_overlap(name, *out, "q", q, in == &q);
    g.no_partial_overlap(name, *out, "k", k, in == &k);
    for (const RopeTableView& table : tables) g.no_partial_overlap(name, *out, table.name, *table.view, false);
  }
  g.no_partial_overlap("k_out", k_out, "q_out", q_out, false);
}

// Rotate-half tables against heads x [..., D] (checked before): cos/sin of one shape [..., R] with
// R = cos.size(-1) even, 0 < R <= D, broadcastable to x[..., :R], last dim contiguous; dtype fp32
// or x's for fp32_opmath, x's for storage_dtype (that math rounds every op to x's dtype).
inline void check_rotate_half_tables(GuardList& g, const char* x_name, const TensorView& x, const TensorView& cos,
                                     const TensorView& sin, RopeMath math) {
  if (math == RopeMath::fp32_opmath)
    g.dtype_in("cos", cos, {DType::f32, x.dtype()});
  else
    g.same_dtype("cos", cos, x, x_name);
  g.same_dtype("sin", sin, cos, "cos");
  g.same_device("cos", cos, x, x_name);
  g.same_device("sin", sin, x, x_name);
  g.not_null("cos", cos);
  g.not_null("sin", sin);
  g.rank_between("cos", cos, 1, 4);
  g.same_shape("sin", sin, cos, "cos");
  if (!g.ok()) return;
  const int64_t rot = cos.size(-1), head = x.size(-1);
  if (rot <= 0 || rot % 2 != 0 || rot > head)
    g.fail("rot_dim", "the rotary dim R = cos.size(-1) must be even with 0 < R <= D = " + std::to_string(head) +
                          ", got " + std::to_string(rot));
  if (!g.ok()) return;
  const TensorView x_rot = x.narrow(-1, 0, rot);
  const std::string rot_name = std::string(x_name) + "[..., :R]";
  g.broadcastable_rows("cos", cos, x_rot, rot_name.c_str());
  g.broadcastable_rows("sin", sin, x_rot, rot_name.c_str());
  g.non_negative_strides("cos", cos);
  g.non_negative_strides("sin", sin);
}

}  // namespace dfuse::detail
