// FLUX.2's QK-norm + RoPE ops on the host backend: fused == eager chain bit for bit over every case
// (inputs and the projection's V/MLP columns intact), the rounding point the contract names, and
// every guard's error.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/flux2_rope_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {
namespace {

bf16_t bf(float v) { return float_to_bf16(v); }

// Bitwise equality of buffers (bf16_t has no operator==).
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

class Flux2RopeHost : public ::testing::TestWithParam<DType> {};

TEST_P(Flux2RopeHost, StridedQkNormRopeMatchesEagerChain) {
  uint64_t seed = 4100;
  for (const auto& c : small_flux2_strided_cases())
    EXPECT_EQ(run_flux2_strided_qknorm_rope_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(Flux2RopeHost, QkvEpilogueMatchesEagerChain) {
  uint64_t seed = 4300;
  for (const auto& c : small_flux2_epilogue_cases())
    EXPECT_EQ(run_flux2_qkv_epilogue_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Flux2RopeHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- guards ------------------------------------------------------------------------------------------

struct Flux2StridedGuards : ::testing::Test {
  // one packed projection [B=1, S=16, 3 * 2 * 128 + 8]: q, k, v of 2 heads of 128, then 8 MLP columns
  static constexpr int64_t kS = 16, kW = 3 * 256 + 8;
  std::vector<bf16_t> proj = std::vector<bf16_t>(kS * kW + 8, bf(1.0f));
  std::vector<bf16_t> outs = std::vector<bf16_t>(2 * kS * 256, bf(0.0f));
  std::vector<bf16_t> ws = std::vector<bf16_t>(128, bf(1.0f));
  std::vector<float> cs = std::vector<float>(kS * 128, 0.5f);
  int64_t sizes[4] = {1, kS, 2, 128}, strides[4] = {kS * kW, kW, 128, 1};
  TensorView q{proj.data(), DType::bf16, sizes, strides, 4};
  TensorView k{proj.data() + 256, DType::bf16, sizes, strides, 4};
  TensorView q_out{outs.data(), DType::bf16, {1, kS, 2, 128}};
  TensorView k_out{outs.data() + kS * 256, DType::bf16, {1, kS, 2, 128}};
  TensorView w{ws.data(), DType::bf16, {128}};
  TensorView cos{cs.data(), DType::f32, {kS, 1, 128}};

  std::string guard(const TensorView& qv, const TensorView& kv, const TensorView* qw, const TensorView& c,
                    const TensorView& qo, const TensorView& ko, double eps = 1e-6) {
    std::string why;
    const std::vector<bf16_t> proj_before = proj, outs_before = outs;
    EXPECT_FALSE(can_use_flux2_strided_qknorm_rope(qv, kv, qw, qw, eps, c, c, qo, ko, &why));
    EXPECT_NE(why.find("flux2_strided_qknorm_rope: "), std::string::npos) << why;
    try {
      flux2_strided_qknorm_rope(qv, kv, qw, qw, eps, c, c, qo, ko);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      EXPECT_TRUE(same_bits(proj, proj_before) && same_bits(outs, outs_before)) << "a refused call wrote";
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(Flux2StridedGuards, AcceptsTheBaseCases) {
  std::string why;
  EXPECT_TRUE(can_use_flux2_strided_qknorm_rope(q, k, &w, &w, 1e-6, cos, cos, q_out, k_out, &why)) << why;
  EXPECT_TRUE(can_use_flux2_strided_qknorm_rope(q, k, nullptr, nullptr, 1e-6, cos, cos, q, k, &why)) << why;
}

TEST_F(Flux2StridedGuards, RejectsHeadDimsAndPartialRotary) {
  int64_t s64[] = {1, kS, 4, 64}, st64[] = {kS * kW, kW, 64, 1};
  TensorView q64(proj.data(), DType::bf16, s64, st64, 4), k64(proj.data() + 256, DType::bf16, s64, st64, 4);
  TensorView o64(outs.data(), DType::bf16, {1, kS, 4, 64}), p64(outs.data() + kS * 256, DType::bf16, {1, kS, 4, 64});
  EXPECT_EQ(guard(q64, k64, nullptr, cos.narrow(-1, 0, 64), o64, p64), "head_dim");
  EXPECT_EQ(guard(q, k, &w, cos.narrow(-1, 0, 64), q_out, k_out), "shape");  // pairs cover the whole head
}

TEST_F(Flux2StridedGuards, RejectsTheGenericRmsNormPath) {
  TensorView shifted(proj.data() + 1, DType::bf16, {1, kS, 2, 128});  // contiguous, off a 4-element boundary
  TensorView k2(proj.data() + kS * 256 + 4, DType::bf16, {1, kS, 2, 128});
  EXPECT_EQ(guard(shifted, k2, &w, cos, q_out, k_out), "rms_norm_path");
}

TEST_F(Flux2StridedGuards, RejectsOutputsOverlappingOtherOperands) {
  EXPECT_EQ(guard(q, k, &w, cos, k, k_out), "overlap");        // q_out is k
  EXPECT_EQ(guard(q, k, &w, cos, q_out, q_out), "overlap");    // both outputs one tensor
  EXPECT_EQ(guard(q, k, &w, cos, q_out, q), "overlap");        // k_out is q
}

TEST_F(Flux2StridedGuards, RejectsTablesWeightsAndEps) {
  EXPECT_EQ(guard(q, k, &w, cos.narrow(0, 0, 3), q_out, k_out), "broadcast");
  std::vector<f16_t> half_table(kS * 128);
  TensorView f16_cos(half_table.data(), DType::f16, {kS, 1, 128});
  EXPECT_EQ(guard(q, k, &w, f16_cos, q_out, k_out), "dtype");
  TensorView short_w(ws.data(), DType::bf16, {64});
  EXPECT_EQ(guard(q, k, &short_w, cos, q_out, k_out), "shape");
  EXPECT_EQ(guard(q, k, &w, cos, q_out, k_out, -1.0), "eps");
  TensorView wrong_out(outs.data(), DType::bf16, {1, kS, 1, 256});
  EXPECT_EQ(guard(q, k, &w, cos, wrong_out, k_out), "shape");
}

struct Flux2EpilogueGuards : ::testing::Test {
  // image [1, 8, 2, 128], text [1, 4, 2, 128] as their own buffers; joint outputs [1, 12, 2, 128]
  static constexpr int64_t kImg = 8, kTxt = 4, kHead = 2 * 128;
  std::vector<bf16_t> img = std::vector<bf16_t>(3 * kImg * kHead, bf(1.0f));
  std::vector<bf16_t> txt = std::vector<bf16_t>(3 * kTxt * kHead, bf(1.0f));
  std::vector<bf16_t> outs = std::vector<bf16_t>(3 * (kImg + kTxt) * kHead, bf(0.0f));
  std::vector<bf16_t> ws = std::vector<bf16_t>(128, bf(1.0f));
  std::vector<float> cs = std::vector<float>((kImg + kTxt) * 128, 0.5f);
  TensorView iv(int s, int64_t seq = kImg) { return {img.data() + s * kImg * kHead, DType::bf16, {1, seq, 2, 128}}; }
  TensorView tv(int s) { return {txt.data() + s * kTxt * kHead, DType::bf16, {1, kTxt, 2, 128}}; }
  TensorView ov(int s) { return {outs.data() + s * (kImg + kTxt) * kHead, DType::bf16, {1, kImg + kTxt, 2, 128}}; }
  TensorView w{ws.data(), DType::bf16, {128}};
  TensorView cos{cs.data(), DType::f32, {kImg + kTxt, 1, 128}};

  std::string guard(const TensorView (&in)[6], const TensorView& c, const TensorView (&o)[3]) {
    std::string why;
    const std::vector<bf16_t> img_before = img, txt_before = txt, outs_before = outs;
    EXPECT_FALSE(can_use_flux2_qkv_epilogue(in[0], in[1], in[2], in[3], in[4], in[5], &w, &w, &w, &w, 1e-6, c, c,
                                            o[0], o[1], o[2], &why));
    EXPECT_NE(why.find("flux2_qkv_epilogue: "), std::string::npos) << why;
    try {
      flux2_qkv_epilogue(in[0], in[1], in[2], in[3], in[4], in[5], &w, &w, &w, &w, 1e-6, c, c, o[0], o[1], o[2]);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      EXPECT_TRUE(same_bits(img, img_before) && same_bits(txt, txt_before) && same_bits(outs, outs_before))
          << "a refused call wrote";
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(Flux2EpilogueGuards, AcceptsTheBaseCase) {
  std::string why;
  EXPECT_TRUE(can_use_flux2_qkv_epilogue(iv(0), iv(1), iv(2), tv(0), tv(1), tv(2), &w, &w, nullptr, nullptr, 1e-6,
                                         cos, cos, ov(0), ov(1), ov(2), &why))
      << why;
}

TEST_F(Flux2EpilogueGuards, RejectsShapes) {
  // image v with fewer tokens than image q
  EXPECT_EQ(guard({iv(0), iv(1), iv(2, 4), tv(0), tv(1), tv(2)}, cos, {ov(0), ov(1), ov(2)}), "shape");
  // joint outputs without the text tokens
  TensorView short_out(outs.data(), DType::bf16, {1, kImg, 2, 128});
  EXPECT_EQ(guard({iv(0), iv(1), iv(2), tv(0), tv(1), tv(2)}, cos, {short_out, ov(1), ov(2)}), "shape");
  // tables for the image tokens only
  EXPECT_EQ(guard({iv(0), iv(1), iv(2), tv(0), tv(1), tv(2)}, cos.narrow(0, 0, kImg), {ov(0), ov(1), ov(2)}),
            "broadcast");
  // rank 3 heads
  TensorView flat(img.data(), DType::bf16, {1, kImg, 256});
  EXPECT_EQ(guard({flat, iv(1), iv(2), tv(0), tv(1), tv(2)}, cos, {ov(0), ov(1), ov(2)}), "rank");
}

TEST_F(Flux2EpilogueGuards, RejectsOverlapAndDtypes) {
  EXPECT_EQ(guard({iv(0), iv(1), iv(2), tv(0), tv(1), tv(2)}, cos, {ov(0), ov(0), ov(2)}), "overlap");
  TensorView into_input(img.data(), DType::bf16, {1, kImg + kTxt, 2, 128});  // q_out over the image q, k
  EXPECT_EQ(guard({iv(0), iv(1), iv(2), tv(0), tv(1), tv(2)}, cos, {into_input, ov(1), ov(2)}), "overlap");
  std::vector<f16_t> half(kTxt * kHead);
  TensorView f16_txt(half.data(), DType::f16, {1, kTxt, 2, 128});
  EXPECT_EQ(guard({iv(0), iv(1), iv(2), f16_txt, tv(1), tv(2)}, cos, {ov(0), ov(1), ov(2)}), "dtype");
}

}  // namespace
}  // namespace dfuse::test
