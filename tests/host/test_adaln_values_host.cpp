// adaLN value ops on the host backend: fused == the eager chain's replica bit for bit over every
// case (timestep_embedding: within its stated bound), known roundings, and every guard's error.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "common/adaln_values_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/adaln.h"

namespace dfuse::test {
namespace {

class AdalnValuesHost : public ::testing::TestWithParam<DType> {};

TEST_P(AdalnValuesHost, TembTableSlicesMatchesEagerChain) {
  uint64_t seed = 700;
  for (const auto& c : small_temb_slices_cases())
    EXPECT_EQ(run_temb_slices_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(AdalnValuesHost, Ltx2AdaValuesMatchesEagerChain) {
  uint64_t seed = 800;
  for (DType table : {DType::bf16, DType::f16, DType::f32})
    for (const auto& c : small_ltx2_cases())
      EXPECT_EQ(run_ltx2_case(Device::host(), table, GetParam(), c, seed++), "")
          << c.name << " table " << dtype_name(table);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AdalnValuesHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(AdalnValuesHostScaledResidual, MatchesEagerChain) {
  uint64_t seed = 900;
  for (const auto& c : small_scaled_residual_cases())
    EXPECT_EQ(run_scaled_residual_case(Device::host(), c, seed++), "") << c.name;
}

TEST(AdalnValuesHostTimestepEmbedding, WithinBoundOfTheFp32Chain) {
  uint64_t seed = 1000;
  double worst = 0;
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i64}) {
    for (const auto& c : timestep_embedding_cases()) {
      double w = 0;
      EXPECT_EQ(run_timestep_embedding_case(Device::host(), t, c, seed++, &w), "") << c.name << " " << dtype_name(t);
      worst = std::max(worst, w);
    }
  }
  // The measured error, for the contract: the bound is 2^-20 (9.5e-7) of max(1, |scale * t|).
  std::printf("timestep_embedding host: worst |out - ref| / max(1, |scale * t|) = %.3g\n", worst);
  EXPECT_GT(worst, 0.0);  // the reference is independent: libm and the correctly rounded values differ somewhere
}

// ---- arithmetic on values whose roundings are known ----------------------------------------

TEST(AdalnValuesHostArithmetic, Ltx2CastsTheTableBeforeTheAdd) {
  // table 1 + 2^-8 + 2^-10 (f32) casts to bf16 1 + 2^-7; plus timestep -2^-9 gives 1 + 3 * 2^-9,
  // which rounds to 1 + 2^-7. Without the cast the f32 sum 1 + 2^-9 + 2^-10 would round to 1.
  float table = 1.0f + 0.00390625f + 0.0009765625f;
  bf16_t timestep = float_to_bf16(-0.001953125f), out{};
  TensorView tv(&table, DType::f32, {1, 1}), sv(&timestep, DType::bf16, {1, 1, 1});
  std::array<TensorView, 1> ov = {TensorView(&out, DType::bf16, {1, 1, 1})};
  ltx2_ada_values(tv, sv, ov);
  EXPECT_EQ(out.bits, float_to_bf16(1.0078125f).bits);
}

TEST(AdalnValuesHostArithmetic, ScaledResidualRoundsOnlyAtTheEnd) {
  // x = 2^-8, y = 1, gate = 1 + 2^-9 (fp32): the f32 chain gives 1 + 3 * 2^-9, which rounds to
  // bf16 1 + 2^-7. Rounding the product to bf16 first (a bf16 chain) gives 1 + 2^-8, a tie that
  // rounds to 1.
  bf16_t x = float_to_bf16(0.00390625f), y = float_to_bf16(1.0f), out{};
  float gate = 1.0f + 0.001953125f;
  TensorView xv(&x, DType::bf16, {1, 1}), yv(&y, DType::bf16, {1, 1}), gv(&gate, DType::f32, {1, 1}),
      ov(&out, DType::bf16, {1, 1});
  scaled_residual_bf16(xv, yv, gv, ov);
  EXPECT_EQ(out.bits, float_to_bf16(1.0078125f).bits);
}

TEST(AdalnValuesHostArithmetic, TimestepEmbeddingOfZeroIsSinZeroCosOne) {
  float t[2] = {0.0f, 0.0f};
  std::vector<float> out(2 * 7, -1.0f);
  TensorView tv(t, DType::f32, {2}), ov(out.data(), DType::f32, {2, 7});
  timestep_embedding(tv, ov, {.flip_sin_to_cos = true, .downscale_freq_shift = 0});
  for (int n = 0; n < 2; ++n) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(out[size_t(n * 7 + j)], 1.0f);  // cos first (flipped)
    for (int j = 3; j < 6; ++j) EXPECT_EQ(out[size_t(n * 7 + j)], 0.0f);  // then sin
    EXPECT_EQ(out[size_t(n * 7 + 6)], 0.0f);                              // the pad column
  }
}

// ---- guards ----------------------------------------------------------------------------------

// The guard named in the Unsupported thrown by `call`; `can_use` must refuse with the same text.
template <typename CanUse, typename Call>
std::string refused_guard(const char* op, CanUse can_use, Call call) {
  std::string why;
  EXPECT_FALSE(can_use(&why));
  EXPECT_NE(why.find(std::string(op) + ": "), std::string::npos) << why;
  try {
    call();
  } catch (const Unsupported& e) {
    EXPECT_EQ(why, e.what());
    return e.guard();
  }
  ADD_FAILURE() << "no Unsupported thrown";
  return "";
}

struct TembGuards : ::testing::Test {
  static constexpr int64_t B = 2, D = 16;
  std::vector<float> table_data = std::vector<float>(6 * D, 0.5f);
  std::vector<bf16_t> temb_data = std::vector<bf16_t>(B * 6 * D, float_to_bf16(1.0f));
  std::vector<float> out_data = std::vector<float>(6 * B * D);
  TensorView table{table_data.data(), DType::f32, {1, 6, D}};
  TensorView temb{temb_data.data(), DType::bf16, {B, 6, D}};
  std::vector<TensorView> out;
  TembGuards() {
    for (int k = 0; k < 6; ++k)
      out.emplace_back(out_data.data() + k * B * D, DType::f32, std::initializer_list<int64_t>{B, 1, D});
  }
  std::string guard(const TensorView& t, const TensorView& e, std::span<const TensorView> o) {
    return refused_guard(
        "temb_table_slices", [&](std::string* why) { return can_use_temb_table_slices(t, e, o, why); },
        [&] { temb_table_slices(t, e, o); });
  }
};

TEST_F(TembGuards, AcceptsTheBaseCase) { EXPECT_TRUE(can_use_temb_table_slices(table, temb, out)); }

TEST_F(TembGuards, Refusals) {
  EXPECT_EQ(guard(table, TensorView(temb_data.data(), DType::f64, {B, 6, D / 4}), out), "dtype");
  EXPECT_EQ(guard(TensorView(temb_data.data(), DType::bf16, {1, 6, D}), temb, out), "dtype");  // bf16 table
  EXPECT_EQ(guard(table, TensorView(temb_data.data(), DType::bf16, {B * 6 * D}), out), "rank");
  EXPECT_EQ(guard(table, TensorView(temb_data.data(), DType::bf16, {B, 3, 2 * D}), out), "shape");
  EXPECT_EQ(guard(TensorView(table_data.data(), DType::f32, {2, 3, D}), temb, out), "shape");
  EXPECT_EQ(guard(TensorView(table_data.data(), DType::f32, {1, 6, D / 2}), temb, out), "shape");
  EXPECT_EQ(guard(TensorView(table_data.data(), DType::f32, {1, 1, 6, D}), temb, out), "shape");  // rank > temb's
  const int64_t sz[] = {B, 6, D / 2}, st[] = {6 * D, D, 2};
  EXPECT_EQ(guard(table, TensorView(temb_data.data(), DType::bf16, sz, st, 3), out), "last_dim_stride");
  EXPECT_EQ(guard(table, temb, std::span<const TensorView>(out).first(5)), "outputs");
  auto bad = out;
  bad[3] = TensorView(out_data.data() + 3 * B * D, DType::bf16, {B, 1, D});
  EXPECT_EQ(guard(table, temb, bad), "dtype");
  bad = out;
  bad[1] = TensorView(out_data.data() + B * D, DType::f32, {B, D});
  EXPECT_EQ(guard(table, temb, bad), "shape");
  bad = out;
  const int64_t full[] = {B, 1, D}, transposed[] = {1, D, B};  // dense, but not row-major
  bad[2] = TensorView(out_data.data() + 2 * B * D, DType::f32, full, transposed, 3);
  EXPECT_EQ(guard(table, temb, bad), "layout");
  bad = out;
  bad[5] = out[4];
  EXPECT_EQ(guard(table, temb, bad), "overlap");
  bad = out;
  bad[0] = TensorView(table_data.data(), DType::f32, {B, 1, D});
  EXPECT_EQ(guard(table, temb, bad), "overlap");
  bad = out;
  bad[0] = TensorView(out_data.data(), DType::f32, {B, 1, D}, Device::cuda(0));
  EXPECT_EQ(guard(table, temb, bad), "device");
}

// Outputs of 2^31 elements each: beyond the CUDA kernel's 32-bit indices (shapes only; no element is read).
TEST_F(TembGuards, RefusesOutputsOf2To31Elements) {
  constexpr int64_t S = int64_t(1) << 21, W = 1024;
  const TensorView wide_table(table_data.data(), DType::f32, {1, 6, W});
  const TensorView long_temb(temb_data.data(), DType::bf16, {1, S, 6, W});
  std::vector<TensorView> long_out;
  for (int k = 0; k < 6; ++k)
    long_out.emplace_back(out_data.data(), DType::f32, std::initializer_list<int64_t>{1, S, 1, W});
  EXPECT_EQ(guard(wide_table, long_temb, long_out), "extent");
}

struct Ltx2Guards : ::testing::Test {
  static constexpr int64_t B = 2, T = 3, n = 9, D = 8;
  std::vector<float> table_data = std::vector<float>(n * D, 0.5f);
  std::vector<bf16_t> ts_data = std::vector<bf16_t>(B * T * n * D, float_to_bf16(1.0f));
  std::vector<bf16_t> out_data = std::vector<bf16_t>(n * B * T * D);
  TensorView table{table_data.data(), DType::f32, {n, D}};
  TensorView timestep{ts_data.data(), DType::bf16, {B, T, n* D}};
  std::vector<TensorView> out;
  Ltx2Guards() {
    for (int k = 0; k < n; ++k)
      out.emplace_back(out_data.data() + k * B * T * D, DType::bf16, std::initializer_list<int64_t>{B, T, D});
  }
  std::string guard(const TensorView& t, const TensorView& s, std::span<const TensorView> o) {
    return refused_guard(
        "ltx2_ada_values", [&](std::string* why) { return can_use_ltx2_ada_values(t, s, o, why); },
        [&] { ltx2_ada_values(t, s, o); });
  }
};

TEST_F(Ltx2Guards, AcceptsTheBaseCase) { EXPECT_TRUE(can_use_ltx2_ada_values(table, timestep, out)); }

TEST_F(Ltx2Guards, Refusals) {
  EXPECT_EQ(guard(TensorView(table_data.data(), DType::i32, {n, D}), timestep, out), "dtype");
  EXPECT_EQ(guard(TensorView(table_data.data(), DType::f32, {1, n, D}), timestep, out), "rank");
  EXPECT_EQ(guard(table, TensorView(ts_data.data(), DType::bf16, {B, T, n, D}), out), "rank");
  EXPECT_EQ(guard(TensorView(table_data.data(), DType::f32, {n * D}, {}), timestep, out), "rank");
  EXPECT_EQ(guard(table, TensorView(ts_data.data(), DType::bf16, {B, T, n * D - 1}), out), "shape");
  std::vector<float> big(10 * D);
  EXPECT_EQ(
      guard(TensorView(big.data(), DType::f32, {10, D}), TensorView(ts_data.data(), DType::bf16, {1, 1, 10 * D}), out),
      "shape");
  const int64_t sz[] = {B, T, n * D / 2}, st[] = {T * n * D, n * D, 2};
  EXPECT_EQ(guard(table, TensorView(ts_data.data(), DType::bf16, sz, st, 3), out), "last_dim_stride");
  EXPECT_EQ(guard(table, timestep, std::span<const TensorView>(out).first(6)), "outputs");
  auto bad = out;
  bad[8] = TensorView(out_data.data() + 8 * B * T * D, DType::f32, {B, T, D / 2});
  EXPECT_EQ(guard(table, timestep, bad), "dtype");  // outputs take the timestep's dtype
  bad = out;
  bad[0] = TensorView(out_data.data(), DType::bf16, {B, T, 1, D});
  EXPECT_EQ(guard(table, timestep, bad), "shape");
  bad = out;
  bad[1] = TensorView(ts_data.data(), DType::bf16, {B, T, D});
  EXPECT_EQ(guard(table, timestep, bad), "overlap");
}

struct ScaledResidualGuards : ::testing::Test {
  static constexpr int64_t B = 1, F = 2, S = 4, D = 16;
  std::vector<bf16_t> xs = std::vector<bf16_t>(B * F * S * D, float_to_bf16(1.0f));
  std::vector<bf16_t> ys = std::vector<bf16_t>(B * F * S * D, float_to_bf16(1.0f));
  std::vector<bf16_t> os = std::vector<bf16_t>(B * F * S * D);
  std::vector<float> gs = std::vector<float>(B * F * D, 0.5f);
  TensorView x{xs.data(), DType::bf16, {B, F, S, D}};
  TensorView y{ys.data(), DType::bf16, {B, F, S, D}};
  TensorView out{os.data(), DType::bf16, {B, F, S, D}};
  TensorView gate{gs.data(), DType::f32, {B, F, 1, D}};
  std::string guard(const TensorView& xv, const TensorView& yv, const TensorView& gv, const TensorView& ov) {
    return refused_guard(
        "scaled_residual_bf16", [&](std::string* why) { return can_use_scaled_residual_bf16(xv, yv, gv, ov, why); },
        [&] { scaled_residual_bf16(xv, yv, gv, ov); });
  }
};

TEST_F(ScaledResidualGuards, AcceptsTheBaseCaseAndInPlace) {
  EXPECT_TRUE(can_use_scaled_residual_bf16(x, y, gate, out));
  EXPECT_TRUE(can_use_scaled_residual_bf16(x, y, gate, x));
}

TEST_F(ScaledResidualGuards, Refusals) {
  EXPECT_EQ(guard(TensorView(xs.data(), DType::f16, {B, F, S, D}), y, gate, out), "dtype");
  EXPECT_EQ(guard(x, y, TensorView(xs.data(), DType::bf16, {B, F, 1, D}), out), "dtype");  // bf16 gate
  EXPECT_EQ(guard(x, TensorView(ys.data(), DType::f16, {B, F, S, D}), gate, out), "dtype");
  EXPECT_EQ(guard(x, TensorView(ys.data(), DType::bf16, {B, F, S / 2, D}), gate, out), "broadcast");
  EXPECT_EQ(guard(x, y, TensorView(gs.data(), DType::f32, {B, F, 1, D / 2}), out), "broadcast");
  EXPECT_EQ(guard(x, y, gate, TensorView(os.data(), DType::f32, {B, F, S, D / 2})), "dtype");
  EXPECT_EQ(guard(x, y, gate, y), "overlap");
  EXPECT_EQ(guard(x, y, TensorView(gs.data(), DType::f32, {B, F, 1, D}, Device::cuda(0)), out), "device");
}

struct TimestepGuards : ::testing::Test {
  float ts[3] = {1.0f, 2.0f, 3.0f};
  std::vector<float> os = std::vector<float>(3 * 32);
  TensorView t{ts, DType::f32, {3}};
  TensorView out{os.data(), DType::f32, {3, 32}};
  std::string guard(const TensorView& tv, const TensorView& ov, const TimestepEmbeddingOptions& o) {
    return refused_guard(
        "timestep_embedding", [&](std::string* why) { return can_use_timestep_embedding(tv, ov, o, why); },
        [&] { timestep_embedding(tv, ov, o); });
  }
};

TEST_F(TimestepGuards, AcceptsTheBaseCase) { EXPECT_TRUE(can_use_timestep_embedding(t, out)); }

TEST_F(TimestepGuards, Refusals) {
  EXPECT_EQ(guard(TensorView(ts, DType::i32, {3}), out, {}), "dtype");
  EXPECT_EQ(guard(TensorView(ts, DType::f32, {3, 1}), out, {}), "rank");
  EXPECT_EQ(guard(t, TensorView(os.data(), DType::bf16, {3, 32}), {}), "dtype");
  EXPECT_EQ(guard(t, TensorView(os.data(), DType::f32, {2, 32}), {}), "shape");
  EXPECT_EQ(guard(t, TensorView(os.data(), DType::f32, {3 * 32}), {}), "rank");
  EXPECT_EQ(guard(t, out, {.max_period = 0}), "max_period");
  EXPECT_EQ(guard(t, out, {.downscale_freq_shift = 16}), "downscale_freq_shift");
  EXPECT_EQ(guard(t, out, {.scale = std::numeric_limits<double>::infinity()}), "options");
  EXPECT_EQ(guard(t, TensorView(ts, DType::f32, {3, 1}), {}), "overlap");
  const int64_t sz[] = {3, 16}, st[] = {32, 2};
  EXPECT_EQ(guard(t, TensorView(os.data(), DType::f32, sz, st, 2), {}), "last_dim_stride");
}

}  // namespace
}  // namespace dfuse::test
