#include "common/helios_rope_cases.h"

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/core/runtime.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {

std::vector<HeliosRopeCase> small_helios_rope_cases() {
  return {
      {.name = "helios_like", .batch = 1, .seq = 9, .heads = 4, .head_dim = 128},
      {.name = "one_token_one_head", .batch = 1, .seq = 1, .heads = 1, .head_dim = 64},
      {.name = "batch2", .batch = 2, .seq = 7, .heads = 3, .head_dim = 64},
      {.name = "batch_one_table", .batch = 2, .seq = 5, .heads = 2, .head_dim = 64, .batch_one_table = true},
      {.name = "transposed_table", .batch = 2, .seq = 6, .heads = 3, .head_dim = 64, .transposed_table = true},
      {.name = "small_head", .batch = 1, .seq = 11, .heads = 5, .head_dim = 6},
      {.name = "packed", .batch = 2, .seq = 5, .heads = 3, .head_dim = 64, .packed = true},
      {.name = "misaligned", .batch = 1, .seq = 5, .heads = 3, .head_dim = 64, .offset = 1},
      {.name = "specials", .batch = 2, .seq = 17, .heads = 3, .head_dim = 128, .specials = true},
      {.name = "in_place", .batch = 1, .seq = 9, .heads = 3, .head_dim = 128, .in_place = true},
      {.name = "in_place_packed", .batch = 1, .seq = 5, .heads = 2, .head_dim = 64, .packed = true,
       .in_place = true},
  };
}

std::vector<HeliosRopeCase> model_helios_rope_cases() {
  return {
      {.name = "helios_in_place", .batch = 1, .seq = 8190, .heads = 40, .head_dim = 128, .in_place = true},
      {.name = "helios_packed_in_place", .batch = 1, .seq = 8190, .heads = 40, .head_dim = 128, .packed = true,
       .in_place = true},
      {.name = "helios_transposed_table", .batch = 1, .seq = 8190, .heads = 40, .head_dim = 128,
       .transposed_table = true},
      {.name = "heads_1_tokens_4097", .batch = 1, .seq = 4097, .heads = 1, .head_dim = 128},
      {.name = "heads_3_tokens_7", .batch = 3, .seq = 7, .heads = 3, .head_dim = 128},
      {.name = "heads_30_tokens_4097", .batch = 1, .seq = 4097, .heads = 30, .head_dim = 128},
      {.name = "tokens_1", .batch = 1, .seq = 1, .heads = 40, .head_dim = 128},
      {.name = "misaligned", .batch = 1, .seq = 4097, .heads = 30, .head_dim = 128, .offset = 1},
      {.name = "specials", .batch = 1, .seq = 4097, .heads = 40, .head_dim = 128, .specials = true},
  };
}

std::string run_helios_rope_case(Device d, DType t, const HeliosRopeCase& c, uint64_t seed) {
  const int64_t B = c.batch, S = c.seq, H = c.heads, D = c.head_dim;
  const int64_t token = c.packed ? 3 * H * D : H * D;
  const std::vector<int64_t> sizes = {B, S, H, D}, strides = {S * token, token, D, 1};
  const int64_t storage = B * S * token + c.offset;
  auto q = random_tensor(d, t, sizes, strides, c.offset, {seed, 1.0, c.specials}, storage);
  TestTensor k_own;
  TensorView k;
  if (c.packed) {
    k = TensorView(static_cast<char*>(q.view.data()) + H * D * int64_t(dtype_size(t)), t, q.view.sizes(),
                   q.view.strides(), 4, d);
  } else {
    k_own = random_tensor(d, t, sizes, strides, c.offset, {seed + 1, 1.0, c.specials}, storage);
    k = k_own.view;
  }
  const int64_t tb = c.batch_one_table ? 1 : B;
  auto freqs = c.transposed_table
                   ? random_tensor(d, DType::f32, {tb, S, 2 * D}, {2 * D * S, 1, S}, 0, {seed + 2, 0.5, false},
                                   tb * 2 * D * S)
                   : random_tensor(d, DType::f32, {tb, S, 2 * D}, {}, 0, {seed + 2, 0.5, false});
  auto eq = poisoned_tensor(d, t, sizes, kOutputPoison), ek = poisoned_tensor(d, t, sizes, kOutputPoison);
  eager::Workspace ws(d);
  eager::helios_rope_chain(q.view, freqs.view, eq.view, ws);
  eager::helios_rope_chain(k, freqs.view, ek.view, ws);
  TestTensor fq, fk;
  if (!c.in_place) {
    fq = poisoned_tensor(d, t, sizes, kOutputPoison);
    fk = poisoned_tensor(d, t, sizes, kOutputPoison);
  }
  const TensorView& q_out = c.in_place ? q.view : fq.view;
  const TensorView& k_out = c.in_place ? k : fk.view;
  std::string why;
  if (!can_use_helios_qk_rope(q.view, k, freqs.view, q_out, k_out, &why)) return "rejected: " + why;
  helios_qk_rope(q.view, k, freqs.view, q_out, k_out);
  runtime(d).synchronize({});
  return compare_qk_outputs(d, eq.view, ek.view, q_out, k_out, c.in_place);
}

}  // namespace dfuse::test
