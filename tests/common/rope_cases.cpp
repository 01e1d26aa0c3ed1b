#include "common/rope_cases.h"

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {

namespace {

// x (and, for `slot` 1, the paired k) as the case lays it out: its own tensor, or slot `slot`
// of a packed [B, S, 3, H, D] projection; [B, H, S, D] order when heads_first.
TestTensor make_heads(Device d, DType t, const RopeCase& c, int slot, uint64_t seed) {
  const int64_t B = c.batch, S = c.seq, H = c.heads, D = c.head_dim;
  const int64_t token_stride = c.packed ? 3 * H * D : H * D;
  const int64_t storage = B * S * token_stride + c.offset;
  const int64_t base = c.offset + (c.packed ? slot * H * D : 0);
  std::vector<int64_t> sizes = {B, S, H, D}, strides = {S * token_stride, token_stride, D, 1};
  if (c.heads_first) {
    sizes = {B, H, S, D};
    strides = {S * token_stride, D, token_stride, 1};
  }
  // One storage per tensor; a packed case draws q and k from the same seed but their own slots.
  return random_tensor(d, t, sizes, strides, base, {seed + uint64_t(c.packed ? 0 : slot), 1.0, c.specials},
                       storage);
}

// A cos or sin table of width `width` that broadcasts against the case's x.
TestTensor make_table(Device d, DType t, const RopeCase& c, int64_t width, uint64_t seed) {
  std::vector<int64_t> sizes;
  if (c.heads_first)
    sizes = c.batched_table ? std::vector<int64_t>{c.batch, 1, c.seq, width} : std::vector<int64_t>{c.seq, width};
  else
    sizes = c.batched_table ? std::vector<int64_t>{c.batch, c.seq, 1, width} : std::vector<int64_t>{c.seq, 1, width};
  return random_tensor(d, t, sizes, {}, 0, {seed, 0.5, false});  // values in (-1, 1)
}

std::vector<int64_t> heads_shape(const RopeCase& c) {
  return c.heads_first ? std::vector<int64_t>{c.batch, c.heads, c.seq, c.head_dim}
                       : std::vector<int64_t>{c.batch, c.seq, c.heads, c.head_dim};
}

}  // namespace

std::vector<RopeCase> small_rope_cases() {
  return {
      {.name = "flux_like", .batch = 1, .seq = 9, .heads = 3, .head_dim = 128},
      {.name = "one_token_one_head", .batch = 1, .seq = 1, .heads = 1, .head_dim = 64},
      {.name = "batch2", .batch = 2, .seq = 7, .heads = 2, .head_dim = 64},
      {.name = "partial_rotary", .batch = 2, .seq = 5, .heads = 3, .head_dim = 128, .rot_dim = 64},
      {.name = "partial_rotary_odd", .batch = 1, .seq = 7, .heads = 3, .head_dim = 80, .rot_dim = 34},
      {.name = "small_head", .batch = 1, .seq = 11, .heads = 5, .head_dim = 6},
      {.name = "heads_first", .batch = 2, .seq = 9, .heads = 3, .head_dim = 64, .heads_first = true},
      {.name = "packed", .batch = 2, .seq = 5, .heads = 3, .head_dim = 64, .packed = true},
      {.name = "packed_heads_first", .batch = 1, .seq = 6, .heads = 3, .head_dim = 32, .heads_first = true,
       .packed = true},
      {.name = "batched_table", .batch = 2, .seq = 5, .heads = 2, .head_dim = 64, .batched_table = true},
      {.name = "table_in_x_dtype", .batch = 1, .seq = 7, .heads = 3, .head_dim = 64, .table_in_x_dtype = true},
      {.name = "misaligned", .batch = 1, .seq = 5, .heads = 3, .head_dim = 64, .offset = 2},
      {.name = "specials", .batch = 2, .seq = 17, .heads = 3, .head_dim = 128, .rot_dim = 96, .specials = true},
      {.name = "in_place", .batch = 1, .seq = 9, .heads = 3, .head_dim = 128, .rot_dim = 64, .in_place = true},
      {.name = "in_place_packed", .batch = 1, .seq = 5, .heads = 2, .head_dim = 64, .packed = true,
       .in_place = true},
  };
}

std::vector<RopeCase> model_rope_cases() {
  return {
      {.name = "flux1_joint", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128},
      {.name = "flux1_joint_packed", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .packed = true},
      {.name = "qwen_image_heads_first", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128,
       .heads_first = true},
      {.name = "hunyuan_video", .batch = 1, .seq = 8190, .heads = 24, .head_dim = 128},
      {.name = "ltx2", .batch = 1, .seq = 6144, .heads = 32, .head_dim = 128},
      {.name = "sana_video", .batch = 2, .seq = 8190, .heads = 20, .head_dim = 112},
      {.name = "partial_rotary", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .rot_dim = 64},
      {.name = "heads_1_tokens_4097", .batch = 1, .seq = 4097, .heads = 1, .head_dim = 128},
      {.name = "heads_3_tokens_7", .batch = 3, .seq = 7, .heads = 3, .head_dim = 128},
      {.name = "heads_30_tokens_4097", .batch = 1, .seq = 4097, .heads = 30, .head_dim = 128},
      {.name = "misaligned", .batch = 1, .seq = 4097, .heads = 24, .head_dim = 128, .offset = 1},
      {.name = "specials", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .specials = true},
      {.name = "in_place_packed", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .packed = true,
       .in_place = true},
      // enough tokens that rope_rotate_half walks the heads in groups of 8
      {.name = "in_place_head_groups", .batch = 1, .seq = 24000, .heads = 24, .head_dim = 128, .in_place = true},
      {.name = "heads_first_head_groups", .batch = 1, .seq = 24000, .heads = 24, .head_dim = 128,
       .heads_first = true},
  };
}

std::string run_rope_rotate_half_case(Device d, DType t, RopeMath math, const RopeCase& c, uint64_t seed) {
  const int64_t rot = c.rot_dim ? c.rot_dim : c.head_dim;
  const DType table = (math == RopeMath::storage_dtype || c.table_in_x_dtype) ? t : DType::f32;
  auto x = make_heads(d, t, c, 0, seed);
  auto cos = make_table(d, table, c, rot, seed + 1);
  auto sin = make_table(d, table, c, rot, seed + 2);
  return compare_fused_with_eager(
      d, t, heads_shape(c), c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_rope_rotate_half(x.view, cos.view, sin.view, out, math, why);
      },
      [&](const TensorView& out) { rope_rotate_half(x.view, cos.view, sin.view, out, math); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::rope_rotate_half_chain(x.view, cos.view, sin.view, out, math, ws);
      });
}

std::vector<RopeCase> model_rope_interleaved_pairs_cases() {
  return {
      {.name = "flux1_heads_first", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .heads_first = true},
      {.name = "flux1_sequence_dim_1", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128},
      {.name = "flux1_packed", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .packed = true},
      {.name = "flux1_packed_heads_first", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128,
       .heads_first = true, .packed = true},
      {.name = "flux2_dev", .batch = 1, .seq = 4608, .heads = 48, .head_dim = 128, .heads_first = true},
      {.name = "hunyuan_video", .batch = 1, .seq = 8190, .heads = 24, .head_dim = 128, .heads_first = true},
      // LTX-Video rotates the flattened heads [B, S, H*D] with per-batch tables [B, S, H*D].
      {.name = "ltx_video_flat_heads", .batch = 2, .seq = 4096, .heads = 1, .head_dim = 2048,
       .batched_table = true},
      {.name = "heads_1_tokens_4097", .batch = 1, .seq = 4097, .heads = 1, .head_dim = 128, .heads_first = true},
      {.name = "heads_3_tokens_7", .batch = 3, .seq = 7, .heads = 3, .head_dim = 128},
      {.name = "heads_30_tokens_4097", .batch = 1, .seq = 4097, .heads = 30, .head_dim = 128},
      {.name = "table_in_x_dtype", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128,
       .table_in_x_dtype = true},
      {.name = "misaligned", .batch = 1, .seq = 4097, .heads = 24, .head_dim = 128, .offset = 1},
      {.name = "specials", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .heads_first = true,
       .specials = true},
      {.name = "in_place_packed", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .packed = true,
       .in_place = true},
  };
}

std::string run_rope_interleaved_pairs_case(Device d, DType t, const RopeCase& c, uint64_t seed) {
  if (c.head_dim % 2 != 0) return "";
  const DType table = c.table_in_x_dtype ? t : DType::f32;
  auto x = make_heads(d, t, c, 0, seed);
  auto cos = make_table(d, table, c, c.head_dim, seed + 1);
  auto sin = make_table(d, table, c, c.head_dim, seed + 2);
  return compare_fused_with_eager(
      d, t, heads_shape(c), c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_rope_interleaved_pairs(x.view, cos.view, sin.view, out, why);
      },
      [&](const TensorView& out) { rope_interleaved_pairs(x.view, cos.view, sin.view, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::rope_interleaved_pairs_chain(x.view, cos.view, sin.view, out, ws);
      });
}

std::string run_interleaved_rope_fp64_case(Device d, DType t, const RopeCase& c, uint64_t seed) {
  if (c.head_dim % 2 != 0) return "";
  auto q = make_heads(d, t, c, 0, seed);
  auto k = make_heads(d, t, c, 1, seed);
  auto cos = make_table(d, DType::f64, c, c.head_dim, seed + 2);
  auto sin = make_table(d, DType::f64, c, c.head_dim, seed + 3);
  const auto shape = heads_shape(c);
  auto eq = poisoned_tensor(d, t, shape, kOutputPoison), ek = poisoned_tensor(d, t, shape, kOutputPoison);
  eager::Workspace ws(d);
  eager::interleaved_rope_fp64_chain(q.view, cos.view, sin.view, eq.view, ws);
  eager::interleaved_rope_fp64_chain(k.view, cos.view, sin.view, ek.view, ws);
  TestTensor fq, fk;
  const TensorView q_out = c.in_place ? q.view : (fq = poisoned_tensor(d, t, shape, kOutputPoison)).view;
  const TensorView k_out = c.in_place ? k.view : (fk = poisoned_tensor(d, t, shape, kOutputPoison)).view;
  std::string why;
  if (!can_use_interleaved_rope_fp64(q.view, k.view, cos.view, sin.view, q_out, k_out, &why))
    return "rejected: " + why;
  interleaved_rope_fp64(q.view, k.view, cos.view, sin.view, q_out, k_out);
  runtime(d).synchronize({});
  return compare_qk_outputs(d, eq.view, ek.view, q_out, k_out, c.in_place);
}

std::vector<RopeCase> small_qknorm_rope_cases() {
  return {
      {.name = "flux_like", .batch = 1, .seq = 9, .heads = 3, .head_dim = 128},
      {.name = "partial_rotary", .batch = 2, .seq = 5, .heads = 3, .head_dim = 128, .rot_dim = 64},
      {.name = "head_dim_256", .batch = 1, .seq = 9, .heads = 2, .head_dim = 256},
      {.name = "head_dim_256_partial", .batch = 1, .seq = 6, .heads = 3, .head_dim = 256, .rot_dim = 160},
      {.name = "packed", .batch = 2, .seq = 5, .heads = 3, .head_dim = 128, .packed = true},
      {.name = "heads_first", .batch = 2, .seq = 9, .heads = 3, .head_dim = 128, .heads_first = true},
      {.name = "batched_table", .batch = 2, .seq = 5, .heads = 2, .head_dim = 128, .batched_table = true},
      {.name = "table_in_x_dtype", .batch = 1, .seq = 7, .heads = 3, .head_dim = 128, .table_in_x_dtype = true},
      {.name = "specials", .batch = 2, .seq = 17, .heads = 3, .head_dim = 128, .rot_dim = 96, .specials = true},
  };
}

std::vector<RopeCase> model_qknorm_rope_cases() {
  return {
      {.name = "flux1_joint", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128},
      {.name = "flux1_joint_packed", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .packed = true},
      {.name = "ltx2", .batch = 1, .seq = 6144, .heads = 32, .head_dim = 128},
      {.name = "partial_rotary", .batch = 1, .seq = 4097, .heads = 30, .head_dim = 128, .rot_dim = 64},
      {.name = "heads_1_tokens_4097", .batch = 1, .seq = 4097, .heads = 1, .head_dim = 256},
      {.name = "specials", .batch = 1, .seq = 4608, .heads = 24, .head_dim = 128, .specials = true},
  };
}

std::string run_qknorm_rope_case(Device d, DType t, RmsNormChain chain, RopeMath math, const RopeCase& c,
                                 uint64_t seed) {
  const int64_t rot = c.rot_dim ? c.rot_dim : c.head_dim;
  const DType table = (math == RopeMath::storage_dtype || c.table_in_x_dtype) ? t : DType::f32;
  auto q = make_heads(d, t, c, 0, seed);
  auto k = make_heads(d, t, c, 1, seed);
  auto qw = random_tensor(d, t, {c.head_dim}, {}, 0, {seed + 5, 0.75, false});
  auto kw = random_tensor(d, t, {c.head_dim}, {}, 0, {seed + 6, 0.75, false});
  auto cos = make_table(d, table, c, rot, seed + 2);
  auto sin = make_table(d, table, c, rot, seed + 3);
  const double eps = 1e-6;
  const auto shape = heads_shape(c);
  auto eq = poisoned_tensor(d, t, shape, kOutputPoison), ek = poisoned_tensor(d, t, shape, kOutputPoison);
  eager::Workspace ws(d);
  eager::qknorm_rope_chain(chain, q.view, &qw.view, eps, cos.view, sin.view, math, eq.view, ws);
  eager::qknorm_rope_chain(chain, k.view, &kw.view, eps, cos.view, sin.view, math, ek.view, ws);
  std::string why;
  if (!can_use_fused_inplace_qknorm_rope(chain, q.view, k.view, &qw.view, &kw.view, eps, cos.view, sin.view, math,
                                         &why))
    return "rejected: " + why;
  fused_inplace_qknorm_rope(chain, q.view, k.view, &qw.view, &kw.view, eps, cos.view, sin.view, math);
  runtime(d).synchronize({});
  if (!fully_written(eq.view, kOutputPoison) || !fully_written(ek.view, kOutputPoison))
    return "eager output has unwritten elements";
  const bool any_nan_f32 = !d.is_cuda();
  if (auto diff = compare_bits(q.view, eq.view, any_nan_f32); !diff.empty()) return "q: " + diff;
  if (auto diff = compare_bits(k.view, ek.view, any_nan_f32); !diff.empty()) return "k: " + diff;
  return "";
}

}  // namespace dfuse::test
