// RMSNorm ops on the host backend: fused == eager chain bit for bit over every case and both RMSNorm
// chains, Reduce.cuh's configuration, and every guard's error.
#include <gtest/gtest.h>

#include <bit>
#include <limits>
#include <tuple>
#include <vector>

#include "common/rms_norm_arith.h"
#include "common/rmsnorm_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse::test {
namespace {

class RmsNormHost : public ::testing::TestWithParam<std::tuple<DType, RmsNormChain>> {};

TEST_P(RmsNormHost, ScaleShiftMatchesEagerChain) {
  const auto [dtype, chain] = GetParam();
  uint64_t seed = 300;
  for (const auto& c : small_rmsnorm_cases())
    EXPECT_EQ(run_rmsnorm_scale_shift_case(Device::host(), dtype, chain, c, seed++), "") << c.name;
}

TEST_P(RmsNormHost, QkRmsNormMatchesEagerChain) {
  const auto [dtype, chain] = GetParam();
  uint64_t seed = 500;
  for (const auto& c : small_qk_rmsnorm_cases())
    EXPECT_EQ(run_qk_rmsnorm_case(Device::host(), dtype, chain, c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    DtypesAndChains, RmsNormHost,
    ::testing::Combine(::testing::Values(DType::bf16, DType::f16, DType::f32),
                       ::testing::Values(RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed)),
    [](const auto& info) {
      return std::string(dtype_name(std::get<0>(info.param))) + "_" + rms_norm_chain_name(std::get<1>(info.param));
    });

class RmsNormStorageHost : public ::testing::TestWithParam<DType> {};

TEST_P(RmsNormStorageHost, ScaleMatchesEagerChain) {
  uint64_t seed = 800;
  for (const auto& c : small_rmsnorm_cases())
    EXPECT_EQ(run_rmsnorm_scale_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(RmsNormStorageHost, TanhResidualMatchesEagerChain) {
  uint64_t seed = 900;
  for (const auto& c : small_rmsnorm_cases())
    EXPECT_EQ(run_rmsnorm_tanh_residual_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RmsNormStorageHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST_P(RmsNormStorageHost, QkRmsNormMatchesEagerChain) {
  uint64_t seed = 1000;
  for (const auto& c : small_qk_rmsnorm_cases())
    if (c.Dh == 128) {
      EXPECT_EQ(run_qk_rmsnorm_case(Device::host(), GetParam(), RmsNormChain::storage_dtype, c, seed++), "") << c.name;
    }
}

TEST(RmsNormStorageGuards, QkStorageChainNeedsRowsOf128) {
  std::vector<bf16_t> qs(16 * 256, float_to_bf16(1.0f)), os(16 * 256), os2(16 * 256);
  TensorView q(qs.data(), DType::bf16, {16, 256}), o(os.data(), DType::bf16, {16, 256}),
      o2(os2.data(), DType::bf16, {16, 256});
  std::string why;
  EXPECT_FALSE(can_use_qk_rmsnorm(RmsNormChain::storage_dtype, q, q, nullptr, nullptr, 1e-6, o, o2, &why));
  EXPECT_NE(why.find("implemented for 128"), std::string::npos) << why;
}

// bf16 mean of bf16 squares: 16-byte vectors are 8 elements, so rows of 128 get 16 lanes.
TEST(RmsNormHostArithmetic, MeanReduceConfigurationFor16BitInput) {
  EXPECT_EQ(detail::mean_reduce_config(4096, 128, 8).lanes, 16);
  EXPECT_EQ(detail::mean_reduce_config(4128, 3840, 8).lanes, 32);
  EXPECT_EQ(detail::mean_reduce_config(1, 3840, 8).lanes, 256);
}

// The storage-dtype chain rounds the mean to bf16: a row whose exact mean square is not a bf16 value
// gives a different rstd than the float chain would.
TEST(RmsNormHostArithmetic, StorageChainRoundsTheMean) {
  // x = [1, 1, ..., 1, 1.0078125] (128 elements): mean of squares 1 + (1.0078125^2 - 1) / 128 is not a bf16.
  std::vector<bf16_t> x(128, float_to_bf16(1.0f)), s(128, float_to_bf16(1.0f)), a(128), b(128);
  x[127] = float_to_bf16(1.0078125f);
  TensorView xv(x.data(), DType::bf16, {1, 128}), sv(s.data(), DType::bf16, {1, 128}), av(a.data(), DType::bf16, {1, 128});
  rmsnorm_scale(xv, nullptr, 0.0, sv, av);
  // mean rounds to 1.0 in bf16, so rstd = 1 and every output equals x.
  for (int i = 0; i < 128; ++i) EXPECT_EQ(a[size_t(i)].bits, x[size_t(i)].bits) << i;
}

// Reduce.cuh's configuration for the shapes the reference verified (reference/pytorch-eager-
// arithmetic.md §2.2): 32 lanes from 16 rows up, wider blocks for few rows, split only for rows of
// 8192 and more.
TEST(RmsNormHostArithmetic, MeanReduceConfiguration) {
  using detail::mean_reduce_config;
  EXPECT_EQ(mean_reduce_config(4608, 3072).lanes, 32);
  EXPECT_EQ(mean_reduce_config(4096, 128).lanes, 32);
  EXPECT_TRUE(mean_reduce_config(4096, 128).vectorized);
  EXPECT_FALSE(mean_reduce_config(4608, 96).vectorized);
  EXPECT_EQ(mean_reduce_config(1, 3072).lanes, 512);
  EXPECT_EQ(mean_reduce_config(4, 3072).lanes, 128);
  EXPECT_EQ(mean_reduce_config(7, 1536).lanes, 128);
  EXPECT_EQ(mean_reduce_config(3, 5120).lanes, 256);
  EXPECT_FALSE(mean_reduce_config(75600, 5120).split);
  EXPECT_FALSE(mean_reduce_config(4608, 8160).split);
  EXPECT_TRUE(mean_reduce_config(4608, 8192).split);
  EXPECT_EQ(detail::mean_factor(4608, 3072), 1.0f / 3072.0f);
}

// The two RMSNorm chains round differently (sum of squares by fma vs a mean of rounded squares in
// another order; one rounding vs two before the weight): on a large random bf16 tensor they must
// differ somewhere, so a test that confuses them fails.
TEST(RmsNormHostArithmetic, TorchAndDecomposedChainsDiffer) {
  auto x = random_tensor(Device::host(), DType::bf16, {64, 3072}, {}, 0, {7, 2.0, false});
  auto w = random_tensor(Device::host(), DType::bf16, {3072}, {}, 0, {8, 0.7, false});
  auto a = poisoned_tensor(Device::host(), DType::bf16, {64, 3072}, 0xFF);
  auto b = poisoned_tensor(Device::host(), DType::bf16, {64, 3072}, 0xFF);
  eager::Workspace ws(Device::host());
  eager::rms_norm(x.view, &w.view, 1e-6, a.view);
  eager::rms_norm_decomposed_chain(x.view, &w.view, 1e-6, b.view, ws);
  EXPECT_NE(compare_bits(a.view, b.view), "");
}

// The mean replica's value for a row of ones: 3072 * 1 * (1/3072) in float.
TEST(RmsNormHostArithmetic, MeanOfOnes) {
  std::vector<float> x(5 * 3072, 1.0f), out(5, 0.0f);
  TensorView xv(x.data(), DType::f32, {5, 3072}), ov(out.data(), DType::f32, {5});
  eager::mean_last_dim(xv, ov);
  for (float v : out) EXPECT_EQ(v, 3072.0f * (1.0f / 3072.0f));
}

// F.rms_norm's mean, sum / n, for n known at compile time: taken as sum * (1 / n) where n is a power of two. The
// same bits as the runtime form's IEEE quotient for every sum: random magnitudes, subnormal quotients (where both
// round), the largest floats, zero, Inf and NaN; n = 3072 (not a power of two) divides as the runtime form does.
template <int64_t kN>
void expect_compile_time_rstd_is_the_quotient(const std::vector<float>& sums) {
  for (float eps : {0.0f, 1e-6f})  // eps = 0: the mean itself decides (1e-6 would hide means below ~6e-14)
    for (float s : sums)
      EXPECT_EQ(std::bit_cast<uint32_t>(detail::torch_rms_norm_rstd<kN>(s, eps)),
                std::bit_cast<uint32_t>(detail::rsqrt_f(detail::add_rn(s / float(kN), eps))))
          << "n " << kN << ", sum " << s << ", eps " << eps;
}

TEST(RmsNormHostArithmetic, PowerOfTwoMeanIsTheQuotient) {
  std::vector<float> sums = {0.0f, 1.0f, 3.0f, 1e-45f, 1e-40f, 3.4e-38f, 1.17549435e-38f, 3.4028235e38f,
                             std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  uint32_t state = 12345;
  for (int i = 0; i < 4000; ++i) {  // every exponent, random mantissas
    state = state * 1664525u + 1013904223u;
    sums.push_back(std::bit_cast<float>(state & 0x7fffffffu));
  }
  expect_compile_time_rstd_is_the_quotient<1>(sums);
  expect_compile_time_rstd_is_the_quotient<2>(sums);
  expect_compile_time_rstd_is_the_quotient<128>(sums);
  expect_compile_time_rstd_is_the_quotient<256>(sums);
  expect_compile_time_rstd_is_the_quotient<512>(sums);
  expect_compile_time_rstd_is_the_quotient<3072>(sums);
  expect_compile_time_rstd_is_the_quotient<4096>(sums);
  expect_compile_time_rstd_is_the_quotient<int64_t(1) << 24>(sums);
}

// The four warps' sums combined as (w0 + w2) + (w1 + w3), absent warps holding +0: leaving those terms out gives
// the same bits for every sum a sum of squares can be (+0, positive, +Inf, NaN), and the order stays PyTorch's
// (1, 2^-24 and 1.5 * 2^-24 round differently in other orders).
TEST(RmsNormHostArithmetic, WarpsTotalWithoutAbsentWarps) {
  const float values[] = {0.0f, 1e-45f, 0x1p-24f, 0x1.8p-24f, 0.75f, 1.0f, 3.0f, 1e30f, 3.4028235e38f,
                          std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  const auto bits = [](float v) { return std::bit_cast<uint32_t>(v); };
  for (float a : values)
    for (float b : values)
      for (float c : values) {
        const float one[4] = {a, 0.0f, 0.0f, 0.0f}, two[4] = {a, b, 0.0f, 0.0f}, three[4] = {a, b, c, 0.0f};
        EXPECT_EQ(bits(detail::torch_rms_norm_warps_total<1>(one)), bits((a + 0.0f) + (0.0f + 0.0f)));
        EXPECT_EQ(bits(detail::torch_rms_norm_warps_total<2>(two)), bits((a + 0.0f) + (b + 0.0f)));
        EXPECT_EQ(bits(detail::torch_rms_norm_warps_total<3>(three)), bits((a + c) + (b + 0.0f)));
        const float four[4] = {a, b, c, a};
        EXPECT_EQ(bits(detail::torch_rms_norm_warps_total<4>(four)), bits((a + c) + (b + a)));
      }
}

// ---- guards ----------------------------------------------------------------------------------

TensorView restrided(const TensorView& t, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
  return t.restrided(sizes.data(), strides.data(), int(sizes.size()));
}

struct RmsGuardFixture : ::testing::Test {
  std::vector<bf16_t> xs = std::vector<bf16_t>(2 * 8 * 16, float_to_bf16(1.0f));
  std::vector<bf16_t> ws = std::vector<bf16_t>(16, float_to_bf16(1.0f));
  std::vector<bf16_t> ss = std::vector<bf16_t>(2 * 16, float_to_bf16(0.5f));
  std::vector<bf16_t> os = std::vector<bf16_t>(2 * 8 * 16);
  TensorView x{xs.data(), DType::bf16, {2, 8, 16}};
  TensorView w{ws.data(), DType::bf16, {16}};
  TensorView s{ss.data(), DType::bf16, {2, 1, 16}};
  TensorView out{os.data(), DType::bf16, {2, 8, 16}};

  std::string guard(RmsNormChain chain, const TensorView& xv, const TensorView* wv, double eps, const TensorView& sv,
                    const TensorView& ov) {
    std::string why;
    EXPECT_FALSE(can_use_rmsnorm_scale_shift(chain, xv, wv, eps, sv, sv, ov, &why));
    EXPECT_NE(why.find("rmsnorm_scale_shift: "), std::string::npos) << why;
    try {
      rmsnorm_scale_shift(chain, xv, wv, eps, sv, sv, ov);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(RmsGuardFixture, AcceptsTheBaseCase) {
  EXPECT_TRUE(can_use_rmsnorm_scale_shift(RmsNormChain::torch_rms_norm, x, &w, 1e-6, s, s, out));
  EXPECT_TRUE(can_use_rmsnorm_scale_shift(RmsNormChain::diffusers_decomposed, x, nullptr, 1e-6, s, s, out));
}

TEST_F(RmsGuardFixture, RejectsWeightOfWrongShape) {
  TensorView w8(ws.data(), DType::bf16, {8});
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, x, &w8, 1e-6, s, out), "shape");
}

TEST_F(RmsGuardFixture, RejectsWeightOfOtherDtype) {
  std::vector<float> wf(16, 1.0f);
  TensorView wv(wf.data(), DType::f32, {16});
  EXPECT_EQ(guard(RmsNormChain::diffusers_decomposed, x, &wv, 1e-6, s, out), "dtype");
}

TEST_F(RmsGuardFixture, RejectsStridedWeight) {
  TensorView x8 = restrided(x, {2, 8, 8}, {128, 16, 1});
  TensorView s8 = restrided(s, {2, 1, 8}, {16, 16, 1});
  TensorView o8 = restrided(out, {2, 8, 8}, {64, 8, 1});
  TensorView wv = restrided(w, {8}, {2});
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, x8, &wv, 1e-6, s8, o8), "layout");
}

TEST_F(RmsGuardFixture, RejectsNegativeOrNonFiniteEps) {
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, x, &w, -1e-6, s, out), "eps");
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, x, &w, 1.0 / 0.0, s, out), "eps");
}

TEST_F(RmsGuardFixture, RejectsRowsLongerThan8192) {
  std::vector<bf16_t> big(8200), bo(8200), bs(8200);
  TensorView xv(big.data(), DType::bf16, {1, 8200}), ov(bo.data(), DType::bf16, {1, 8200}),
      sv(bs.data(), DType::bf16, {1, 8200});
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, xv, nullptr, 1e-6, sv, ov), "extent");
}

TEST_F(RmsGuardFixture, RejectsDecomposedMeanThatSplitsRows) {
  // 16 rows of 8192: Reduce.cuh splits each row across warps, an order not reproduced.
  std::vector<bf16_t> big(16 * 8192), bo(16 * 8192), bs(8192);
  TensorView xv(big.data(), DType::bf16, {16, 8192}), ov(bo.data(), DType::bf16, {16, 8192}),
      sv(bs.data(), DType::bf16, {1, 8192});
  EXPECT_EQ(guard(RmsNormChain::diffusers_decomposed, xv, nullptr, 1e-6, sv, ov), "extent");
  EXPECT_TRUE(can_use_rmsnorm_scale_shift(RmsNormChain::torch_rms_norm, xv, nullptr, 1e-6, sv, sv, ov));
}

TEST_F(RmsGuardFixture, RejectsNonContiguousLastDim) {
  TensorView xs2 = restrided(x, {2, 8, 8}, {128, 16, 2});
  TensorView s8 = restrided(s, {2, 1, 8}, {16, 16, 1});
  TensorView o8 = restrided(out, {2, 8, 8}, {64, 8, 1});
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, xs2, nullptr, 1e-6, s8, o8), "last_dim_stride");
}

TEST_F(RmsGuardFixture, RejectsOutputOverlappingWeight) {
  TensorView o(ws.data(), DType::bf16, {1, 1, 16});
  TensorView x1 = restrided(x, {1, 1, 16}, {16, 16, 1});
  TensorView s1 = restrided(s, {1, 1, 16}, {16, 16, 1});
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, x1, &w, 1e-6, s1, o), "overlap");
}

TEST_F(RmsGuardFixture, RejectsWrongOutputShape) {
  TensorView o = restrided(out, {2, 4, 16}, {64, 16, 1});
  EXPECT_EQ(guard(RmsNormChain::diffusers_decomposed, x, &w, 1e-6, s, o), "shape");
}

TEST(RmsNormStorageGuards, ScaleShiftRefusesTheStorageChain) {
  std::vector<bf16_t> xs(4 * 128, float_to_bf16(1.0f)), os(4 * 128), ss(128, float_to_bf16(1.0f));
  TensorView x(xs.data(), DType::bf16, {1, 4, 128}), o(os.data(), DType::bf16, {1, 4, 128}),
      sc(ss.data(), DType::bf16, {1, 1, 128});
  std::string why;
  EXPECT_FALSE(can_use_rmsnorm_scale_shift(RmsNormChain::storage_dtype, x, nullptr, 1e-6, sc, sc, o, &why));
  EXPECT_NE(why.find("not the storage_dtype chain"), std::string::npos) << why;
  EXPECT_TRUE(can_use_rmsnorm_scale(x, nullptr, 1e-6, sc, o));
  EXPECT_TRUE(can_use_rmsnorm_tanh_residual(x, sc, x, nullptr, 1e-6, o));
}

TEST(RmsNormStorageGuards, TanhResidualRefusesOutputOverY) {
  std::vector<bf16_t> ys(4 * 128, float_to_bf16(1.0f)), rs(4 * 128), ss(128, float_to_bf16(1.0f));
  TensorView y(ys.data(), DType::bf16, {1, 4, 128}), r(rs.data(), DType::bf16, {1, 4, 128}),
      g(ss.data(), DType::bf16, {1, 1, 128});
  std::string why;
  EXPECT_FALSE(can_use_rmsnorm_tanh_residual(r, g, y, nullptr, 1e-6, y, &why));
  EXPECT_NE(why.find("overlap"), std::string::npos) << why;
  EXPECT_TRUE(can_use_rmsnorm_tanh_residual(r, g, y, nullptr, 1e-6, r));  // in place on the residual
}

TEST(RmsNormStorageGuards, TanhResidualRefusesBroadcastResidual) {
  std::vector<bf16_t> ys(4 * 128, float_to_bf16(1.0f)), os(4 * 128), ss(128, float_to_bf16(1.0f));
  TensorView y(ys.data(), DType::bf16, {1, 4, 128}), o(os.data(), DType::bf16, {1, 4, 128}),
      g(ss.data(), DType::bf16, {1, 1, 128});
  std::string why;
  EXPECT_FALSE(can_use_rmsnorm_tanh_residual(g, g, y, nullptr, 1e-6, o, &why));
  EXPECT_NE(why.find("residual"), std::string::npos) << why;
}

// ---- qk_rmsnorm guards ---------------------------------------------------------------------------

struct QkGuardFixture : ::testing::Test {
  std::vector<bf16_t> qs = std::vector<bf16_t>(2 * 16 * 2 * 128, float_to_bf16(1.0f));
  std::vector<bf16_t> ks = std::vector<bf16_t>(2 * 16 * 2 * 128, float_to_bf16(1.0f));
  std::vector<bf16_t> qo = std::vector<bf16_t>(2 * 16 * 2 * 128);
  std::vector<bf16_t> ko = std::vector<bf16_t>(2 * 16 * 2 * 128);
  std::vector<bf16_t> ws = std::vector<bf16_t>(128, float_to_bf16(1.0f));
  TensorView q{qs.data(), DType::bf16, {2, 16, 2, 128}};
  TensorView k{ks.data(), DType::bf16, {2, 16, 2, 128}};
  TensorView q_out{qo.data(), DType::bf16, {2, 16, 2, 128}};
  TensorView k_out{ko.data(), DType::bf16, {2, 16, 2, 128}};
  TensorView w{ws.data(), DType::bf16, {128}};

  std::string guard(RmsNormChain chain, const TensorView& qv, const TensorView& kv, const TensorView* wv,
                    const TensorView& qov, const TensorView& kov) {
    std::string why;
    EXPECT_FALSE(can_use_qk_rmsnorm(chain, qv, kv, wv, wv, 1e-6, qov, kov, &why));
    EXPECT_NE(why.find("qk_rmsnorm: "), std::string::npos) << why;
    try {
      qk_rmsnorm(chain, qv, kv, wv, wv, 1e-6, qov, kov);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(QkGuardFixture, AcceptsTheBaseCase) {
  EXPECT_TRUE(can_use_qk_rmsnorm(RmsNormChain::diffusers_decomposed, q, k, &w, &w, 1e-6, q_out, k_out));
  EXPECT_TRUE(can_use_qk_rmsnorm(RmsNormChain::torch_rms_norm, q, k, nullptr, nullptr, 1e-6, q_out, k_out));
}

TEST_F(QkGuardFixture, RejectsHeadDimNotAMultipleOf128) {
  auto q64 = restrided(q, {2, 16, 4, 64}, {8192, 256, 64, 1});
  auto k64 = restrided(k, {2, 16, 4, 64}, {8192, 256, 64, 1});
  auto qo64 = restrided(q_out, {2, 16, 4, 64}, {8192, 256, 64, 1});
  auto ko64 = restrided(k_out, {2, 16, 4, 64}, {8192, 256, 64, 1});
  EXPECT_EQ(guard(RmsNormChain::diffusers_decomposed, q64, k64, nullptr, qo64, ko64), "extent");
}

TEST_F(QkGuardFixture, RejectsDecomposedMeanWiderThanAWarp) {
  // 6 rows of 256: Reduce.cuh gives each row 64 lanes (a warp covers 32). Rows of 128 always get 32.
  auto small = [](const TensorView& t) { return restrided(t, {1, 3, 2, 256}, {1536, 512, 256, 1}); };
  EXPECT_EQ(guard(RmsNormChain::diffusers_decomposed, small(q), small(k), nullptr, small(q_out), small(k_out)),
            "extent");
  EXPECT_TRUE(can_use_qk_rmsnorm(RmsNormChain::torch_rms_norm, small(q), small(k), nullptr, nullptr, 1e-6,
                                 small(q_out), small(k_out)));
  auto tiny = [](const TensorView& t) { return restrided(t, {1, 3, 2, 128}, {768, 256, 128, 1}); };
  EXPECT_TRUE(can_use_qk_rmsnorm(RmsNormChain::diffusers_decomposed, tiny(q), tiny(k), &w, &w, 1e-6, tiny(q_out),
                                 tiny(k_out)));
}

TEST_F(QkGuardFixture, RejectsTorchChainOnMisalignedContiguousQ) {
  TensorView qm(qs.data() + 1, DType::bf16, {1, 16, 1, 128});
  auto small = [](const TensorView& t) { return restrided(t, {1, 16, 1, 128}, {2048, 128, 128, 1}); };
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, qm, small(k), nullptr, small(q_out), small(k_out)), "alignment");
}

TEST_F(QkGuardFixture, RejectsShapeMismatch) {
  auto k1 = restrided(k, {2, 16, 1, 128}, {4096, 256, 128, 1});
  EXPECT_EQ(guard(RmsNormChain::diffusers_decomposed, q, k1, nullptr, q_out, k1), "shape");
}

TEST_F(QkGuardFixture, RejectsOutputOverlappingTheOtherInput) {
  EXPECT_EQ(guard(RmsNormChain::diffusers_decomposed, q, k, nullptr, k, k_out), "overlap");
}

}  // namespace
}  // namespace dfuse::test
