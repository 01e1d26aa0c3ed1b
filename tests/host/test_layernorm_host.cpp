// LayerNorm ops (normalization family) on the host backend: the eager layer_norm replica's path
// choice and arithmetic, layernorm_modulate == its eager chain bit for bit over every case, and
// every guard's error.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/layer_norm_stats.h"
#include "common/layernorm_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/layer_norm.h"
#include "dfuse/ops/norm.h"

namespace dfuse::test {
namespace {

using detail::LayerNormPath;

class LayernormHost : public ::testing::TestWithParam<DType> {};

TEST_P(LayernormHost, ModulateMatchesEagerChain) {
  uint64_t seed = 300;
  for (const auto& c : small_layernorm_cases())
    EXPECT_EQ(run_layernorm_modulate_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(LayernormHost, FoldedModulateMatchesFoldedChain) {
  uint64_t seed = 600;
  for (const auto& c : small_layernorm_cases())
    EXPECT_EQ(run_layernorm_folded_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(LayernormHost, FoldedModulateStaysWithinItsBound) {
  uint64_t seed = 700;
  double worst = 0.0;
  for (const auto& c : small_layernorm_cases())
    EXPECT_EQ(run_layernorm_folded_bound_case(Device::host(), GetParam(), c, seed++, &worst), "") << c.name;
  // The fold must actually differ from the chain somewhere in half precision (else it would be
  // lossless and belong to another tier); f32 differs too, by far less.
  EXPECT_GT(worst, 0.0);
  const std::string_view name = dtype_name(GetParam());
  std::printf("layernorm_folded_modulate %.*s: max |out - chain| / bound = %.3f\n", int(name.size()), name.data(),
              worst);
}

TEST_P(LayernormHost, QkHeadMatchesEagerChain) {
  uint64_t seed = 400;
  for (const auto& c : small_qk_head_cases())
    EXPECT_EQ(run_qk_head_layernorm_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(LayernormHost, Fp32LayerNormMatchesEagerChain) {
  uint64_t seed = 500;
  for (const auto& c : small_fp32_layernorm_cases())
    EXPECT_EQ(run_fp32_layernorm_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LayernormHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- aten's path choice --------------------------------------------------------------------------

TEST(LayernormPath, FollowsAtenDispatch) {
  alignas(16) float buf[64 + 4] = {};
  TensorView aligned(buf, DType::f32, {4, 16});
  EXPECT_EQ(detail::layer_norm_path(aligned, nullptr, nullptr), LayerNormPath::vectorized);
  TensorView off_by_one(buf + 1, DType::f32, {4, 16});  // 4-byte aligned only: f32 needs 16
  EXPECT_EQ(detail::layer_norm_path(off_by_one, nullptr, nullptr), LayerNormPath::generic);
  TensorView n_mod_4(buf, DType::f32, {4, 14});
  EXPECT_EQ(detail::layer_norm_path(n_mod_4, nullptr, nullptr), LayerNormPath::generic);
  // A non-contiguous x is copied by aten before the check: the copy is aligned.
  int64_t sizes[] = {2, 16}, strides[] = {17, 1};
  EXPECT_EQ(detail::layer_norm_path(off_by_one.restrided(sizes, strides, 2), nullptr, nullptr),
            LayerNormPath::vectorized);
  // bf16 needs 8 bytes: an offset of 4 elements keeps it, 2 elements loses it.
  alignas(16) bf16_t h[72] = {};
  EXPECT_EQ(detail::layer_norm_path(TensorView(h + 4, DType::bf16, {4, 16}), nullptr, nullptr),
            LayerNormPath::vectorized);
  EXPECT_EQ(detail::layer_norm_path(TensorView(h + 2, DType::bf16, {4, 16}), nullptr, nullptr),
            LayerNormPath::generic);
  // A misaligned weight sends the whole op to the generic path.
  TensorView w(h + 1, DType::bf16, {16});
  EXPECT_EQ(detail::layer_norm_path(TensorView(h, DType::bf16, {4, 16}), &w, nullptr), LayerNormPath::generic);
}

// ---- the eager replica's arithmetic --------------------------------------------------------------

std::vector<float> layer_norm_f32(std::vector<float> x, int64_t n, const float* w, const float* b, double eps,
                                  int64_t offset = 0) {
  std::vector<float> storage(x.size() + size_t(offset) + 4);
  auto* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(storage.data()) + 15) & ~uintptr_t(15));
  std::memcpy(base + offset, x.data(), x.size() * sizeof(float));
  const int64_t rows = int64_t(x.size()) / n;
  std::vector<float> out(x.size());
  TensorView xv(base + offset, DType::f32, {rows, n}), ov(out.data(), DType::f32, {rows, n});
  TensorView wv(const_cast<float*>(w), DType::f32, {n}), bv(const_cast<float*>(b), DType::f32, {n});
  eager::layer_norm(xv, w ? &wv : nullptr, b ? &bv : nullptr, eps, ov);
  return out;
}

TEST(LayernormEager, NormalizesKnownRow) {
  // mean 2.5, biased variance 1.25: exact in both Welford variants.
  for (int64_t offset : {0, 1}) {  // vectorized, then generic (misaligned)
    const auto y = layer_norm_f32({1, 2, 3, 4}, 4, nullptr, nullptr, 0.0, offset);
    const double r = 1.0 / std::sqrt(1.25);
    for (int k = 0; k < 4; ++k) EXPECT_NEAR(y[size_t(k)], (k + 1 - 2.5) * r, 1e-6) << "offset " << offset;
  }
}

TEST(LayernormEager, ConstantRowHasZeroVariance) {
  // var 0, so rstd = 1/sqrt(eps) and every output is exactly 0 whatever the path.
  std::vector<float> x(3 * 1000, 7.25f);
  for (int64_t n : {1000, 1000 - 2}) {
    x.resize(size_t(3 * n));
    for (float v : layer_norm_f32(x, n, nullptr, nullptr, 1e-5)) EXPECT_EQ(v, 0.0f);
  }
}

TEST(LayernormEager, AppliesAffineVariants) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const float w[] = {2, 2, 2, 2, 2, 2, 2, 2}, b[] = {10, 10, 10, 10, 10, 10, 10, 10};
  const auto plain = layer_norm_f32(x, 8, nullptr, nullptr, 1e-5);
  const auto affine = layer_norm_f32(x, 8, w, b, 1e-5);
  const auto gamma = layer_norm_f32(x, 8, w, nullptr, 1e-5);
  const auto beta = layer_norm_f32(x, 8, nullptr, b, 1e-5);
  for (size_t k = 0; k < 8; ++k) {
    EXPECT_EQ(gamma[k], 2.0f * plain[k]);  // exact: a power of two
    EXPECT_NEAR(affine[k], 2.0f * plain[k] + 10.0f, 1e-5);
    EXPECT_NEAR(beta[k], plain[k] + 10.0f, 1e-5);
  }
}

// The two paths reduce in different orders; on f32 rows of model width their statistics differ
// in some rows, which is why the path must be reproduced.
TEST(LayernormEager, PathsReduceInDifferentOrders) {
  uint64_t s = 12345;
  int differing = 0;
  for (int row = 0; row < 64; ++row) {
    std::vector<float> x(3072);
    for (float& v : x) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      v = float(int64_t(s >> 40) % 20001) / 1000.0f + 3.0f;
    }
    const auto load = [&](int64_t k) { return x[size_t(k)]; };
    const auto a = detail::layer_norm_stats_vectorized_host(load, 3072);
    const auto b = detail::layer_norm_stats_generic_host(load, 3072);
    EXPECT_NEAR(a.mean, b.mean, 1e-4);
    EXPECT_NEAR(a.var, b.var, 1e-3);
    differing += (a.mean != b.mean || a.var != b.var);
  }
  EXPECT_GT(differing, 0);
}

// welford_block_fold's constants give welford_vec_combine's bits at every step of the vectorized block's
// reduction where all threads fold the same count, on states with ordinary, huge (delta^2 * count overflows)
// and subnormal means; other n take the general combine.
TEST(LayernormStats, BlockFoldCombinesAsWelfordCombine) {
  uint64_t s = 777;
  const auto next = [&] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return float(int64_t(s >> 40) % 2000001 - 1000000) / 1000.0f;
  };
  const auto bits = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  };
  for (int64_t n : {512, 1536, 3072, 5120, 6144, 1 << 24}) {
    const detail::WelfordBlockFold f = detail::welford_block_fold(n);
    ASSERT_TRUE(f.uniform) << n;
    EXPECT_EQ(f.count[0], float(4 * (n / 512))) << n;
    for (int l = 0; l < detail::WelfordBlockFold::kSteps; ++l) {
      if (l > 0) {
        EXPECT_EQ(f.count[l], 2 * f.count[l - 1]) << n;
      }
      for (int i = 0; i < 300; ++i) {
        const float scale = i % 3 == 0 ? 1.0f : (i % 3 == 1 ? 1e18f : 1e-40f);
        const detail::WelfordVec own{next() * scale, std::fabs(next()) * scale, f.count[l]};
        const detail::WelfordVec other{next() * scale, std::fabs(next()) * scale, f.count[l]};
        const detail::WelfordVec want = detail::welford_vec_combine(own, other);
        const detail::WelfordVec got = detail::welford_vec_combine_equal(own, other, f.count[l], f.share[l]);
        ASSERT_EQ(bits(got.mean), bits(want.mean)) << n << " step " << l;
        ASSERT_EQ(bits(got.sigma2), bits(want.sigma2)) << n << " step " << l;
        ASSERT_EQ(got.count, want.count);
      }
    }
  }
  for (int64_t n : {0, 4, 256, 1000, 3840, 5124}) EXPECT_FALSE(detail::welford_block_fold(n).uniform) << n;
}

// Whole rows: every state the vectorized block combines at step l holds welford_block_fold's count[l] elements
// (the fold's premise), and the block reduction with its constants gives layer_norm_stats_vectorized_host's bits.
TEST(LayernormStats, BlockFoldMatchesTheBlockReductionOnRows) {
  uint64_t s = 4242;
  for (int64_t n : {512, 3072, 5120}) {
    const detail::WelfordBlockFold f = detail::welford_block_fold(n);
    for (int row = 0; row < 16; ++row) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v = float(int64_t(s >> 40) % 20001) / 1000.0f - 7.0f;
      }
      detail::WelfordVec t[detail::kLayerNormVecThreads];
      for (int i = 0; i < detail::kLayerNormVecThreads; ++i)
        for (int64_t c = i; c < n / 4; c += detail::kLayerNormVecThreads)
          for (int k = 0; k < 4; ++k) t[i] = detail::welford_vec_update(t[i], x[size_t(4 * c + k)]);
      const auto combine = [&](detail::WelfordVec& own, const detail::WelfordVec& other, int step) {
        ASSERT_EQ(own.count, f.count[step]);
        ASSERT_EQ(other.count, f.count[step]);
        own = detail::welford_vec_combine_equal(own, other, f.count[step], f.share[step]);
      };
      for (int w = 0; w < detail::kLayerNormVecThreads / 32; ++w)
        for (int off = 16, step = 0; off >= 1; off /= 2, ++step)
          for (int l = 0; l < off; ++l) combine(t[32 * w + l], t[32 * w + l + off], step);
      combine(t[0], t[64], 5);
      combine(t[32], t[96], 5);
      combine(t[0], t[32], 6);
      const auto want = detail::layer_norm_stats_vectorized_host([&](int64_t k) { return x[size_t(k)]; }, n);
      EXPECT_EQ(t[0].mean, want.mean) << n;
      EXPECT_EQ(detail::div_rn(t[0].sigma2, float(n)), want.var) << n;
    }
  }
}

TEST(LayernormEager, RejectsWrongWeightShape) {
  std::vector<float> x(32), out(32), w(8);
  TensorView xv(x.data(), DType::f32, {4, 8}), ov(out.data(), DType::f32, {4, 8}), wv(w.data(), DType::f32, {4, 2});
  try {
    eager::layer_norm(xv, &wv, nullptr, 1e-5, ov);
    ADD_FAILURE() << "no Unsupported thrown";
  } catch (const Unsupported& e) {
    EXPECT_EQ(e.guard(), "shape");
  }
}

// ---- layernorm_modulate arithmetic and guards ----------------------------------------------------

TEST(LayernormModulateHost, NormalizedValueRoundsBeforeModulate) {
  // Row [1, 2, 3, 4] in bf16: normalized values +-1.3416, +-0.4472 round to bf16 before * (1 + scale).
  std::vector<bf16_t> x = {float_to_bf16(1), float_to_bf16(2), float_to_bf16(3), float_to_bf16(4)};
  std::vector<bf16_t> scale(4, float_to_bf16(0.5f)), shift(4, float_to_bf16(0.25f)), out(4);
  TensorView xv(x.data(), DType::bf16, {1, 1, 4}), sv(scale.data(), DType::bf16, {1, 1, 4}),
      hv(shift.data(), DType::bf16, {1, 1, 4}), ov(out.data(), DType::bf16, {1, 1, 4});
  layernorm_modulate(xv, sv, hv, 0.0, ov);
  const float r = float(1.0 / std::sqrt(1.25));
  for (int k = 0; k < 4; ++k) {
    const float n = bf16_to_float(float_to_bf16((k + 1 - 2.5f) * r));
    const float u = bf16_to_float(float_to_bf16(n * 1.5f));
    EXPECT_EQ(out[size_t(k)].bits, float_to_bf16(u + 0.25f).bits) << k;
  }
}

struct LayernormGuard : ::testing::Test {
  std::vector<bf16_t> xs = std::vector<bf16_t>(2 * 8 * 16, float_to_bf16(1.0f));
  std::vector<bf16_t> ss = std::vector<bf16_t>(2 * 16, float_to_bf16(0.5f));
  std::vector<bf16_t> os = std::vector<bf16_t>(2 * 8 * 16);
  std::vector<float> fs = std::vector<float>(2 * 16, 0.5f);
  TensorView x{xs.data(), DType::bf16, {2, 8, 16}};
  TensorView s{ss.data(), DType::bf16, {2, 1, 16}};
  TensorView out{os.data(), DType::bf16, {2, 8, 16}};

  std::string guard(const TensorView& xv, const TensorView& sv, const TensorView& hv, const TensorView& ov) {
    std::string why;
    EXPECT_FALSE(can_use_layernorm_modulate(xv, sv, hv, 1e-6, ov, &why));
    EXPECT_NE(why.find("layernorm_modulate: "), std::string::npos) << why;
    try {
      layernorm_modulate(xv, sv, hv, 1e-6, ov);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(LayernormGuard, AcceptsTheBaseCaseAndInPlace) {
  EXPECT_TRUE(can_use_layernorm_modulate(x, s, s, 1e-6, out));
  EXPECT_TRUE(can_use_layernorm_modulate(x, s, s, 1e-6, x));
}

TEST_F(LayernormGuard, RejectsMixedDtype) {
  TensorView f(fs.data(), DType::f32, {2, 1, 16});
  EXPECT_EQ(guard(x, f, s, out), "dtype");
}

TEST_F(LayernormGuard, RejectsUnsupportedDtype) {
  std::vector<double> d(2 * 8 * 16, 1.0);
  EXPECT_EQ(guard(TensorView(d.data(), DType::f64, {2, 8, 16}), s, s, out), "dtype");
}

TEST_F(LayernormGuard, RejectsNonContiguousLastDim) {
  int64_t sizes[] = {2, 8, 8}, strides[] = {128, 16, 2};
  int64_t ssz[] = {2, 1, 8}, sst[] = {16, 16, 1};
  EXPECT_EQ(guard(x.restrided(sizes, strides, 3), s.restrided(ssz, sst, 3), s.restrided(ssz, sst, 3),
                  out.restrided(sizes, strides, 3)),
            "last_dim_stride");
}

TEST_F(LayernormGuard, RejectsEmptyLastDim) {
  int64_t sizes[] = {2, 8, 0}, strides[] = {0, 0, 1};
  EXPECT_EQ(guard(x.restrided(sizes, strides, 3), s, s, out.restrided(sizes, strides, 3)), "shape");
}

TEST_F(LayernormGuard, RejectsNonBroadcastableShift) {
  int64_t sizes[] = {2, 3, 16}, strides[] = {48, 16, 1};
  EXPECT_EQ(guard(x, s, s.restrided(sizes, strides, 3), out), "broadcast");
}

TEST_F(LayernormGuard, RejectsWrongOutputShape) {
  int64_t sizes[] = {2, 4, 16}, strides[] = {64, 16, 1};
  EXPECT_EQ(guard(x, s, s, out.restrided(sizes, strides, 3)), "shape");
}

TEST_F(LayernormGuard, RejectsRankAboveFour) {
  int64_t sizes[] = {1, 2, 1, 8, 16}, strides[] = {256, 128, 128, 16, 1};
  EXPECT_EQ(guard(x.restrided(sizes, strides, 5), s, s, out.restrided(sizes, strides, 5)), "rank");
}

TEST_F(LayernormGuard, RejectsOutputOverlappingScale) {
  TensorView o(ss.data(), DType::bf16, {2, 1, 16});
  int64_t sizes[] = {2, 1, 16}, strides[] = {16, 16, 1};
  EXPECT_EQ(guard(x.restrided(sizes, strides, 3), s, s, o), "overlap");
}

TEST_F(LayernormGuard, RejectsPartialOverlapWithX) {
  std::vector<bf16_t> big(2 * 8 * 16 + 1);
  TensorView xb(big.data(), DType::bf16, {2, 8, 16}), ob(big.data() + 1, DType::bf16, {2, 8, 16});
  EXPECT_EQ(guard(xb, s, s, ob), "overlap");
}

TEST_F(LayernormGuard, RejectsNullData) {
  EXPECT_EQ(guard(TensorView(nullptr, DType::bf16, {2, 8, 16}), s, s, out), "data");
}

TEST_F(LayernormGuard, RejectsDeviceMismatch) {
  TensorView sc(ss.data(), DType::bf16, {2, 1, 16}, Device::cuda(0));
  EXPECT_EQ(guard(x, sc, s, out), "device");
}

TEST_F(LayernormGuard, FoldedRejectsPerBatchRowsAndBroadcastColumns) {
  // s is [2, 1, 16]: one row per batch, which LayerNorm's weight cannot express.
  std::string why;
  EXPECT_FALSE(can_use_layernorm_folded_modulate(x, s, s, 1e-6, out, &why));
  EXPECT_NE(why.find("scale must be one row for all of x"), std::string::npos) << why;
  TensorView one_row(ss.data(), DType::bf16, {1, 1, 16}), one_column(ss.data(), DType::bf16, {1, 1, 1});
  EXPECT_TRUE(can_use_layernorm_folded_modulate(x, one_row, one_row, 1e-6, out));
  EXPECT_FALSE(can_use_layernorm_folded_modulate(x, one_row, one_column, 1e-6, out, &why));
  EXPECT_NE(why.find("shift must have D = 16"), std::string::npos) << why;
  EXPECT_THROW(layernorm_folded_modulate(x, s, s, 1e-6, out), Unsupported);
}

// ---- qk_head_layernorm guards ----------------------------------------------------------------------

struct QkHeadGuard : ::testing::Test {
  std::vector<bf16_t> qs = std::vector<bf16_t>(2 * 3 * 4 * 16, float_to_bf16(1.0f));
  std::vector<bf16_t> ks = std::vector<bf16_t>(2 * 3 * 4 * 16, float_to_bf16(2.0f));
  std::vector<bf16_t> ws = std::vector<bf16_t>(2 * 16, float_to_bf16(0.5f));
  std::vector<bf16_t> qo = std::vector<bf16_t>(2 * 3 * 4 * 16), ko = std::vector<bf16_t>(2 * 3 * 4 * 16);
  TensorView q{qs.data(), DType::bf16, {2, 3, 4, 16}}, k{ks.data(), DType::bf16, {2, 3, 4, 16}};
  TensorView w{ws.data(), DType::bf16, {16}}, b{ws.data() + 16, DType::bf16, {16}};
  TensorView q_out{qo.data(), DType::bf16, {2, 3, 4, 16}}, k_out{ko.data(), DType::bf16, {2, 3, 4, 16}};

  std::string guard(const TensorView& qv, const TensorView& kv, const TensorView* qw, const TensorView& qov,
                    const TensorView& kov) {
    std::string why;
    EXPECT_FALSE(can_use_qk_head_layernorm(qv, kv, qw, &b, &w, &b, 1e-6, qov, kov, &why));
    EXPECT_NE(why.find("qk_head_layernorm: "), std::string::npos) << why;
    try {
      qk_head_layernorm(qv, kv, qw, &b, &w, &b, 1e-6, qov, kov);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(QkHeadGuard, AcceptsTheBaseCaseAndInPlace) {
  EXPECT_TRUE(can_use_qk_head_layernorm(q, k, &w, &b, &w, &b, 1e-6, q_out, k_out));
  EXPECT_TRUE(can_use_qk_head_layernorm(q, k, &w, &b, &w, &b, 1e-6, q, k));
  EXPECT_TRUE(can_use_qk_head_layernorm(q, k, nullptr, nullptr, nullptr, nullptr, 1e-6, q_out, k_out));
}

TEST_F(QkHeadGuard, RejectsWeightOfAnotherLength) {
  TensorView w8(ws.data(), DType::bf16, {8});
  EXPECT_EQ(guard(q, k, &w8, q_out, k_out), "shape");
}

TEST_F(QkHeadGuard, RejectsMixedDtypes) {
  std::vector<float> kf(2 * 3 * 4 * 16, 1.0f);
  EXPECT_EQ(guard(q, TensorView(kf.data(), DType::f32, {2, 3, 4, 16}), &w, q_out, k_out), "dtype");
}

TEST_F(QkHeadGuard, RejectsOutputsThatOverlap) {
  EXPECT_EQ(guard(q, k, &w, q_out, q_out), "overlap");
}

TEST_F(QkHeadGuard, RejectsWritingIntoTheOtherInput) {
  EXPECT_EQ(guard(q, k, &w, k, k_out), "overlap");
}

TEST_F(QkHeadGuard, RejectsNonContiguousHeadDim) {
  int64_t sizes[] = {2, 3, 4, 8}, strides[] = {192, 64, 16, 2};
  TensorView w8(ws.data(), DType::bf16, {8});
  std::string why;
  EXPECT_FALSE(can_use_qk_head_layernorm(q.restrided(sizes, strides, 4), k.restrided(sizes, strides, 4), nullptr,
                                         nullptr, nullptr, nullptr, 1e-6, q_out.restrided(sizes, strides, 4),
                                         k_out.restrided(sizes, strides, 4), &why));
  EXPECT_NE(why.find("q must be contiguous in its last dim"), std::string::npos) << why;
}

// ---- fp32_layernorm_bf16 guards ---------------------------------------------------------------------

TEST(Fp32LayerNormGuard, AcceptsHalfInputsWithFloatAffine) {
  std::vector<bf16_t> x(4 * 16), out(4 * 16);
  std::vector<float> w(16, 1.0f);
  TensorView xv(x.data(), DType::bf16, {4, 16}), ov(out.data(), DType::bf16, {4, 16}), wv(w.data(), DType::f32, {16});
  EXPECT_TRUE(can_use_fp32_layernorm_bf16(xv, &wv, &wv, 1e-6, ov));
  EXPECT_TRUE(can_use_fp32_layernorm_bf16(xv, nullptr, nullptr, 1e-6, xv));
}

TEST(Fp32LayerNormGuard, RejectsFloatInputAndHalfWeight) {
  std::vector<float> xf(4 * 16), of(4 * 16);
  std::vector<bf16_t> x(4 * 16), out(4 * 16), wh(16);
  TensorView xfv(xf.data(), DType::f32, {4, 16}), ofv(of.data(), DType::f32, {4, 16});
  TensorView xv(x.data(), DType::bf16, {4, 16}), ov(out.data(), DType::bf16, {4, 16}), whv(wh.data(), DType::bf16, {16});
  std::string why;
  EXPECT_FALSE(can_use_fp32_layernorm_bf16(xfv, nullptr, nullptr, 1e-6, ofv, &why));
  EXPECT_NE(why.find("x"), std::string::npos) << why;
  EXPECT_FALSE(can_use_fp32_layernorm_bf16(xv, &whv, nullptr, 1e-6, ov, &why));
  EXPECT_NE(why.find("weight"), std::string::npos) << why;
  try {
    fp32_layernorm_bf16(xv, &whv, nullptr, 1e-6, ov);
    ADD_FAILURE() << "no Unsupported thrown";
  } catch (const Unsupported& e) {
    EXPECT_EQ(e.guard(), "dtype");
  }
}

TEST(Fp32LayerNormGuard, RejectsWrongBiasLength) {
  std::vector<bf16_t> x(4 * 16), out(4 * 16);
  std::vector<float> b(8);
  TensorView xv(x.data(), DType::bf16, {4, 16}), ov(out.data(), DType::bf16, {4, 16}), bv(b.data(), DType::f32, {8});
  std::string why;
  EXPECT_FALSE(can_use_fp32_layernorm_bf16(xv, nullptr, &bv, 1e-6, ov, &why));
  EXPECT_NE(why.find("bias must be [16]"), std::string::npos) << why;
}

}  // namespace
}  // namespace dfuse::test
