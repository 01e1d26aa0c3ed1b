#include "common/ltx_rope_cases.h"

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/core/runtime.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {

namespace {

// q (slot 0) or k (slot 1) [B, S, C]: its own tensor, or slot `slot` of a packed [B, S, 3C] projection.
TestTensor make_tokens(Device d, DType t, const Ltx2SplitRopeCase& c, int64_t seq, int64_t width, int slot,
                       uint64_t seed) {
  const int64_t token_stride = c.packed ? 3 * width : width;
  const int64_t storage = c.batch * seq * token_stride + c.offset;
  const int64_t base = c.offset + (c.packed ? slot * width : 0);
  return random_tensor(d, t, {c.batch, seq, width}, {seq * token_stride, token_stride, 1}, base,
                       {seed + uint64_t(slot), 1.0, c.specials}, storage);
}

// A cos or sin table [B, H, S, r] fp32 with values in (-1, 1): diffusers' swapaxes(1, 2) view of a
// contiguous [B, S, H, r], or contiguous.
TestTensor make_table(Device d, const Ltx2SplitRopeCase& c, int64_t seq, int64_t heads, uint64_t seed) {
  const int64_t B = c.batch, H = heads, S = seq, r = c.head_dim / 2;
  if (c.contiguous_tables) return random_tensor(d, DType::f32, {B, H, S, r}, {}, 0, {seed, 0.5, false});
  return random_tensor(d, DType::f32, {B, H, S, r}, {S * H * r, r, H * r, 1}, 0, {seed, 0.5, false}, B * S * H * r);
}

}  // namespace

std::vector<Ltx2SplitRopeCase> small_ltx2_split_rope_cases() {
  return {
      {.name = "ltx2_like", .batch = 1, .seq = 9, .heads = 4, .head_dim = 128},
      {.name = "one_token_one_head", .batch = 1, .seq = 1, .heads = 1, .head_dim = 64},
      {.name = "batch2", .batch = 2, .seq = 7, .heads = 3, .head_dim = 64},
      {.name = "no_weight", .batch = 2, .seq = 5, .heads = 2, .head_dim = 64, .weight = false},
      {.name = "cross_attention", .batch = 2, .seq = 6, .heads = 3, .head_dim = 64, .k_seq = 11},
      {.name = "cross_attention_kv_heads", .batch = 1, .seq = 5, .heads = 4, .head_dim = 32, .k_seq = 3,
       .k_heads = 2},
      {.name = "small_head", .batch = 1, .seq = 11, .heads = 5, .head_dim = 6},
      {.name = "odd_half", .batch = 1, .seq = 7, .heads = 3, .head_dim = 10},
      {.name = "generic_rms_path", .batch = 1, .seq = 6, .heads = 3, .head_dim = 2},  // C = 6: C % 4 != 0
      {.name = "packed", .batch = 2, .seq = 5, .heads = 3, .head_dim = 64, .packed = true},
      {.name = "contiguous_tables", .batch = 2, .seq = 5, .heads = 2, .head_dim = 64, .contiguous_tables = true},
      {.name = "misaligned", .batch = 1, .seq = 5, .heads = 3, .head_dim = 64, .offset = 2},
      {.name = "misaligned_odd", .batch = 1, .seq = 5, .heads = 3, .head_dim = 64, .offset = 1},
      {.name = "specials", .batch = 2, .seq = 17, .heads = 3, .head_dim = 128, .specials = true},
      {.name = "in_place", .batch = 1, .seq = 9, .heads = 3, .head_dim = 128, .in_place = true},
      {.name = "in_place_packed", .batch = 1, .seq = 5, .heads = 2, .head_dim = 64, .packed = true,
       .in_place = true},
  };
}

std::vector<Ltx2SplitRopeCase> model_ltx2_split_rope_cases() {
  return {
      {.name = "ltx2_video_self", .batch = 1, .seq = 6144, .heads = 32, .head_dim = 128},
      {.name = "ltx2_video_self_b2", .batch = 2, .seq = 4096, .heads = 32, .head_dim = 128},
      {.name = "ltx2_audio_to_video", .batch = 1, .seq = 6144, .heads = 32, .head_dim = 64, .k_seq = 126},
      {.name = "ltx2_packed", .batch = 1, .seq = 6144, .heads = 32, .head_dim = 128, .packed = true},
      {.name = "ltx2_in_place", .batch = 1, .seq = 6144, .heads = 32, .head_dim = 128, .in_place = true},
      {.name = "heads_1_tokens_4097", .batch = 1, .seq = 4097, .heads = 1, .head_dim = 128},
      {.name = "heads_3_tokens_7", .batch = 3, .seq = 7, .heads = 3, .head_dim = 128},
      {.name = "heads_30_tokens_4097", .batch = 1, .seq = 4097, .heads = 30, .head_dim = 128},
      {.name = "tokens_1", .batch = 1, .seq = 1, .heads = 32, .head_dim = 128},
      {.name = "misaligned", .batch = 1, .seq = 4097, .heads = 30, .head_dim = 128, .offset = 1},
      {.name = "specials", .batch = 1, .seq = 4097, .heads = 32, .head_dim = 128, .specials = true},
  };
}

std::string run_ltx2_split_rope_case(Device d, DType t, const Ltx2SplitRopeCase& c, uint64_t seed) {
  const bool cross = c.k_seq > 0;
  const int64_t k_seq = cross ? c.k_seq : c.seq, k_heads = cross && c.k_heads ? c.k_heads : c.heads;
  const int64_t qc = c.heads * c.head_dim, kc = k_heads * c.head_dim;
  auto q = make_tokens(d, t, c, c.seq, qc, 0, seed);
  auto k = c.packed ? TestTensor{} : make_tokens(d, t, c, k_seq, kc, 1, seed);
  TensorView kv = k.view;
  if (c.packed) {
    // k is slot 1 of the same [B, S, 3C] storage (self-attention: k has q's shape).
    kv = TensorView(static_cast<char*>(q.view.data()) + qc * int64_t(dtype_size(t)), t, q.view.sizes(),
                    q.view.strides(), 3, d);
  }
  auto qw = random_tensor(d, t, {qc}, {}, 0, {seed + 5, 0.75, false});
  auto kw = random_tensor(d, t, {kc}, {}, 0, {seed + 6, 0.75, false});
  const TensorView* qwp = c.weight ? &qw.view : nullptr;
  const TensorView* kwp = c.weight ? &kw.view : nullptr;
  auto q_cos = make_table(d, c, c.seq, c.heads, seed + 2), q_sin = make_table(d, c, c.seq, c.heads, seed + 3);
  auto k_cos = cross ? make_table(d, c, k_seq, k_heads, seed + 7) : TestTensor{};
  auto k_sin = cross ? make_table(d, c, k_seq, k_heads, seed + 8) : TestTensor{};
  const TensorView& kcos = cross ? k_cos.view : q_cos.view;
  const TensorView& ksin = cross ? k_sin.view : q_sin.view;
  const double eps = 1e-6;
  auto eq = poisoned_tensor(d, t, {c.batch, c.seq, qc}, kOutputPoison);
  auto ek = poisoned_tensor(d, t, {c.batch, k_seq, kc}, kOutputPoison);
  eager::Workspace ws(d);
  eager::ltx2_qknorm_split_rope_chain(q.view, qwp, eps, q_cos.view, q_sin.view, eq.view, ws);
  eager::ltx2_qknorm_split_rope_chain(kv, kwp, eps, kcos, ksin, ek.view, ws);
  TestTensor fq, fk;
  if (!c.in_place) {
    fq = poisoned_tensor(d, t, {c.batch, c.seq, qc}, kOutputPoison);
    fk = poisoned_tensor(d, t, {c.batch, k_seq, kc}, kOutputPoison);
  }
  const TensorView& q_out = c.in_place ? q.view : fq.view;
  const TensorView& k_out = c.in_place ? kv : fk.view;
  std::string why;
  if (!can_use_ltx2_qknorm_split_rope(q.view, kv, qwp, kwp, eps, q_cos.view, q_sin.view, kcos, ksin, q_out, k_out,
                                      &why))
    return "rejected: " + why;
  ltx2_qknorm_split_rope(q.view, kv, qwp, kwp, eps, q_cos.view, q_sin.view, kcos, ksin, q_out, k_out);
  runtime(d).synchronize({});
  return compare_qk_outputs(d, eq.view, ek.view, q_out, k_out, c.in_place);
}

std::vector<Ltx25DecoderRopeCase> small_ltx25_decoder_rope_cases() {
  return {
      {.name = "decoder_like", .batch = 1, .frames = 3, .height = 4, .width = 5, .heads = 2, .head_dim = 64},
      {.name = "one_token", .batch = 1, .frames = 1, .height = 1, .width = 1, .heads = 1, .head_dim = 64},
      {.name = "batch2_head128", .batch = 2, .frames = 2, .height = 3, .width = 2, .heads = 3, .head_dim = 128},
      {.name = "head_dim_40", .batch = 1, .frames = 2, .height = 3, .width = 3, .heads = 2, .head_dim = 40},
      {.name = "head_dim_8", .batch = 1, .frames = 3, .height = 2, .width = 4, .heads = 3, .head_dim = 8},
      {.name = "packed", .batch = 1, .frames = 2, .height = 3, .width = 4, .heads = 2, .head_dim = 64,
       .packed = true},
      {.name = "strided_tables", .batch = 1, .frames = 3, .height = 2, .width = 3, .heads = 2, .head_dim = 64,
       .strided_tables = true},
      {.name = "misaligned", .batch = 1, .frames = 2, .height = 2, .width = 3, .heads = 2, .head_dim = 64,
       .offset = 1},
      {.name = "specials", .batch = 1, .frames = 3, .height = 4, .width = 5, .heads = 2, .head_dim = 64,
       .specials = true},
      {.name = "in_place", .batch = 1, .frames = 2, .height = 3, .width = 4, .heads = 2, .head_dim = 64,
       .in_place = true},
      {.name = "in_place_packed", .batch = 1, .frames = 2, .height = 2, .width = 3, .heads = 2, .head_dim = 64,
       .packed = true, .in_place = true},
  };
}

std::vector<Ltx25DecoderRopeCase> model_ltx25_decoder_rope_cases() {
  return {
      {.name = "decoder_stage_16x32x48", .batch = 1, .frames = 16, .height = 32, .width = 48, .heads = 8,
       .head_dim = 64},
      {.name = "decoder_stage_8x64x96_head128", .batch = 1, .frames = 8, .height = 64, .width = 96, .heads = 4,
       .head_dim = 128},
      {.name = "decoder_packed", .batch = 1, .frames = 16, .height = 32, .width = 48, .heads = 8, .head_dim = 64,
       .packed = true},
      {.name = "decoder_in_place", .batch = 1, .frames = 16, .height = 32, .width = 48, .heads = 8, .head_dim = 64,
       .in_place = true},
      {.name = "heads_1_tokens_4097", .batch = 1, .frames = 17, .height = 1, .width = 241, .heads = 1,
       .head_dim = 64},
      {.name = "heads_3_tokens_7", .batch = 1, .frames = 7, .height = 1, .width = 1, .heads = 3, .head_dim = 64},
      {.name = "heads_30_tokens_4097", .batch = 1, .frames = 17, .height = 241, .width = 1, .heads = 30,
       .head_dim = 64},
      {.name = "misaligned", .batch = 2, .frames = 5, .height = 7, .width = 9, .heads = 3, .head_dim = 64,
       .offset = 1},
      {.name = "specials", .batch = 1, .frames = 8, .height = 16, .width = 24, .heads = 8, .head_dim = 64,
       .specials = true},
  };
}

std::string run_ltx25_decoder_rope_case(Device d, DType t, const Ltx25DecoderRopeCase& c, uint64_t seed) {
  const int64_t B = c.batch, T = c.frames, H = c.height, W = c.width, N = c.heads, D = c.head_dim;
  const int64_t token = c.packed ? 3 * N * D : N * D;
  const std::vector<int64_t> sizes = {B, T, H, W, N, D};
  const std::vector<int64_t> strides = {T * H * W * token, H * W * token, W * token, token, D, 1};
  const int64_t storage = B * T * H * W * token + c.offset;
  auto q = random_tensor(d, t, sizes, strides, c.offset, {seed, 1.0, c.specials}, storage);
  TestTensor k_own;
  TensorView k;
  if (c.packed) {
    k = TensorView(static_cast<char*>(q.view.data()) + N * D * int64_t(dtype_size(t)), t, q.view.sizes(),
                   q.view.strides(), 6, d);
  } else {
    k_own = random_tensor(d, t, sizes, strides, c.offset, {seed + 1, 1.0, c.specials}, storage);
    k = k_own.view;
  }
  const auto split = ltx25_decoder_rope_dim_split(D);
  const int64_t positions[3] = {T, H, W};
  TestTensor tables[6];  // cos_t, sin_t, cos_h, sin_h, cos_w, sin_w
  for (int a = 0; a < 3; ++a)
    for (int j = 0; j < 2; ++j) {
      const int64_t pairs = split[a] / 2, row = c.strided_tables ? pairs + 3 : pairs;
      tables[2 * a + j] = random_tensor(d, DType::f32, {positions[a], pairs}, {row, 1}, 0,
                                        {seed + 2 + uint64_t(2 * a + j), 0.5, false}, positions[a] * row);
    }
  const auto& tv = [&](int i) -> const TensorView& { return tables[i].view; };
  auto eq = poisoned_tensor(d, t, sizes, kOutputPoison), ek = poisoned_tensor(d, t, sizes, kOutputPoison);
  eager::Workspace ws(d);
  eager::ltx25_decoder_rope_chain(q.view, tv(0), tv(1), tv(2), tv(3), tv(4), tv(5), eq.view, ws);
  eager::ltx25_decoder_rope_chain(k, tv(0), tv(1), tv(2), tv(3), tv(4), tv(5), ek.view, ws);
  TestTensor fq, fk;
  if (!c.in_place) {
    fq = poisoned_tensor(d, t, sizes, kOutputPoison);
    fk = poisoned_tensor(d, t, sizes, kOutputPoison);
  }
  const TensorView& q_out = c.in_place ? q.view : fq.view;
  const TensorView& k_out = c.in_place ? k : fk.view;
  std::string why;
  if (!can_use_ltx25_decoder_rope(q.view, k, tv(0), tv(1), tv(2), tv(3), tv(4), tv(5), q_out, k_out, &why))
    return "rejected: " + why;
  ltx25_decoder_rope(q.view, k, tv(0), tv(1), tv(2), tv(3), tv(4), tv(5), q_out, k_out);
  runtime(d).synchronize({});
  return compare_qk_outputs(d, eq.view, ek.view, q_out, k_out, c.in_place);
}

}  // namespace dfuse::test
