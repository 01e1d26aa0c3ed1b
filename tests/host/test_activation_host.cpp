// Activation ops on the host backend: fused == eager chain bit for bit over every case, the SiLU
// edge values, and every guard's error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/activation_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/activation.h"

namespace dfuse::test {
namespace {

class ActivationHost : public ::testing::TestWithParam<DType> {};

TEST_P(ActivationHost, SiluMulMatchesEagerChain) {
  uint64_t seed = 300;
  for (const auto& c : small_activation_cases())
    EXPECT_EQ(run_silu_mul_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(ActivationHost, BiasSiluMatchesEagerChain) {
  uint64_t seed = 400;
  for (const auto& c : small_activation_cases())
    EXPECT_EQ(run_bias_silu_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(ActivationHost, BiasGluMatchesEagerChain) {
  uint64_t seed = 500;
  for (const auto& c : small_activation_cases())
    EXPECT_EQ(run_bias_glu_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ActivationHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// silu(-inf) = -inf / (1 + inf) = NaN, silu(inf) = inf, silu(-100) = -100 / inf = -0, as torch.
TEST(ActivationHostArithmetic, SiluEdgeValues) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> a = {-inf, inf, -100.0f, 0.0f}, b(4, 1.0f), out(4);
  TensorView av(a.data(), DType::f32, {4}), bv(b.data(), DType::f32, {4}), ov(out.data(), DType::f32, {4});
  silu_mul(av, bv, ov);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], inf);
  EXPECT_EQ(float_bits(out[2]), 0x80000000u);
  EXPECT_EQ(float_bits(out[3]), 0u);
}

// The bias add rounds to bf16 before the silu: 1 + 2^-9 rounds to 1 in bf16, so the result is
// bf16(silu(1)), not bf16(silu(1.001953125)) (which rounds up one ulp).
TEST(ActivationHostArithmetic, BiasSiluRoundsTheSum) {
  bf16_t x = float_to_bf16(1.0f), bias = float_to_bf16(0.001953125f), out{};
  TensorView xv(&x, DType::bf16, {1}), bv(&bias, DType::bf16, {1}), ov(&out, DType::bf16, {1});
  bias_silu(xv, bv, ov);
  EXPECT_EQ(out.bits, float_to_bf16(1.0f / (1.0f + std::exp(-1.0f))).bits);
}

// ---- guards ----------------------------------------------------------------------------------

struct ActivationGuards : ::testing::Test {
  std::vector<bf16_t> xs = std::vector<bf16_t>(2 * 8 * 16, float_to_bf16(1.0f));
  std::vector<bf16_t> ys = std::vector<bf16_t>(2 * 8 * 16, float_to_bf16(0.5f));
  std::vector<bf16_t> bs = std::vector<bf16_t>(16, float_to_bf16(0.25f));
  std::vector<bf16_t> os = std::vector<bf16_t>(2 * 8 * 16);
  TensorView x{xs.data(), DType::bf16, {2, 8, 16}};
  TensorView y{ys.data(), DType::bf16, {2, 8, 16}};
  TensorView bias{bs.data(), DType::bf16, {16}};
  TensorView out{os.data(), DType::bf16, {2, 8, 16}};
  TensorView half_out{os.data(), DType::bf16, {2, 8, 8}};

  // The guard named in the Unsupported thrown by the kernel; can_use must agree.
  template <typename CanUse, typename Run>
  std::string guard_of(const char* op, CanUse can_use, Run run) {
    std::string why;
    EXPECT_FALSE(can_use(&why));
    EXPECT_NE(why.find(std::string(op) + ": "), std::string::npos) << why;
    try {
      run();
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
  std::string silu_mul_guard(const TensorView& a, const TensorView& b, const TensorView& o) {
    return guard_of(
        "silu_mul", [&](std::string* why) { return can_use_silu_mul(a, b, o, why); },
        [&] { silu_mul(a, b, o); });
  }
  std::string bias_silu_guard(const TensorView& xv, const TensorView& bv, const TensorView& o) {
    return guard_of(
        "bias_silu", [&](std::string* why) { return can_use_bias_silu(xv, bv, o, why); },
        [&] { bias_silu(xv, bv, o); });
  }
  std::string bias_glu_guard(const TensorView& xv, const TensorView* bv, const TensorView& o) {
    return guard_of(
        "bias_glu", [&](std::string* why) { return can_use_bias_glu(xv, bv, o, why); },
        [&] { bias_glu(xv, bv, o); });
  }
};

TEST_F(ActivationGuards, AcceptsTheBaseCases) {
  EXPECT_TRUE(can_use_silu_mul(x, y, out));
  EXPECT_TRUE(can_use_silu_mul(x, y, x));  // in place into a
  EXPECT_TRUE(can_use_silu_mul(x, y, y));  // in place into b
  EXPECT_TRUE(can_use_bias_silu(x, bias, out));
  EXPECT_TRUE(can_use_bias_silu(x, bias, x));
  TensorView glu_bias(bs.data(), DType::bf16, {16});
  EXPECT_TRUE(can_use_bias_glu(x, &glu_bias, half_out));
  EXPECT_TRUE(can_use_bias_glu(x, nullptr, half_out));
}

TEST_F(ActivationGuards, SiluMulAcceptsPackedHalves) {
  // p [2, 8, 16] -> a, b = p[..., :8], p[..., 8:]
  EXPECT_TRUE(can_use_silu_mul(x.narrow(-1, 0, 8), x.narrow(-1, 8, 8), half_out));
}

TEST_F(ActivationGuards, SiluMulRejectsMixedDtype) {
  std::vector<float> f(2 * 8 * 16, 0.5f);
  EXPECT_EQ(silu_mul_guard(x, TensorView(f.data(), DType::f32, {2, 8, 16}), out), "dtype");
}

TEST_F(ActivationGuards, SiluMulRejectsUnsupportedDtype) {
  std::vector<double> d(2 * 8 * 16, 1.0);
  TensorView xd(d.data(), DType::f64, {2, 8, 16});
  EXPECT_EQ(silu_mul_guard(xd, xd, xd), "dtype");
}

TEST_F(ActivationGuards, SiluMulRejectsBroadcastB) {
  std::string why;
  TensorView b(bs.data(), DType::bf16, {1, 1, 16});
  EXPECT_EQ(silu_mul_guard(x, b, out), "shape");
  EXPECT_FALSE(can_use_silu_mul(x, b, out, &why));
  EXPECT_NE(why.find("b must have a's shape"), std::string::npos) << why;
}

TEST_F(ActivationGuards, SiluMulRejectsNonContiguousLastDim) {
  int64_t sizes[] = {2, 8, 8}, strides[] = {128, 16, 2};
  std::string why;
  EXPECT_FALSE(
      can_use_silu_mul(x.restrided(sizes, strides, 3), y.restrided(sizes, strides, 3), half_out, &why));
  EXPECT_NE(why.find("a must be contiguous in its last dim, got stride 2"), std::string::npos) << why;
}

TEST_F(ActivationGuards, SiluMulRejectsRankAboveFour) {
  int64_t sizes[] = {1, 2, 1, 8, 16}, strides[] = {256, 128, 128, 16, 1};
  EXPECT_EQ(silu_mul_guard(x.restrided(sizes, strides, 5), y.restrided(sizes, strides, 5),
                           out.restrided(sizes, strides, 5)),
            "rank");
}

TEST_F(ActivationGuards, SiluMulRejectsPartialOverlap) {
  std::vector<bf16_t> big(2 * 8 * 16 + 1);
  TensorView a(big.data(), DType::bf16, {2, 8, 16}), o(big.data() + 1, DType::bf16, {2, 8, 16});
  EXPECT_EQ(silu_mul_guard(a, y, o), "overlap");
}

TEST_F(ActivationGuards, SiluMulRejectsOutputStraddlingThePackedHalves) {
  // out = p[..., 4:12] shares elements with a = p[..., :8] and b = p[..., 8:] without being either.
  EXPECT_EQ(silu_mul_guard(x.narrow(-1, 0, 8), x.narrow(-1, 8, 8), x.narrow(-1, 4, 8)), "overlap");
}

TEST_F(ActivationGuards, SiluMulWritesInPlaceOfItsPackedHalf) {
  // out = a = p[..., :8] interleaves with b = p[..., 8:] row by row without sharing an element: allowed.
  const TensorView a = x.narrow(-1, 0, 8), b = x.narrow(-1, 8, 8);
  std::vector<bf16_t> expected(2 * 8 * 8);
  const TensorView want(expected.data(), DType::bf16, {2, 8, 8});
  eager::Workspace ws(Device::host());
  eager::silu_mul_chain(a, b, want, ws);
  ASSERT_TRUE(can_use_silu_mul(a, b, a));
  silu_mul(a, b, a);
  for (int64_t r = 0; r < 16; ++r)
    for (int64_t c = 0; c < 8; ++c) ASSERT_EQ(xs[size_t(r * 16 + c)].bits, expected[size_t(r * 8 + c)].bits) << r;
}

TEST_F(ActivationGuards, SiluMulRejectsWrongOutputShape) {
  EXPECT_EQ(silu_mul_guard(x, y, half_out), "shape");
}

TEST_F(ActivationGuards, SiluMulRejectsZeroStrideOutput) {
  int64_t sizes[] = {2, 8, 16}, strides[] = {16, 0, 1};
  EXPECT_EQ(silu_mul_guard(x, y, out.restrided(sizes, strides, 3)), "overlap");
}

TEST_F(ActivationGuards, SiluMulRejectsNegativeStride) {
  int64_t sizes[] = {2, 8, 16}, strides[] = {128, -16, 1};
  TensorView neg(xs.data() + 7 * 16, DType::bf16, sizes, strides, 3);
  EXPECT_EQ(silu_mul_guard(neg, y, out), "stride");
}

TEST_F(ActivationGuards, SiluMulRejectsNullData) {
  TensorView nx(nullptr, DType::bf16, {2, 8, 16});
  EXPECT_EQ(silu_mul_guard(nx, y, out), "data");
}

TEST_F(ActivationGuards, SiluMulRejectsDeviceMismatch) {
  TensorView yc(ys.data(), DType::bf16, {2, 8, 16}, Device::cuda(0));
  EXPECT_EQ(silu_mul_guard(x, yc, out), "device");
}

TEST_F(ActivationGuards, SiluMulRejectsRowsLongerThan32BitIndexing) {
  const int64_t cols = int64_t(1) << 31;
  int64_t sizes[] = {1, cols}, strides[] = {cols, 1};
  EXPECT_EQ(silu_mul_guard(x.restrided(sizes, strides, 2), y.restrided(sizes, strides, 2),
                           out.restrided(sizes, strides, 2)),
            "extent");
}

TEST_F(ActivationGuards, BiasSiluAcceptsChannelFirstBias) {
  // x [2, 4, 4, 8] channel first with bias [4, 1, 1]: one bias value per row.
  int64_t sizes[] = {2, 4, 4, 8}, strides[] = {128, 32, 8, 1};
  TensorView b(bs.data(), DType::bf16, {4, 1, 1});
  EXPECT_TRUE(can_use_bias_silu(x.restrided(sizes, strides, 4), b, out.restrided(sizes, strides, 4)));
}

TEST_F(ActivationGuards, BiasSiluRejectsNonBroadcastableBias) {
  TensorView b(bs.data(), DType::bf16, {8});
  EXPECT_EQ(bias_silu_guard(x, b, out), "broadcast");
}

TEST_F(ActivationGuards, BiasSiluRejectsStridedBias) {
  int64_t sizes[] = {8}, strides[] = {2};
  EXPECT_EQ(bias_silu_guard(x.narrow(-1, 0, 8), bias.restrided(sizes, strides, 1), half_out),
            "last_dim_stride");
}

TEST_F(ActivationGuards, BiasSiluRejectsOutputOverlappingBias) {
  TensorView o(bs.data(), DType::bf16, {16});
  EXPECT_EQ(bias_silu_guard(TensorView(xs.data(), DType::bf16, {16}), bias, o), "overlap");
}

TEST_F(ActivationGuards, BiasSiluRejectsMixedDtype) {
  std::vector<float> f(16, 0.5f);
  EXPECT_EQ(bias_silu_guard(x, TensorView(f.data(), DType::f32, {16}), out), "dtype");
}

TEST_F(ActivationGuards, BiasGluRejectsOddChannels) {
  TensorView x7(xs.data(), DType::bf16, {2, 8, 7}), o(os.data(), DType::bf16, {2, 8, 3});
  EXPECT_EQ(bias_glu_guard(x7, nullptr, o), "chunk");
}

TEST_F(ActivationGuards, BiasGluRejectsHalfBias) {
  TensorView b(bs.data(), DType::bf16, {8});
  EXPECT_EQ(bias_glu_guard(x, &b, half_out), "broadcast");
  TensorView b1(bs.data(), DType::bf16, {1});
  EXPECT_EQ(bias_glu_guard(x, &b1, half_out), "bias_channels");
}

TEST_F(ActivationGuards, BiasGluRejectsFullWidthOutput) {
  std::string why;
  EXPECT_EQ(bias_glu_guard(x, &bias, out), "shape");
  EXPECT_FALSE(can_use_bias_glu(x, &bias, out, &why));
  EXPECT_NE(why.find("out must have x[..., :C]'s shape [2, 8, 8]"), std::string::npos) << why;
}

TEST_F(ActivationGuards, BiasGluRejectsOutputIntoX) {
  EXPECT_EQ(bias_glu_guard(x, &bias, x.narrow(-1, 0, 8)), "overlap");
}

TEST_F(ActivationGuards, BiasGluRejectsNonContiguousLastDim) {
  int64_t sizes[] = {2, 8, 8}, strides[] = {128, 16, 2};
  EXPECT_EQ(
      bias_glu_guard(x.restrided(sizes, strides, 3), nullptr, TensorView(os.data(), DType::bf16, {2, 8, 4})),
      "last_dim_stride");
}

TEST_F(ActivationGuards, BiasGluRejectsDeviceMismatch) {
  TensorView b(bs.data(), DType::bf16, {16}, Device::cuda(0));
  EXPECT_EQ(bias_glu_guard(x, &b, half_out), "device");
}

}  // namespace
}  // namespace dfuse::test
