#include "common/flux2_rope_cases.h"

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {

namespace {

constexpr double kEps = 1e-6;  // FLUX.2's norm_q / norm_k eps

// One projection [B, S, width] (the packed to_qkv_mlp_proj / to_qkv output), and head views into it.
struct Projection {
  TestTensor storage;  // the whole [B, S, width] projection
  int64_t width = 0;
  // Slot `slot` (0 q, 1 k, 2 v) as [B, S, H, D].
  TensorView heads(const Flux2RopeCase& c, int64_t seq, int slot) const {
    const int64_t hd = c.heads * c.head_dim;
    int64_t sizes[] = {c.batch, seq, c.heads, c.head_dim}, strides[] = {seq * width, width, c.head_dim, 1};
    return storage.view.narrow(2, slot * hd, hd).restrided(sizes, strides, 4);
  }
};

Projection make_projection(Device d, DType t, const Flux2RopeCase& c, int64_t seq, int64_t width, uint64_t seed) {
  Projection p;
  p.width = width;
  p.storage = random_tensor(d, t, {c.batch, seq, width}, {}, c.offset, {seed, c.amplitude, c.specials});
  return p;
}

// q, k, v of `seq` tokens: views of one packed projection, or their own [B, S, H, D] tensors.
struct Heads {
  Projection packed;
  TestTensor own[3];
  TensorView view[3];
};

Heads make_heads(Device d, DType t, const Flux2RopeCase& c, int64_t seq, int64_t extra_columns, uint64_t seed) {
  Heads h;
  const int64_t hd = c.heads * c.head_dim;
  if (c.packed) {
    h.packed = make_projection(d, t, c, seq, 3 * hd + extra_columns, seed);
    for (int s = 0; s < 3; ++s) h.view[s] = h.packed.heads(c, seq, s);
  } else {
    for (int s = 0; s < 3; ++s) {
      h.own[s] = random_tensor(d, t, {c.batch, seq, c.heads, c.head_dim}, {}, c.offset,
                               {seed + uint64_t(s), c.amplitude, c.specials});
      h.view[s] = h.own[s].view;
    }
  }
  return h;
}

// Everything the op reads, as bytes, to check that it is left intact.
std::vector<uint8_t> snapshot(const Heads& h) {
  if (h.packed.width > 0) return gather_bytes(h.packed.storage.view);
  std::vector<uint8_t> all;
  for (const TensorView& v : h.view) {
    auto b = gather_bytes(v);
    all.insert(all.end(), b.begin(), b.end());
  }
  return all;
}

TestTensor make_weight(Device d, DType t, const Flux2RopeCase& c, uint64_t seed) {
  return random_tensor(d, t, {c.head_dim}, {}, 0, {seed, 0.75, false});
}

// cos/sin [S, 1, D] (diffusers' cos[None, :, None, :] against [B, S, H, D]) with values in (-1, 1).
TestTensor make_table(Device d, DType t, const Flux2RopeCase& c, int64_t seq, uint64_t seed) {
  return random_tensor(d, c.table_in_x_dtype ? t : DType::f32, {seq, 1, c.head_dim}, {}, 0, {seed, 0.5, false});
}

std::string compare_outputs(Device d, const char* name, const TensorView& fused, const TensorView& eager) {
  if (!fully_written(eager, kOutputPoison)) return std::string(name) + ": eager output has unwritten elements";
  if (!fully_written(fused, kOutputPoison)) return std::string(name) + ": fused output has unwritten elements";
  const std::string diff = compare_bits(fused, eager, /*any_nan_f32=*/!d.is_cuda());
  return diff.empty() ? "" : std::string(name) + ": " + diff;
}

}  // namespace

std::vector<Flux2RopeCase> small_flux2_strided_cases() {
  return {
      {.name = "packed", .batch = 1, .seq = 9, .heads = 3, .packed = true, .mlp = 40},
      {.name = "packed_batch2_in_place", .batch = 2, .seq = 5, .heads = 2, .packed = true, .mlp = 24,
       .in_place = true},
      {.name = "own_tensors", .batch = 2, .seq = 7, .heads = 3},
      {.name = "one_token_one_head", .batch = 1, .seq = 1, .heads = 1, .packed = true, .mlp = 8},
      {.name = "head_dim_256", .batch = 1, .seq = 5, .heads = 2, .head_dim = 256, .packed = true, .mlp = 16},
      {.name = "no_weights", .batch = 1, .seq = 6, .heads = 3, .packed = true, .weights = false},
      {.name = "table_in_x_dtype", .batch = 1, .seq = 7, .heads = 3, .packed = true, .table_in_x_dtype = true},
      {.name = "misaligned_packed", .batch = 1, .seq = 5, .heads = 3, .packed = true, .mlp = 3, .offset = 1},
      {.name = "specials", .batch = 2, .seq = 17, .heads = 3, .packed = true, .mlp = 8, .specials = true},
      {.name = "large_values", .batch = 1, .seq = 9, .heads = 3, .packed = true, .amplitude = 3.0e4},
      {.name = "tiny_values", .batch = 1, .seq = 9, .heads = 3, .packed = true, .amplitude = 1.0e-30},
  };
}

std::vector<Flux2RopeCase> model_flux2_strided_cases() {
  // FLUX.2 Klein: inner dim 3072 (24 x 128), MLP in 2 x 9216 columns.
  return {
      {.name = "flux2_klein_single", .batch = 1, .seq = 4608, .heads = 24, .packed = true, .mlp = 18432},
      {.name = "flux2_klein_single_in_place", .batch = 1, .seq = 4608, .heads = 24, .packed = true, .mlp = 18432,
       .in_place = true},
      {.name = "heads_1_tokens_4097", .batch = 1, .seq = 4097, .heads = 1, .packed = true, .mlp = 6},
      {.name = "heads_3_tokens_7", .batch = 3, .seq = 7, .heads = 3, .packed = true, .mlp = 18},
      {.name = "heads_30_tokens_4097", .batch = 1, .seq = 4097, .heads = 30, .packed = true, .mlp = 180},
      {.name = "heads_24_tokens_1", .batch = 2, .seq = 1, .heads = 24, .packed = true, .mlp = 144},
      {.name = "misaligned", .batch = 1, .seq = 4097, .heads = 24, .packed = true, .mlp = 2, .offset = 1},
      {.name = "specials", .batch = 1, .seq = 4608, .heads = 24, .packed = true, .mlp = 64, .specials = true},
  };
}

std::string run_flux2_strided_qknorm_rope_case(Device d, DType t, const Flux2RopeCase& c, uint64_t seed) {
  Heads in = make_heads(d, t, c, c.seq, c.mlp, seed);
  const TensorView &q = in.view[0], &k = in.view[1];
  auto qw = make_weight(d, t, c, seed + 5), kw = make_weight(d, t, c, seed + 6);
  const TensorView* q_weight = c.weights ? &qw.view : nullptr;
  const TensorView* k_weight = c.weights ? &kw.view : nullptr;
  auto cos = make_table(d, t, c, c.seq, seed + 7), sin = make_table(d, t, c, c.seq, seed + 8);
  const std::vector<int64_t> shape = {c.batch, c.seq, c.heads, c.head_dim};

  auto eq = poisoned_tensor(d, t, shape, kOutputPoison), ek = poisoned_tensor(d, t, shape, kOutputPoison);
  eager::Workspace ws(d);
  eager::flux2_qknorm_rope_chain(q, q_weight, kEps, cos.view, sin.view, eq.view, ws);
  eager::flux2_qknorm_rope_chain(k, k_weight, kEps, cos.view, sin.view, ek.view, ws);
  runtime(d).synchronize({});

  // What must stay as it is: everything (out of place), or the V and MLP columns (in place).
  const auto untouched = [&] {
    if (!c.in_place) return snapshot(in);
    if (c.packed) return gather_bytes(in.packed.storage.view.narrow(2, 2 * c.heads * c.head_dim,
                                                                    in.packed.width - 2 * c.heads * c.head_dim));
    return gather_bytes(in.view[2]);
  };
  const std::vector<uint8_t> before = untouched();

  TestTensor fq, fk;
  const TensorView q_out = c.in_place ? q : (fq = poisoned_tensor(d, t, shape, kOutputPoison)).view;
  const TensorView k_out = c.in_place ? k : (fk = poisoned_tensor(d, t, shape, kOutputPoison)).view;
  std::string why;
  if (!can_use_flux2_strided_qknorm_rope(q, k, q_weight, k_weight, kEps, cos.view, sin.view, q_out, k_out, &why))
    return "rejected: " + why;
  flux2_strided_qknorm_rope(q, k, q_weight, k_weight, kEps, cos.view, sin.view, q_out, k_out);
  runtime(d).synchronize({});
  if (untouched() != before) return c.in_place ? "the V or MLP columns changed" : "an input changed";
  if (auto diff = compare_outputs(d, "q", q_out, eq.view); !diff.empty()) return diff;
  return compare_outputs(d, "k", k_out, ek.view);
}

std::vector<Flux2RopeCase> small_flux2_epilogue_cases() {
  return {
      {.name = "packed", .batch = 1, .seq = 9, .heads = 3, .txt_seq = 4, .packed = true},
      {.name = "own_tensors_batch2", .batch = 2, .seq = 7, .heads = 2, .txt_seq = 3},
      {.name = "one_text_token", .batch = 1, .seq = 5, .heads = 3, .txt_seq = 1, .packed = true},
      {.name = "one_image_token", .batch = 1, .seq = 1, .heads = 1, .txt_seq = 6},
      {.name = "head_dim_256", .batch = 1, .seq = 5, .heads = 2, .head_dim = 256, .txt_seq = 2, .packed = true},
      {.name = "no_weights", .batch = 1, .seq = 6, .heads = 3, .txt_seq = 2, .weights = false},
      {.name = "table_in_x_dtype", .batch = 1, .seq = 7, .heads = 3, .txt_seq = 2, .table_in_x_dtype = true},
      {.name = "misaligned", .batch = 1, .seq = 5, .heads = 3, .txt_seq = 3, .packed = true, .offset = 1},
      {.name = "specials", .batch = 2, .seq = 13, .heads = 3, .txt_seq = 4, .packed = true, .specials = true},
  };
}

std::vector<Flux2RopeCase> model_flux2_epilogue_cases() {
  return {
      {.name = "flux2_klein_double", .batch = 1, .seq = 4096, .heads = 24, .txt_seq = 512},
      {.name = "flux2_klein_double_fused_projections", .batch = 1, .seq = 4096, .heads = 24, .txt_seq = 512,
       .packed = true},
      {.name = "flux2_dev_double", .batch = 1, .seq = 4096, .heads = 48, .txt_seq = 512},
      {.name = "heads_1_tokens_4097", .batch = 1, .seq = 4097, .heads = 1, .txt_seq = 7},
      {.name = "heads_3_tokens_7", .batch = 3, .seq = 7, .heads = 3, .txt_seq = 1, .packed = true},
      {.name = "heads_30_tokens_4097", .batch = 1, .seq = 4097, .heads = 30, .txt_seq = 512},
      {.name = "misaligned", .batch = 1, .seq = 4097, .heads = 24, .txt_seq = 512, .packed = true, .offset = 1},
      {.name = "specials", .batch = 1, .seq = 4096, .heads = 24, .txt_seq = 512, .specials = true},
  };
}

std::string run_flux2_qkv_epilogue_case(Device d, DType t, const Flux2RopeCase& c, uint64_t seed) {
  Heads img = make_heads(d, t, c, c.seq, 0, seed);
  Heads txt = make_heads(d, t, c, c.txt_seq, 0, seed + 11);
  TestTensor w[4];
  const TensorView* weights[4] = {};
  for (int i = 0; i < 4; ++i) {
    w[i] = make_weight(d, t, c, seed + 20 + uint64_t(i));
    if (c.weights) weights[i] = &w[i].view;
  }
  const int64_t joint = c.txt_seq + c.seq;
  auto cos = make_table(d, t, c, joint, seed + 7), sin = make_table(d, t, c, joint, seed + 8);
  const std::vector<int64_t> shape = {c.batch, joint, c.heads, c.head_dim};

  TestTensor eager_out[3], fused_out[3];
  for (int s = 0; s < 3; ++s) {
    eager_out[s] = poisoned_tensor(d, t, shape, kOutputPoison);
    fused_out[s] = poisoned_tensor(d, t, shape, kOutputPoison);
  }
  eager::Workspace ws(d);
  eager::flux2_qkv_epilogue_chain(img.view[0], img.view[1], img.view[2], txt.view[0], txt.view[1], txt.view[2],
                                  weights[0], weights[1], weights[2], weights[3], kEps, cos.view, sin.view,
                                  eager_out[0].view, eager_out[1].view, eager_out[2].view, ws);
  runtime(d).synchronize({});
  const std::vector<uint8_t> img_before = snapshot(img), txt_before = snapshot(txt);

  std::string why;
  if (!can_use_flux2_qkv_epilogue(img.view[0], img.view[1], img.view[2], txt.view[0], txt.view[1], txt.view[2],
                                  weights[0], weights[1], weights[2], weights[3], kEps, cos.view, sin.view,
                                  fused_out[0].view, fused_out[1].view, fused_out[2].view, &why))
    return "rejected: " + why;
  flux2_qkv_epilogue(img.view[0], img.view[1], img.view[2], txt.view[0], txt.view[1], txt.view[2], weights[0],
                     weights[1], weights[2], weights[3], kEps, cos.view, sin.view, fused_out[0].view,
                     fused_out[1].view, fused_out[2].view);
  runtime(d).synchronize({});
  if (snapshot(img) != img_before || snapshot(txt) != txt_before) return "an input changed";
  const char* names[] = {"q", "k", "v"};
  for (int s = 0; s < 3; ++s)
    if (auto diff = compare_outputs(d, names[s], fused_out[s].view, eager_out[s].view); !diff.empty()) return diff;
  return "";
}

}  // namespace dfuse::test
