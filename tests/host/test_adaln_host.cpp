// adaLN ops on the host backend: fused == eager chain bit for bit over every case, and every
// guard's error.
#include <gtest/gtest.h>

#include "common/adaln_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/adaln.h"

namespace dfuse::test {
namespace {

class AdalnHost : public ::testing::TestWithParam<DType> {};

TEST_P(AdalnHost, ModulateMatchesEagerChain) {
  uint64_t seed = 100;
  for (const auto& c : small_adaln_cases()) EXPECT_EQ(run_modulate_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(AdalnHost, ResidualGateAddMatchesEagerChain) {
  uint64_t seed = 200;
  for (const auto& c : small_adaln_cases())
    EXPECT_EQ(run_residual_gate_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AdalnHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The arithmetic itself, on values whose roundings are known: 1 + scale must round to bf16
// before the multiply, and the product before the add.
TEST(AdalnHostArithmetic, ModulateRoundsAfterEveryOp) {
  // scale = 2^-9 in bf16: 1 + 2^-9 is not representable in bf16 (8 bits) and rounds to 1.0,
  // so out = x * 1 + shift; a fused float computation would give x * 1.001953125.
  bf16_t x = float_to_bf16(3.0f), scale = float_to_bf16(0.001953125f), shift = float_to_bf16(0.0f);
  bf16_t out{};
  TensorView xv(&x, DType::bf16, {1, 1, 1}), sv(&scale, DType::bf16, {1, 1, 1}), hv(&shift, DType::bf16, {1, 1, 1}),
      ov(&out, DType::bf16, {1, 1, 1});
  modulate_scale_shift(xv, sv, hv, ov);
  EXPECT_EQ(out.bits, float_to_bf16(3.0f).bits);
}

TEST(AdalnHostArithmetic, ResidualGateSignedZero) {
  // -0 + (+0 * 1) = +0 ; -0 + (-0) = -0: the sign of zero must follow IEEE addition.
  bf16_t r = float_to_bf16(-0.0f), g = float_to_bf16(-1.0f), u = float_to_bf16(0.0f), out{};
  TensorView rv(&r, DType::bf16, {1, 1}), gv(&g, DType::bf16, {1, 1}), uv(&u, DType::bf16, {1, 1}),
      ov(&out, DType::bf16, {1, 1});
  residual_gate_add(rv, gv, uv, ov);
  EXPECT_EQ(out.bits, 0x8000);  // -0 + (-1 * +0 = -0) = -0
}

// ---- guards ----------------------------------------------------------------------------------

struct GuardFixture : ::testing::Test {
  std::vector<bf16_t> xs = std::vector<bf16_t>(2 * 8 * 16, float_to_bf16(1.0f));
  std::vector<bf16_t> ss = std::vector<bf16_t>(2 * 16, float_to_bf16(0.5f));
  std::vector<bf16_t> os = std::vector<bf16_t>(2 * 8 * 16);
  std::vector<float> fs = std::vector<float>(2 * 16, 0.5f);
  TensorView x{xs.data(), DType::bf16, {2, 8, 16}};
  TensorView s{ss.data(), DType::bf16, {2, 1, 16}};
  TensorView out{os.data(), DType::bf16, {2, 8, 16}};

  // The guard named in the Unsupported thrown by the kernel; can_use must agree.
  std::string modulate_guard(const TensorView& xv, const TensorView& sv, const TensorView& hv, const TensorView& ov) {
    std::string why;
    EXPECT_FALSE(can_use_modulate_scale_shift(xv, sv, hv, ov, &why));
    EXPECT_NE(why.find("modulate_scale_shift: "), std::string::npos) << why;
    try {
      modulate_scale_shift(xv, sv, hv, ov);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(GuardFixture, AcceptsTheBaseCase) { EXPECT_TRUE(can_use_modulate_scale_shift(x, s, s, out)); }

TEST_F(GuardFixture, RejectsMixedDtype) {
  TensorView f(fs.data(), DType::f32, {2, 1, 16});
  EXPECT_EQ(modulate_guard(x, f, s, out), "dtype");
}

TEST_F(GuardFixture, RejectsUnsupportedDtype) {
  std::vector<double> d(2 * 8 * 16, 1.0);
  TensorView xd(d.data(), DType::f64, {2, 8, 16});
  EXPECT_EQ(modulate_guard(xd, s, s, out), "dtype");
}

TEST_F(GuardFixture, RejectsNonContiguousLastDim) {
  int64_t sizes[] = {2, 8, 8}, strides[] = {128, 16, 2};
  TensorView xs2 = x.restrided(sizes, strides, 3);
  int64_t ssz[] = {2, 1, 8}, sst[] = {16, 16, 1};
  std::string why;
  EXPECT_FALSE(can_use_modulate_scale_shift(xs2, s.restrided(ssz, sst, 3), s.restrided(ssz, sst, 3),
                                            out.restrided(sizes, strides, 3), &why));
  EXPECT_NE(why.find("x must be contiguous in its last dim, got stride 2"), std::string::npos) << why;
}

TEST_F(GuardFixture, RejectsNonBroadcastableScale) {
  int64_t sizes[] = {2, 3, 16}, strides[] = {48, 16, 1};
  EXPECT_EQ(modulate_guard(x, s.restrided(sizes, strides, 3), s, out), "broadcast");
}

TEST_F(GuardFixture, RejectsWrongOutputShape) {
  int64_t sizes[] = {2, 4, 16}, strides[] = {64, 16, 1};
  EXPECT_EQ(modulate_guard(x, s, s, out.restrided(sizes, strides, 3)), "shape");
}

TEST_F(GuardFixture, RejectsRankAboveFour) {
  int64_t sizes[] = {1, 2, 1, 8, 16}, strides[] = {256, 128, 128, 16, 1};
  EXPECT_EQ(modulate_guard(x.restrided(sizes, strides, 5), s, s, out.restrided(sizes, strides, 5)), "rank");
}

TEST_F(GuardFixture, RejectsOutputOverlappingScale) {
  TensorView o(ss.data(), DType::bf16, {2, 1, 16});
  int64_t sizes[] = {2, 1, 16}, strides[] = {16, 16, 1};
  EXPECT_EQ(modulate_guard(x.restrided(sizes, strides, 3), s, s, o), "overlap");
}

TEST_F(GuardFixture, RejectsPartialOverlapWithX) {
  std::vector<bf16_t> big(2 * 8 * 16 + 1);
  TensorView xb(big.data(), DType::bf16, {2, 8, 16}), ob(big.data() + 1, DType::bf16, {2, 8, 16});
  EXPECT_EQ(modulate_guard(xb, s, s, ob), "overlap");
}

TEST_F(GuardFixture, RejectsZeroStrideOutput) {
  int64_t sizes[] = {2, 8, 16}, strides[] = {16, 0, 1};
  EXPECT_EQ(modulate_guard(x, s, s, out.restrided(sizes, strides, 3)), "overlap");
}

TEST_F(GuardFixture, RejectsOutputWhoseRowsOverlap) {
  // an as_strided output whose rows of 16 start 8 elements apart
  int64_t sizes[] = {2, 8, 16}, strides[] = {64, 8, 1};
  EXPECT_EQ(modulate_guard(x, s, s, out.restrided(sizes, strides, 3)), "overlap");
}

TEST_F(GuardFixture, RejectsNegativeStride) {
  int64_t sizes[] = {2, 8, 16}, strides[] = {128, -16, 1};
  TensorView neg(xs.data() + 7 * 16, DType::bf16, sizes, strides, 3);
  EXPECT_EQ(modulate_guard(neg, s, s, out), "stride");
}

TEST_F(GuardFixture, RejectsNullData) {
  TensorView nx(nullptr, DType::bf16, {2, 8, 16});
  EXPECT_EQ(modulate_guard(nx, s, s, out), "data");
}

TEST_F(GuardFixture, RejectsDeviceMismatch) {
  TensorView sc(ss.data(), DType::bf16, {2, 1, 16}, Device::cuda(0));
  EXPECT_EQ(modulate_guard(x, sc, s, out), "device");
}

TEST_F(GuardFixture, RejectsRowsLongerThan32BitIndexing) {
  const int64_t cols = int64_t(1) << 31;
  int64_t sizes[] = {1, cols}, strides[] = {cols, 1};
  int64_t ssz[] = {1, 1}, sst[] = {1, 1};
  EXPECT_EQ(modulate_guard(x.restrided(sizes, strides, 2), s.restrided(ssz, sst, 2), s.restrided(ssz, sst, 2),
                           out.restrided(sizes, strides, 2)),
            "extent");
}

TEST_F(GuardFixture, ResidualGateRejectsBroadcastUpdate) {
  std::string why;
  EXPECT_FALSE(can_use_residual_gate_add(x, s, s, out, &why));
  EXPECT_NE(why.find("update must have residual's shape"), std::string::npos) << why;
  EXPECT_THROW(residual_gate_add(x, s, s, out), Unsupported);
}

TEST_F(GuardFixture, ResidualGateAcceptsPerTokenGate) {
  std::vector<bf16_t> g(2 * 8, float_to_bf16(0.25f));
  TensorView gv(g.data(), DType::bf16, {2, 8, 1});
  EXPECT_TRUE(can_use_residual_gate_add(x, gv, x, out));
}

TEST_F(GuardFixture, InPlaceNeedsTheIdenticalView) {
  EXPECT_TRUE(can_use_modulate_scale_shift(x, s, s, x));
  std::string why;
  EXPECT_FALSE(can_use_residual_gate_add(x, s, x, x, &why));  // out is `update`, not in-place-able
}

}  // namespace
}  // namespace dfuse::test
