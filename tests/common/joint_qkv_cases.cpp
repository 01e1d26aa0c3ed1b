#include "common/joint_qkv_cases.h"

#include <array>
#include <functional>

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {

namespace {

constexpr int64_t kD = 128;

// The q, k, v of both streams with the weights they use (kept alive by the case).
struct Streams {
  std::vector<TestTensor> storage;
  QkvStream img, txt;
};

// Heads [B, S, H, 128] of one projection: its own tensor, or slot `slot` of a packed
// [B, S, 3 * H * 128] projection (a storage of its own laid out as the packed one).
TestTensor make_heads(Device d, DType t, const JointQkvCase& c, int64_t tokens, int slot, uint64_t seed) {
  const int64_t b = c.batch, h = c.heads;
  const int64_t token_stride = c.packed ? 3 * h * kD : h * kD;
  const int64_t base = c.offset + (c.packed ? slot * h * kD : 0);
  return random_tensor(d, t, {b, tokens, h, kD}, {tokens * token_stride, token_stride, kD, 1}, base,
                       {seed, 1.0, c.specials}, b * tokens * token_stride + c.offset);
}

Streams make_streams(Device d, DType t, const JointQkvCase& c, uint64_t seed) {
  Streams s;
  s.storage.reserve(12);
  const auto weight = [&](uint64_t k) -> const TensorView* {
    if (!c.weights) return nullptr;
    s.storage.push_back(random_tensor(d, t, {kD}, {}, 0, {seed + k, 0.75, false}));
    return &s.storage.back().view;
  };
  TensorView* heads[2][3] = {{&s.img.q, &s.img.k, &s.img.v}, {&s.txt.q, &s.txt.k, &s.txt.v}};
  if (c.single_stream) {
    for (int slot = 0; slot < 3; ++slot) {
      s.storage.push_back(make_heads(d, t, c, c.img_tokens + c.txt_tokens, slot, seed + 10 + slot));
      const TensorView& all = s.storage.back().view;
      *heads[0][slot] = all.narrow(1, 0, c.img_tokens);
      *heads[1][slot] = all.narrow(1, c.img_tokens, c.txt_tokens);
    }
    s.img.q_weight = s.txt.q_weight = weight(1);
    s.img.k_weight = s.txt.k_weight = weight(2);
    return s;
  }
  for (int stream = 0; stream < 2; ++stream)
    for (int slot = 0; slot < 3; ++slot) {
      const int64_t tokens = stream == 0 ? c.img_tokens : c.txt_tokens;
      s.storage.push_back(make_heads(d, t, c, tokens, slot, seed + 10 + 3 * stream + slot));
      *heads[stream][slot] = s.storage.back().view;
    }
  s.img.q_weight = weight(1);
  s.img.k_weight = weight(2);
  s.txt.q_weight = weight(3);
  s.txt.k_weight = weight(4);
  return s;
}

// A table [S, 128] with values in (-1, 1), rows 128 apart (a row slice of a larger table when
// `row_stride` > 128).
TestTensor make_table(Device d, int64_t tokens, uint64_t seed) {
  return random_tensor(d, DType::f32, {tokens, kD}, {}, 0, {seed, 0.5, false});
}

// Three joint outputs [B, S, H, 128], poisoned: separate tensors, or the slots of one [B, S, 3, H, 128].
struct JointOutputs {
  std::vector<TestTensor> storage;
  std::array<TensorView, 3> view;
};

JointOutputs make_outputs(Device d, DType t, const JointQkvCase& c) {
  JointOutputs o;
  const int64_t b = c.batch, s = c.img_tokens + c.txt_tokens, h = c.heads;
  if (!c.strided_out) {
    for (int k = 0; k < 3; ++k) {
      o.storage.push_back(poisoned_tensor(d, t, {b, s, h, kD}, kOutputPoison));
      o.view[size_t(k)] = o.storage.back().view;
    }
    return o;
  }
  o.storage.push_back(poisoned_tensor(d, t, {b, s, 3, h, kD}, kOutputPoison));
  const int64_t sizes[] = {b, s, h, kD}, strides[] = {s * 3 * h * kD, 3 * h * kD, kD, 1};
  for (int k = 0; k < 3; ++k)
    o.view[size_t(k)] = o.storage.back().view.narrow(2, k, 1).restrided(sizes, strides, 4);
  return o;
}

using CanUse = std::function<bool(const Streams&, const JointOutputs&, std::string*)>;
using Run = std::function<void(const Streams&, const JointOutputs&)>;
using Chain = std::function<void(const Streams&, const JointOutputs&, eager::Workspace&)>;

std::string compare(Device d, DType t, const JointQkvCase& c, const Streams& s, const CanUse& can_use,
                    const Run& fused, const Chain& chain) {
  const JointOutputs eager = make_outputs(d, t, c), out = make_outputs(d, t, c);
  eager::Workspace ws(d);
  chain(s, eager, ws);
  std::string why;
  if (!can_use(s, out, &why)) return "rejected: " + why;
  fused(s, out);
  runtime(d).synchronize({});
  static const char* kNames[] = {"joint_q", "joint_k", "joint_v"};
  for (size_t k = 0; k < 3; ++k) {
    if (!fully_written(eager.view[k], kOutputPoison)) return std::string(kNames[k]) + ": eager output unwritten";
    if (!fully_written(out.view[k], kOutputPoison)) return std::string(kNames[k]) + ": fused output unwritten";
    if (auto diff = compare_bits(out.view[k], eager.view[k], !d.is_cuda()); !diff.empty())
      return std::string(kNames[k]) + ": " + diff;
  }
  return "";
}

}  // namespace

std::vector<JointQkvCase> small_joint_qkv_cases() {
  return {
      {.name = "base"},
      {.name = "one_token_one_head", .batch = 1, .img_tokens = 1, .txt_tokens = 1, .heads = 1},
      {.name = "batch2_heads3", .batch = 2, .img_tokens = 7, .txt_tokens = 3, .heads = 3},
      {.name = "packed", .batch = 2, .img_tokens = 6, .txt_tokens = 4, .heads = 3, .packed = true},
      {.name = "single_stream", .batch = 2, .img_tokens = 6, .txt_tokens = 3, .heads = 2, .single_stream = true},
      {.name = "single_stream_packed", .batch = 1, .img_tokens = 5, .txt_tokens = 4, .heads = 3, .packed = true,
       .single_stream = true},
      {.name = "no_weights", .batch = 1, .img_tokens = 7, .txt_tokens = 2, .heads = 2, .weights = false},
      {.name = "misaligned", .batch = 1, .img_tokens = 5, .txt_tokens = 3, .heads = 2, .offset = 1},
      {.name = "specials", .batch = 2, .img_tokens = 17, .txt_tokens = 5, .heads = 3, .specials = true},
      {.name = "strided_out", .batch = 2, .img_tokens = 5, .txt_tokens = 4, .heads = 2, .strided_out = true},
      {.name = "no_text", .batch = 1, .img_tokens = 6, .txt_tokens = 0, .heads = 2},
  };
}

std::vector<JointQkvCase> model_joint_qkv_cases() {
  return {
      {.name = "qwen_image_1024", .batch = 1, .img_tokens = 4096, .txt_tokens = 512, .heads = 24},
      {.name = "qwen_image_batch2", .batch = 2, .img_tokens = 4096, .txt_tokens = 77, .heads = 24},
      {.name = "hunyuan_double_packed", .batch = 1, .img_tokens = 8190, .txt_tokens = 256, .heads = 24,
       .packed = true},
      {.name = "hunyuan_single_stream", .batch = 1, .img_tokens = 8190, .txt_tokens = 256, .heads = 24,
       .single_stream = true},
      {.name = "heads_1_tokens_4097", .batch = 1, .img_tokens = 4097, .txt_tokens = 1, .heads = 1},
      {.name = "heads_3_tokens_7", .batch = 3, .img_tokens = 7, .txt_tokens = 7, .heads = 3},
      {.name = "heads_30_tokens_4097", .batch = 1, .img_tokens = 4097, .txt_tokens = 7, .heads = 30, .packed = true},
      {.name = "misaligned", .batch = 1, .img_tokens = 4097, .txt_tokens = 33, .heads = 24, .offset = 1},
      {.name = "specials", .batch = 1, .img_tokens = 4096, .txt_tokens = 512, .heads = 24, .specials = true},
      {.name = "strided_out", .batch = 1, .img_tokens = 4096, .txt_tokens = 512, .heads = 24, .strided_out = true},
  };
}

std::string run_qwen_qkv_epilogue_case(Device d, DType t, const JointQkvCase& c, uint64_t seed) {
  const Streams s = make_streams(d, t, c, seed);
  const TestTensor img_freqs = make_table(d, c.img_tokens, seed + 5), txt_freqs = make_table(d, c.txt_tokens, seed + 6);
  const double eps = 1e-6;
  return compare(
      d, t, c, s,
      [&](const Streams& st, const JointOutputs& o, std::string* why) {
        return can_use_qwen_qkv_epilogue(st.img, st.txt, eps, img_freqs.view, txt_freqs.view, o.view[0], o.view[1],
                                         o.view[2], why);
      },
      [&](const Streams& st, const JointOutputs& o) {
        qwen_qkv_epilogue(st.img, st.txt, eps, img_freqs.view, txt_freqs.view, o.view[0], o.view[1], o.view[2]);
      },
      [&](const Streams& st, const JointOutputs& o, eager::Workspace& ws) {
        eager::qwen_qkv_epilogue_chain(st.img, st.txt, eps, img_freqs.view, txt_freqs.view, o.view[0], o.view[1],
                                       o.view[2], ws);
      });
}

std::string run_hunyuan_qkv_rope_pack_case(Device d, DType t, const JointQkvCase& c, uint64_t seed) {
  const Streams s = make_streams(d, t, c, seed);
  const TestTensor cos = make_table(d, c.img_tokens, seed + 5), sin = make_table(d, c.img_tokens, seed + 6);
  const double eps = 1e-6;
  return compare(
      d, t, c, s,
      [&](const Streams& st, const JointOutputs& o, std::string* why) {
        return can_use_hunyuan_qkv_rope_pack(st.img, st.txt, eps, cos.view, sin.view, o.view[0], o.view[1],
                                             o.view[2], why);
      },
      [&](const Streams& st, const JointOutputs& o) {
        hunyuan_qkv_rope_pack(st.img, st.txt, eps, cos.view, sin.view, o.view[0], o.view[1], o.view[2]);
      },
      [&](const Streams& st, const JointOutputs& o, eager::Workspace& ws) {
        eager::hunyuan_qkv_rope_pack_chain(st.img, st.txt, eps, cos.view, sin.view, o.view[0], o.view[1],
                                           o.view[2], ws);
      });
}

}  // namespace dfuse::test
