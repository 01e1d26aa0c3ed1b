// helios_qk_rope on the host backend: fused == eager chain bit for bit over every case, the rounding
// points of the contract, and every guard's error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/helios_rope_cases.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {
namespace {

class HeliosRopeHost : public ::testing::TestWithParam<DType> {};

TEST_P(HeliosRopeHost, QkRopeMatchesEagerChain) {
  uint64_t seed = 4500;
  for (const auto& c : small_helios_rope_cases())
    EXPECT_EQ(run_helios_rope_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HeliosRopeHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Columns: out[0] = x1 * cos[0] - x2 * sin[1], out[1] = x1 * sin[1] + x2 * cos[0] (cos[1], sin[0] unused).
// With x1 = x2 = 1 + 2^-12 and cos[0] = 1 + 2^-12, x1 * cos[0] rounds to 1 + 2^-11 before the
// subtraction of x2 * sin[1] = 1 + 2^-12: 2^-12 exactly (an fma would keep 2^-24 more).
TEST(HeliosRopeHostArithmetic, RoundsEachProduct) {
  const float t = 1.0f + 0x1p-12f;
  std::vector<float> q = {t, t}, k = {t, t}, qo(2), ko(2);
  std::vector<float> freqs = {t, 7.0f, 7.0f, 1.0f};  // cos = (t, unused), sin = (unused, 1)
  TensorView qv(q.data(), DType::f32, {1, 1, 1, 2}), kv(k.data(), DType::f32, {1, 1, 1, 2});
  TensorView qov(qo.data(), DType::f32, {1, 1, 1, 2}), kov(ko.data(), DType::f32, {1, 1, 1, 2});
  TensorView fv(freqs.data(), DType::f32, {1, 1, 4});
  helios_qk_rope(qv, kv, fv, qov, kov);
  EXPECT_EQ(qo[0], 0x1p-12f);
  EXPECT_EQ(qo[1], t + (1.0f + 0x1p-11f));  // x1 * 1 + (1 + 2^-11), exact
  EXPECT_EQ(ko[0], qo[0]);
  EXPECT_EQ(ko[1], qo[1]);
  helios_qk_rope(qv, kv, fv, qv, kv);  // in place
  EXPECT_EQ(q[0], qo[0]);
  EXPECT_EQ(k[1], qo[1]);
}

struct HeliosRopeGuards : ::testing::Test {
  // q, k [1, 4, 2, 64] bf16, freqs [1, 4, 128] f32, outputs apart
  static constexpr int64_t kN = 4 * 2 * 64;
  std::vector<bf16_t> qk = std::vector<bf16_t>(2 * kN, float_to_bf16(1.0f));
  std::vector<bf16_t> outs = std::vector<bf16_t>(2 * kN, float_to_bf16(0.0f));
  std::vector<float> fs = std::vector<float>(4 * 128, 0.5f);
  TensorView q{qk.data(), DType::bf16, {1, 4, 2, 64}};
  TensorView k{qk.data() + kN, DType::bf16, {1, 4, 2, 64}};
  TensorView qo{outs.data(), DType::bf16, {1, 4, 2, 64}};
  TensorView ko{outs.data() + kN, DType::bf16, {1, 4, 2, 64}};
  TensorView freqs{fs.data(), DType::f32, {1, 4, 128}};

  std::string guard(const TensorView& qv, const TensorView& kv, const TensorView& f, const TensorView& q_out,
                    const TensorView& k_out) {
    std::string why;
    EXPECT_FALSE(can_use_helios_qk_rope(qv, kv, f, q_out, k_out, &why));
    EXPECT_NE(why.find("helios_qk_rope: "), std::string::npos) << why;
    try {
      helios_qk_rope(qv, kv, f, q_out, k_out);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(HeliosRopeGuards, AcceptsTheBaseCases) {
  EXPECT_TRUE(can_use_helios_qk_rope(q, k, freqs, qo, ko));
  EXPECT_TRUE(can_use_helios_qk_rope(q, k, freqs, q, k));  // in place
}

TEST_F(HeliosRopeGuards, RejectsRank) {
  TensorView q3(qk.data(), DType::bf16, {4, 2, 64});
  EXPECT_EQ(guard(q3, k, freqs, qo, ko), "rank");
}

TEST_F(HeliosRopeGuards, RejectsOddHeadDim) {
  TensorView q63(qk.data(), DType::bf16, {1, 4, 2, 63}), k63(qk.data() + kN, DType::bf16, {1, 4, 2, 63});
  TensorView o63(outs.data(), DType::bf16, {1, 4, 2, 63}), ko63(outs.data() + kN, DType::bf16, {1, 4, 2, 63});
  EXPECT_EQ(guard(q63, k63, TensorView(fs.data(), DType::f32, {1, 4, 126}), o63, ko63), "head_dim");
}

TEST_F(HeliosRopeGuards, RejectsTableShape) {
  EXPECT_EQ(guard(q, k, TensorView(fs.data(), DType::f32, {1, 4, 64}), qo, ko), "shape");   // D, not 2D
  EXPECT_EQ(guard(q, k, TensorView(fs.data(), DType::f32, {1, 2, 128}), qo, ko), "shape");  // tokens
}

TEST_F(HeliosRopeGuards, RejectsTableDtype) {
  std::vector<bf16_t> bt(4 * 128);
  EXPECT_EQ(guard(q, k, TensorView(bt.data(), DType::bf16, {1, 4, 128}), qo, ko), "dtype");
}

TEST_F(HeliosRopeGuards, RejectsMismatchedK) {
  TensorView k1(qk.data() + kN, DType::bf16, {1, 4, 1, 64});
  EXPECT_EQ(guard(q, k1, freqs, qo, ko), "shape");
}

TEST_F(HeliosRopeGuards, RejectsOverlaps) {
  EXPECT_EQ(guard(q, k, freqs, k, ko), "overlap");  // q_out is k
  TensorView shifted(outs.data() + 64, DType::bf16, {1, 4, 2, 64});
  EXPECT_EQ(guard(q, k, freqs, qo, shifted), "overlap");
}

TEST_F(HeliosRopeGuards, RejectedCallLeavesOutputsIntact) {
  const std::vector<bf16_t> before = outs;
  EXPECT_THROW(helios_qk_rope(q, k, TensorView(fs.data(), DType::f32, {1, 4, 64}), qo, ko), Unsupported);
  for (size_t i = 0; i < outs.size(); ++i) ASSERT_EQ(outs[i].bits, before[i].bits) << i;
}

}  // namespace
}  // namespace dfuse::test
