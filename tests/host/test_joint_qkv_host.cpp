// The joint-QKV epilogues (qwen_qkv_epilogue, hunyuan_qkv_rope_pack) on the host backend: fused ==
// eager chain bit for bit over every case, the complex product's rounding, and every guard's error
// (with nothing written when a guard fails).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/joint_qkv_cases.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {
namespace {

class JointQkvHost : public ::testing::TestWithParam<DType> {};

TEST_P(JointQkvHost, QwenQkvEpilogueMatchesEagerChain) {
  uint64_t seed = 2100;
  for (const auto& c : small_joint_qkv_cases())
    EXPECT_EQ(run_qwen_qkv_epilogue_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(JointQkvHost, HunyuanQkvRopePackMatchesEagerChain) {
  uint64_t seed = 2300;
  for (const auto& c : small_joint_qkv_cases())
    EXPECT_EQ(run_hunyuan_qkv_rope_pack_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, JointQkvHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- the complex product's rounding -----------------------------------------------------------------

// One f32 head normalized without weight (values near 1), rotated by a table whose pairs make
// a*c - b*s cancel: the fused op and the eager replica must give the contracted form
// fma(a, c, -(b * s)), fma(a, s, b * c), which differs here from the twice-rounded a*c - b*s.
TEST(JointQkvRounding, QwenComplexProductIsTheContractedForm) {
  constexpr int64_t kD = 128;
  std::vector<float> x(3 * kD), joint(3 * kD, -1.0f), eager_joint(3 * kD, -1.0f), freqs(kD);
  for (int64_t i = 0; i < kD; ++i) {
    x[size_t(i)] = 1.0f + float(i % 7) * 0x1p-20f;  // q
    x[size_t(kD + i)] = x[size_t(i)];                 // k
    x[size_t(2 * kD + i)] = float(i);                 // v
  }
  // (c, s) = (1 + 2^-12, 1 - 2^-12 + tiny): products that round, a difference that cancels.
  for (int64_t p = 0; p < kD / 2; ++p) {
    freqs[size_t(2 * p)] = 1.0f + 0x1p-12f + float(p) * 0x1p-23f;
    freqs[size_t(2 * p + 1)] = 1.0f - 0x1p-12f + float(p) * 0x1p-22f;
  }
  const TensorView q(x.data(), DType::f32, {1, 1, 1, kD}), k(x.data() + kD, DType::f32, {1, 1, 1, kD}),
      v(x.data() + 2 * kD, DType::f32, {1, 1, 1, kD});
  // An empty text stream: the image stream alone fills the joint tensors.
  const TensorView tq(x.data(), DType::f32, {1, 0, 1, kD});
  const QkvStream img{q, k, v}, txt{tq, tq, tq};
  const TensorView f(freqs.data(), DType::f32, {1, kD}), tf(freqs.data(), DType::f32, {0, kD});
  const TensorView jq(joint.data(), DType::f32, {1, 1, 1, kD}), jk(joint.data() + kD, DType::f32, {1, 1, 1, kD}),
      jv(joint.data() + 2 * kD, DType::f32, {1, 1, 1, kD});
  qwen_qkv_epilogue(img, txt, 1e-6, f, tf, jq, jk, jv);
  const TensorView eq(eager_joint.data(), DType::f32, {1, 1, 1, kD}),
      ek(eager_joint.data() + kD, DType::f32, {1, 1, 1, kD}), ev(eager_joint.data() + 2 * kD, DType::f32, {1, 1, 1, kD});
  eager::Workspace ws(Device::host());
  eager::qwen_qkv_epilogue_chain(img, txt, 1e-6, f, tf, eq, ek, ev, ws);
  EXPECT_EQ(std::memcmp(joint.data(), eager_joint.data(), joint.size() * sizeof(float)), 0);
  // The normalized q as the chain's RMSNorm gives it (its eager replica), then both forms of the product.
  std::vector<float> nq(kD);
  eager::rms_norm_decomposed_chain(q, nullptr, 1e-6, TensorView(nq.data(), DType::f32, {1, 1, 1, kD}), ws);
  int contracted_differs = 0;
  for (int64_t p = 0; p < kD / 2; ++p) {
    const float a = nq[size_t(2 * p)], b = nq[size_t(2 * p + 1)], c = freqs[size_t(2 * p)], s = freqs[size_t(2 * p + 1)];
    const float re = std::fma(a, c, -(b * s)), im = std::fma(a, s, b * c);
    const float re2 = a * c - b * s, im2 = a * s + b * c;  // host code is built with -ffp-contract=off
    EXPECT_EQ(joint[size_t(2 * p)], re) << p;
    EXPECT_EQ(joint[size_t(2 * p + 1)], im) << p;
    contracted_differs += (re != re2) + (im != im2);
  }
  EXPECT_GT(contracted_differs, 0) << "the table does not tell the contracted form from the rounded one";
  for (int64_t i = 0; i < kD; ++i) EXPECT_EQ(joint[size_t(2 * kD + i)], float(i));  // v copied
}

// ---- guards -------------------------------------------------------------------------------------------

// img [B=1, S=8, H=2, 128], txt [1, 4, 2, 128] bf16 in one buffer; weights [128]; tables f32 [S, 128];
// joint outputs [1, 12, 2, 128] in another buffer.
struct JointQkvGuards : ::testing::Test {
  static constexpr int64_t kImg = 8 * 2 * 128, kTxt = 4 * 2 * 128, kJoint = 12 * 2 * 128;
  std::vector<bf16_t> in = std::vector<bf16_t>(3 * kImg + 3 * kTxt + 128, float_to_bf16(1.0f));
  std::vector<bf16_t> out = std::vector<bf16_t>(3 * kJoint, float_to_bf16(-7.0f));
  std::vector<bf16_t> w = std::vector<bf16_t>(256, float_to_bf16(1.0f));
  std::vector<float> tables = std::vector<float>(3 * 8 * 128, 0.5f);
  TensorView img_q{in.data(), DType::bf16, {1, 8, 2, 128}};
  TensorView img_k{in.data() + kImg, DType::bf16, {1, 8, 2, 128}};
  TensorView img_v{in.data() + 2 * kImg, DType::bf16, {1, 8, 2, 128}};
  TensorView txt_q{in.data() + 3 * kImg, DType::bf16, {1, 4, 2, 128}};
  TensorView txt_k{in.data() + 3 * kImg + kTxt, DType::bf16, {1, 4, 2, 128}};
  TensorView txt_v{in.data() + 3 * kImg + 2 * kTxt, DType::bf16, {1, 4, 2, 128}};
  TensorView qw{w.data(), DType::bf16, {128}}, kw{w.data() + 128, DType::bf16, {128}};
  TensorView img_t{tables.data(), DType::f32, {8, 128}}, img_t2{tables.data() + 8 * 128, DType::f32, {8, 128}};
  TensorView txt_t{tables.data() + 16 * 128, DType::f32, {4, 128}};
  TensorView jq{out.data(), DType::bf16, {1, 12, 2, 128}}, jk{out.data() + kJoint, DType::bf16, {1, 12, 2, 128}};
  TensorView jv{out.data() + 2 * kJoint, DType::bf16, {1, 12, 2, 128}};

  QkvStream img() const { return {img_q, img_k, img_v, &qw, &kw}; }
  QkvStream txt() const { return {txt_q, txt_k, txt_v, &qw, &kw}; }

  bool outputs_untouched() const {
    for (bf16_t v : out)
      if (bf16_to_float(v) != -7.0f) return false;
    return true;
  }

  // The failed guard of both ops (they share the checks of the streams and outputs); the op throws
  // Unsupported with can_use's message, and writes nothing.
  std::string qwen(const QkvStream& i, const QkvStream& t, const TensorView& fi, const TensorView& ft,
                   const TensorView& q, const TensorView& k, const TensorView& v, double eps = 1e-6) {
    std::string why;
    EXPECT_FALSE(can_use_qwen_qkv_epilogue(i, t, eps, fi, ft, q, k, v, &why));
    EXPECT_NE(why.find("qwen_qkv_epilogue: "), std::string::npos) << why;
    try {
      qwen_qkv_epilogue(i, t, eps, fi, ft, q, k, v);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      EXPECT_TRUE(outputs_untouched());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
  std::string hunyuan(const QkvStream& i, const QkvStream& t, const TensorView& c, const TensorView& s,
                      const TensorView& q, const TensorView& k, const TensorView& v) {
    std::string why;
    EXPECT_FALSE(can_use_hunyuan_qkv_rope_pack(i, t, 1e-6, c, s, q, k, v, &why));
    EXPECT_NE(why.find("hunyuan_qkv_rope_pack: "), std::string::npos) << why;
    try {
      hunyuan_qkv_rope_pack(i, t, 1e-6, c, s, q, k, v);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      EXPECT_TRUE(outputs_untouched());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(JointQkvGuards, AcceptsTheBaseCases) {
  std::string why;
  EXPECT_TRUE(can_use_qwen_qkv_epilogue(img(), txt(), 1e-6, img_t, txt_t, jq, jk, jv, &why)) << why;
  EXPECT_TRUE(can_use_hunyuan_qkv_rope_pack(img(), txt(), 1e-6, img_t, img_t2, jq, jk, jv, &why)) << why;
  const QkvStream no_weights{img_q, img_k, img_v};
  EXPECT_TRUE(can_use_qwen_qkv_epilogue(no_weights, txt(), 1e-6, img_t, txt_t, jq, jk, jv, &why)) << why;
}

TEST_F(JointQkvGuards, RejectsHeadDimsAndShapes) {
  int64_t sizes[] = {1, 8, 4, 64}, strides[] = {2048, 256, 64, 1};
  const QkvStream d64{img_q.restrided(sizes, strides, 4), img_k.restrided(sizes, strides, 4),
                      img_v.restrided(sizes, strides, 4)};
  EXPECT_EQ(qwen(d64, txt(), img_t, txt_t, jq, jk, jv), "head_dim");
  // text heads != image heads
  int64_t th[] = {1, 2, 4, 128}, ts[] = {1024, 512, 128, 1};
  const QkvStream txt4{txt_q.restrided(th, ts, 4), txt_k.restrided(th, ts, 4), txt_v.restrided(th, ts, 4)};
  EXPECT_EQ(qwen(img(), txt4, img_t, txt_t, jq, jk, jv), "shape");
  // v of another shape than q
  const QkvStream bad_v{img_q, img_k, txt_v};
  EXPECT_EQ(hunyuan(bad_v, txt(), img_t, img_t2, jq, jk, jv), "shape");
  // joint outputs without room for both streams
  const TensorView short_q(out.data(), DType::bf16, {1, 11, 2, 128});
  EXPECT_EQ(qwen(img(), txt(), img_t, txt_t, short_q, jk, jv), "shape");
  // rank
  const TensorView flat(in.data(), DType::bf16, {8, 2, 128});
  const QkvStream rank3{flat, img_k, img_v};
  EXPECT_EQ(hunyuan(rank3, txt(), img_t, img_t2, jq, jk, jv), "rank");
  // a weight that is not [128]
  const TensorView short_w(w.data(), DType::bf16, {64});
  const QkvStream bad_w{img_q, img_k, img_v, &short_w, &kw};
  EXPECT_EQ(qwen(bad_w, txt(), img_t, txt_t, jq, jk, jv), "shape");
}

TEST_F(JointQkvGuards, RejectsDtypesDevicesAndData) {
  std::vector<float> f32(3 * kImg, 1.0f);
  const TensorView v32(f32.data(), DType::f32, {1, 8, 2, 128});
  const QkvStream mixed{img_q, img_k, v32};
  EXPECT_EQ(qwen(mixed, txt(), img_t, txt_t, jq, jk, jv), "dtype");
  const TensorView jq32(f32.data(), DType::f32, {1, 12, 2, 128});
  EXPECT_EQ(hunyuan(img(), txt(), img_t, img_t2, jq32, jk, jv), "dtype");
  const TensorView bf_table(in.data(), DType::bf16, {8, 128});
  EXPECT_EQ(qwen(img(), txt(), bf_table, txt_t, jq, jk, jv), "dtype");
  const QkvStream on_gpu{img_q, img_k, TensorView(in.data() + 2 * kImg, DType::bf16, {1, 8, 2, 128}, Device::cuda(0))};
  EXPECT_EQ(hunyuan(on_gpu, txt(), img_t, img_t2, jq, jk, jv), "device");
  const QkvStream null_q{TensorView(nullptr, DType::bf16, {1, 8, 2, 128}), img_k, img_v};
  EXPECT_EQ(qwen(null_q, txt(), img_t, txt_t, jq, jk, jv), "data");
  EXPECT_EQ(qwen(img(), txt(), img_t, txt_t, jq, jk, jv, -1.0), "eps");
}

TEST_F(JointQkvGuards, RejectsTables) {
  // the image table must cover the image tokens, the text table the text tokens
  EXPECT_EQ(qwen(img(), txt(), txt_t, txt_t, jq, jk, jv), "shape");
  EXPECT_EQ(qwen(img(), txt(), img_t, img_t, jq, jk, jv), "shape");
  EXPECT_EQ(hunyuan(img(), txt(), img_t, txt_t, jq, jk, jv), "shape");
  // a strided last dim
  int64_t sizes[] = {8, 128}, strides[] = {256, 2};
  EXPECT_EQ(hunyuan(img(), txt(), img_t, img_t.restrided(sizes, strides, 2), jq, jk, jv), "last_dim_stride");
}

TEST_F(JointQkvGuards, RejectsLayoutsAndOverlap) {
  // a last dim that is not contiguous
  int64_t sizes[] = {1, 8, 2, 128}, strides[] = {4096, 512, 256, 2};
  const QkvStream strided{img_q.restrided(sizes, strides, 4), img_k, img_v};
  EXPECT_EQ(qwen(strided, txt(), img_t, txt_t, jq, jk, jv), "last_dim_stride");
  // outputs that overlap an input or each other, or themselves
  const TensorView over_input(in.data() + kImg / 2, DType::bf16, {1, 12, 2, 128});
  EXPECT_EQ(hunyuan(img(), txt(), img_t, img_t2, over_input, jk, jv), "overlap");
  EXPECT_EQ(qwen(img(), txt(), img_t, txt_t, jq, jq, jv), "overlap");
  int64_t js[] = {1, 12, 2, 128}, jst[] = {0, 128, 128, 1};
  EXPECT_EQ(qwen(img(), txt(), img_t, txt_t, jq.restrided(js, jst, 4), jk, jv), "overlap");
  const TensorView over_table(reinterpret_cast<bf16_t*>(tables.data()), DType::bf16, {1, 12, 2, 128});
  EXPECT_EQ(qwen(img(), txt(), img_t, txt_t, jq, jk, over_table), "overlap");
}

}  // namespace
}  // namespace dfuse::test
