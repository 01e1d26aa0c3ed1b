// Rope ops on the host backend: fused == eager chain bit for bit over every case, the rounding
// points the contracts name, and every guard's error.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/rope_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {
namespace {

class RopeHost : public ::testing::TestWithParam<DType> {};

TEST_P(RopeHost, RotateHalfFp32OpmathMatchesEagerChain) {
  uint64_t seed = 700;
  for (const auto& c : small_rope_cases())
    EXPECT_EQ(run_rope_rotate_half_case(Device::host(), GetParam(), RopeMath::fp32_opmath, c, seed++), "") << c.name;
}

TEST_P(RopeHost, RotateHalfStorageDtypeMatchesEagerChain) {
  uint64_t seed = 800;
  for (const auto& c : small_rope_cases())
    EXPECT_EQ(run_rope_rotate_half_case(Device::host(), GetParam(), RopeMath::storage_dtype, c, seed++), "")
        << c.name;
}

TEST_P(RopeHost, InterleavedRopeFp64MatchesEagerChain) {
  uint64_t seed = 900;
  for (const auto& c : small_rope_cases())
    EXPECT_EQ(run_interleaved_rope_fp64_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(RopeHost, InterleavedPairsMatchesEagerChain) {
  uint64_t seed = 1500;
  for (const auto& c : small_rope_cases())
    EXPECT_EQ(run_rope_interleaved_pairs_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(RopeHost, QkNormRopeMatchesSplitChain) {
  uint64_t seed = 1000;
  for (RmsNormChain chain : {RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed})
    for (RopeMath math : {RopeMath::fp32_opmath, RopeMath::storage_dtype})
      for (const auto& c : small_qknorm_rope_cases())
        EXPECT_EQ(run_qknorm_rope_case(Device::host(), GetParam(), chain, math, c, seed++), "")
            << c.name << " " << rms_norm_chain_name(chain) << (math == RopeMath::storage_dtype ? " storage" : " fp32");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RopeHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- the rounding points -----------------------------------------------------------------------

bf16_t bf(float v) { return float_to_bf16(v); }

// x1 * c1 = 1 + 2^-6 + 2^-14 and -x2 * s1 = 2^-8. In fp32 the sum is just above the bf16 tie
// 1 + 2.5 * 2^-7 and rounds up; rounding the product to bf16 first (1 + 2^-6) lands exactly on
// the tie, which rounds to even (down).
TEST(RopeHostArithmetic, RotateHalfRoundingPoints) {
  std::vector<bf16_t> x = {bf(1.0078125f), bf(0.00390625f)};
  std::vector<bf16_t> cos = {bf(1.0078125f), bf(1.0f)}, sin = {bf(-1.0f), bf(0.0f)};
  std::vector<float> cos32 = {1.0078125f, 1.0f}, sin32 = {-1.0f, 0.0f};
  std::vector<bf16_t> out(2);
  TensorView xv(x.data(), DType::bf16, {1, 2}), ov(out.data(), DType::bf16, {1, 2});
  rope_rotate_half(xv, TensorView(cos32.data(), DType::f32, {1, 2}), TensorView(sin32.data(), DType::f32, {1, 2}),
                   ov, RopeMath::fp32_opmath);
  EXPECT_EQ(out[0].bits, bf(1.0234375f).bits);
  // out[1] = x2 * c2 + x1 * s2 = 2^-8 exactly.
  EXPECT_EQ(out[1].bits, bf(0.00390625f).bits);
  rope_rotate_half(xv, TensorView(cos.data(), DType::bf16, {1, 2}), TensorView(sin.data(), DType::bf16, {1, 2}), ov,
                   RopeMath::storage_dtype);
  EXPECT_EQ(out[0].bits, bf(1.015625f).bits);
}

// The tail beyond R is copied bit for bit, NaN payloads included.
TEST(RopeHostArithmetic, RotateHalfCopiesTheTail) {
  std::vector<bf16_t> x = {bf(1.0f), bf(2.0f), bf16_t{0x7FA1}, bf16_t{0x8001}};
  std::vector<float> cos = {0.5f, 0.5f}, sin = {0.25f, 0.25f};
  std::vector<bf16_t> out(4);
  rope_rotate_half(TensorView(x.data(), DType::bf16, {1, 4}), TensorView(cos.data(), DType::f32, {1, 2}),
                   TensorView(sin.data(), DType::f32, {1, 2}), TensorView(out.data(), DType::bf16, {1, 4}),
                   RopeMath::fp32_opmath);
  EXPECT_EQ(out[0].bits, bf(1.0f * 0.5f - 2.0f * 0.25f).bits);
  EXPECT_EQ(out[1].bits, bf(2.0f * 0.5f + 1.0f * 0.25f).bits);
  EXPECT_EQ(out[2].bits, 0x7FA1);
  EXPECT_EQ(out[3].bits, 0x8001);
}

// The same rounding point as RotateHalfRoundingPoints, on a pair: the sum of the fp32 products is
// rounded once (1 + 2^-6 + 2^-14 + 2^-8 rounds up to 1.0234375; rounding the product first
// would land on a tie and give 1.015625).
TEST(RopeHostArithmetic, InterleavedPairsRoundOnceFromFp32) {
  std::vector<bf16_t> x = {bf(1.0078125f), bf(0.00390625f)}, out(2);
  std::vector<float> cos = {1.0078125f, 1.0f}, sin = {-1.0f, 0.0f};
  rope_interleaved_pairs(TensorView(x.data(), DType::bf16, {1, 2}), TensorView(cos.data(), DType::f32, {1, 2}),
                         TensorView(sin.data(), DType::f32, {1, 2}), TensorView(out.data(), DType::bf16, {1, 2}));
  EXPECT_EQ(out[0].bits, bf(1.0234375f).bits);
  EXPECT_EQ(out[1].bits, bf(0.00390625f).bits);  // x2 * c1 + x1 * s1 = 2^-8 exactly
}

// The partner of x[2p] is x[2p+1] (not x[p + D/2] as in rotate-half): with cos 0 and sin 1 the
// op maps (a, b, c, d) to (-b, a, -d, c).
TEST(RopeHostArithmetic, InterleavedPairsRotateAdjacentPairs) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f}, cos(4, 0.0f), sin(4, 1.0f), out(4);
  rope_interleaved_pairs(TensorView(x.data(), DType::f32, {1, 4}), TensorView(cos.data(), DType::f32, {1, 4}),
                         TensorView(sin.data(), DType::f32, {1, 4}), TensorView(out.data(), DType::f32, {1, 4}));
  EXPECT_EQ(out, (std::vector<float>{-2.0f, 1.0f, -4.0f, 3.0f}));
}

// c = 1 + 2^-8 + 2^-30: rounded straight to bf16 it is above the tie and rounds up (0x3F81);
// aten's store goes through float first, where it becomes the tie 1 + 2^-8, which rounds to
// even: 1.0 (0x3F80).
TEST(RopeHostArithmetic, InterleavedRoundsDoubleThroughFloat) {
  const double c = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  std::vector<bf16_t> q = {bf(1.0f), bf(0.0f)}, k = {bf(1.0f), bf(0.0f)}, qo(2), ko(2);
  std::vector<double> cos = {c, 0.0}, sin = {0.0, 0.5};
  TensorView cv(cos.data(), DType::f64, {1, 2}), sv(sin.data(), DType::f64, {1, 2});
  interleaved_rope_fp64(TensorView(q.data(), DType::bf16, {1, 2}), TensorView(k.data(), DType::bf16, {1, 2}), cv, sv,
                        TensorView(qo.data(), DType::bf16, {1, 2}), TensorView(ko.data(), DType::bf16, {1, 2}));
  EXPECT_EQ(qo[0].bits, 0x3F80);
  EXPECT_EQ(qo[1].bits, bf(0.5f).bits);
  EXPECT_EQ(ko[0].bits, 0x3F80);
}

// The eager cast replica narrows double through float as well.
TEST(RopeHostArithmetic, EagerCastNarrowsThroughFloat) {
  const double c = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  bf16_t out{};
  eager::cast(TensorView(const_cast<double*>(&c), DType::f64, {1}), TensorView(&out, DType::bf16, {1}));
  EXPECT_EQ(out.bits, 0x3F80);
}

// The promoted binary replica takes only torch's result dtype: computing two f32 operands in double,
// or two bf16 operands in f32 without the bf16 rounding, would not be the op torch runs.
TEST(RopeHostArithmetic, EagerPromotedBinaryRequiresThePromotedDtype) {
  float a = 1.0f / 3.0f, b = 3.0f, f32_out = 0.0f;
  double f64_out = 0.0;
  const bf16_t ha = bf(1.5f), hb = bf(2.0f);
  const f16_t fb{0x4000};  // 2.0
  const TensorView av(&a, DType::f32, {1}), bv(&b, DType::f32, {1});
  const TensorView hav(const_cast<bf16_t*>(&ha), DType::bf16, {1}), hbv(const_cast<bf16_t*>(&hb), DType::bf16, {1});
  const TensorView fbv(const_cast<f16_t*>(&fb), DType::f16, {1});
  const TensorView f32v(&f32_out, DType::f32, {1}), f64v(&f64_out, DType::f64, {1});
  EXPECT_THROW(eager::promoted_binary(eager::BinaryOp::mul, av, bv, f64v), Unsupported);
  EXPECT_THROW(eager::promoted_binary(eager::BinaryOp::mul, hav, hbv, f32v), Unsupported);
  eager::promoted_binary(eager::BinaryOp::mul, av, bv, f32v);
  EXPECT_EQ(f32_out, a * b);
  eager::promoted_binary(eager::BinaryOp::mul, hav, fbv, f32v);  // bf16 * f16 promotes to f32
  EXPECT_EQ(f32_out, 3.0f);
}

// ---- guards ----------------------------------------------------------------------------------

struct RopeGuards : ::testing::Test {
  // x [B=2, S=4, H=3, D=8], tables [S, 1, R=8]
  std::vector<bf16_t> xs = std::vector<bf16_t>(2 * 4 * 3 * 8, bf(1.0f));
  std::vector<bf16_t> ks = std::vector<bf16_t>(2 * 4 * 3 * 8, bf(0.5f));
  std::vector<bf16_t> os = std::vector<bf16_t>(2 * 4 * 3 * 8);
  std::vector<bf16_t> os2 = std::vector<bf16_t>(2 * 4 * 3 * 8);
  std::vector<float> cs = std::vector<float>(4 * 8, 0.5f), ss = std::vector<float>(4 * 8, 0.25f);
  std::vector<bf16_t> cb = std::vector<bf16_t>(4 * 8, bf(0.5f));
  std::vector<double> cd = std::vector<double>(4 * 8, 0.5), sd = std::vector<double>(4 * 8, 0.25);
  TensorView x{xs.data(), DType::bf16, {2, 4, 3, 8}};
  TensorView k{ks.data(), DType::bf16, {2, 4, 3, 8}};
  TensorView out{os.data(), DType::bf16, {2, 4, 3, 8}};
  TensorView out2{os2.data(), DType::bf16, {2, 4, 3, 8}};
  TensorView cos{cs.data(), DType::f32, {4, 1, 8}};
  TensorView sin{ss.data(), DType::f32, {4, 1, 8}};
  TensorView cos_bf16{cb.data(), DType::bf16, {4, 1, 8}};
  TensorView cos64{cd.data(), DType::f64, {1, 4, 1, 8}};
  TensorView sin64{sd.data(), DType::f64, {1, 4, 1, 8}};

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
  std::string rotate_guard(const TensorView& xv, const TensorView& c, const TensorView& s, const TensorView& o,
                           RopeMath m = RopeMath::fp32_opmath) {
    return guard_of(
        "rope_rotate_half", [&](std::string* why) { return can_use_rope_rotate_half(xv, c, s, o, m, why); },
        [&] { rope_rotate_half(xv, c, s, o, m); });
  }
  std::string interleaved_guard(const TensorView& q, const TensorView& kv, const TensorView& c, const TensorView& s,
                                const TensorView& qo, const TensorView& ko) {
    return guard_of(
        "interleaved_rope_fp64",
        [&](std::string* why) { return can_use_interleaved_rope_fp64(q, kv, c, s, qo, ko, why); },
        [&] { interleaved_rope_fp64(q, kv, c, s, qo, ko); });
  }
  std::string pairs_guard(const TensorView& xv, const TensorView& c, const TensorView& s, const TensorView& o) {
    return guard_of(
        "rope_interleaved_pairs",
        [&](std::string* why) { return can_use_rope_interleaved_pairs(xv, c, s, o, why); },
        [&] { rope_interleaved_pairs(xv, c, s, o); });
  }
};

TEST_F(RopeGuards, AcceptsTheBaseCases) {
  EXPECT_TRUE(can_use_rope_rotate_half(x, cos, sin, out, RopeMath::fp32_opmath));
  EXPECT_TRUE(can_use_rope_rotate_half(x, cos, sin, x, RopeMath::fp32_opmath));  // in place
  EXPECT_TRUE(can_use_rope_rotate_half(x, cos_bf16, cos_bf16, out, RopeMath::fp32_opmath));
  EXPECT_TRUE(can_use_rope_rotate_half(x, cos_bf16, cos_bf16, out, RopeMath::storage_dtype));
  EXPECT_TRUE(can_use_rope_rotate_half(x, cos.narrow(-1, 0, 4), sin.narrow(-1, 0, 4), out, RopeMath::fp32_opmath));
  EXPECT_TRUE(can_use_interleaved_rope_fp64(x, k, cos64, sin64, out, out2));
  EXPECT_TRUE(can_use_interleaved_rope_fp64(x, k, cos64, sin64, x, k));  // in place
}

TEST_F(RopeGuards, RotateHalfRejectsF32TablesForStorageMath) {
  EXPECT_EQ(rotate_guard(x, cos, sin, out, RopeMath::storage_dtype), "dtype");
}

TEST_F(RopeGuards, RotateHalfRejectsF64Tables) {
  int64_t sizes[] = {4, 1, 8}, strides[] = {8, 8, 1};
  EXPECT_EQ(rotate_guard(x, cos64.restrided(sizes, strides, 3), sin64.restrided(sizes, strides, 3), out), "dtype");
}

TEST_F(RopeGuards, RotateHalfRejectsMismatchedSin) {
  EXPECT_EQ(rotate_guard(x, cos, sin.narrow(-1, 0, 4), out), "shape");
  EXPECT_EQ(rotate_guard(x, cos, cos_bf16, out), "dtype");
}

TEST_F(RopeGuards, RotateHalfRejectsBadRotaryDim) {
  std::string why;
  EXPECT_EQ(rotate_guard(x, cos.narrow(-1, 0, 3), sin.narrow(-1, 0, 3), out), "rot_dim");
  std::vector<float> wide(4 * 10, 0.5f);
  TensorView w(wide.data(), DType::f32, {4, 1, 10});
  EXPECT_EQ(rotate_guard(x, w, w, out), "rot_dim");
  EXPECT_FALSE(can_use_rope_rotate_half(x, w, w, out, RopeMath::fp32_opmath, &why));
  EXPECT_NE(why.find("0 < R <= D = 8, got 10"), std::string::npos) << why;
}

TEST_F(RopeGuards, RotateHalfRejectsTablesThatDoNotBroadcast) {
  std::vector<float> t(5 * 8, 0.5f);
  TensorView bad(t.data(), DType::f32, {5, 1, 8});  // 5 tokens against S = 4
  EXPECT_EQ(rotate_guard(x, bad, bad, out), "broadcast");
}

TEST_F(RopeGuards, RotateHalfRejectsStridedTableColumns) {
  int64_t sizes[] = {4, 1, 4}, strides[] = {8, 8, 2};
  EXPECT_EQ(rotate_guard(x, cos.restrided(sizes, strides, 3), sin.restrided(sizes, strides, 3), out),
            "last_dim_stride");
}

TEST_F(RopeGuards, RotateHalfRejectsNonContiguousHeads) {
  int64_t sizes[] = {2, 4, 3, 4}, strides[] = {96, 24, 8, 2};
  EXPECT_EQ(rotate_guard(x.restrided(sizes, strides, 4), cos.narrow(-1, 0, 4), sin.narrow(-1, 0, 4),
                         out.restrided(sizes, strides, 4)),
            "last_dim_stride");
}

TEST_F(RopeGuards, RotateHalfRejectsRank) {
  int64_t sizes[] = {192}, strides[] = {1};
  EXPECT_EQ(rotate_guard(x.restrided(sizes, strides, 1), cos, sin, out.restrided(sizes, strides, 1)), "rank");
}

TEST_F(RopeGuards, RotateHalfRejectsUnsupportedDtype) {
  std::vector<double> d(2 * 4 * 3 * 8, 1.0);
  TensorView xd(d.data(), DType::f64, {2, 4, 3, 8});
  EXPECT_EQ(rotate_guard(xd, cos, sin, xd), "dtype");
}

TEST_F(RopeGuards, RotateHalfRejectsOutputs) {
  EXPECT_EQ(rotate_guard(x, cos, sin, TensorView(os.data(), DType::bf16, {2, 4, 3, 4})), "shape");
  EXPECT_EQ(rotate_guard(x, cos, sin, TensorView(os.data(), DType::f16, {2, 4, 3, 8})), "dtype");
  std::vector<bf16_t> big(2 * 4 * 3 * 8 + 1);
  TensorView a(big.data(), DType::bf16, {2, 4, 3, 8}), shifted(big.data() + 1, DType::bf16, {2, 4, 3, 8});
  EXPECT_EQ(rotate_guard(a, cos, sin, shifted), "overlap");
  int64_t sizes[] = {2, 4, 3, 8}, strides[] = {96, 0, 8, 1};
  EXPECT_EQ(rotate_guard(x, cos, sin, out.restrided(sizes, strides, 4)), "overlap");
}

TEST_F(RopeGuards, RotateHalfRejectsDeviceMismatchAndNullData) {
  TensorView cc(cs.data(), DType::f32, {4, 1, 8}, Device::cuda(0));
  EXPECT_EQ(rotate_guard(x, cc, cc, out), "device");
  TensorView nx(nullptr, DType::bf16, {2, 4, 3, 8});
  EXPECT_EQ(rotate_guard(nx, cos, sin, out), "data");
}

TEST_F(RopeGuards, RotateHalfRejectsNegativeStride) {
  int64_t sizes[] = {2, 4, 3, 8}, strides[] = {96, -24, 8, 1};
  TensorView neg(xs.data() + 3 * 24, DType::bf16, sizes, strides, 4);
  EXPECT_EQ(rotate_guard(neg, cos, sin, out), "stride");
}

TEST_F(RopeGuards, RotateHalfRejectsTooManyElements) {
  int64_t sizes[] = {1, int64_t(1) << 25, 8, 8}, strides[] = {int64_t(1) << 31, 64, 8, 1};
  EXPECT_EQ(rotate_guard(x.restrided(sizes, strides, 4), cos.narrow(0, 0, 1), sin.narrow(0, 0, 1),
                         out.restrided(sizes, strides, 4)),
            "extent");
}

TEST_F(RopeGuards, InterleavedRejectsNonF64Tables) {
  EXPECT_EQ(interleaved_guard(x, k, cos, sin, out, out2), "dtype");
}

TEST_F(RopeGuards, InterleavedRejectsMismatchedK) {
  EXPECT_EQ(interleaved_guard(x, TensorView(ks.data(), DType::f16, {2, 4, 3, 8}), cos64, sin64, out, out2), "dtype");
  EXPECT_EQ(interleaved_guard(x, TensorView(ks.data(), DType::bf16, {2, 4, 2, 8}), cos64, sin64, out, out2), "shape");
}

TEST_F(RopeGuards, InterleavedRejectsOddHeadDim) {
  int64_t sizes[] = {2, 4, 3, 7}, strides[] = {96, 24, 8, 1};
  EXPECT_EQ(interleaved_guard(x.restrided(sizes, strides, 4), k.restrided(sizes, strides, 4),
                              cos64.narrow(-1, 0, 7), sin64.narrow(-1, 0, 7), out.restrided(sizes, strides, 4),
                              out2.restrided(sizes, strides, 4)),
            "head_dim");
}

TEST_F(RopeGuards, InterleavedRejectsTableWidth) {
  std::string why;
  EXPECT_EQ(interleaved_guard(x, k, cos64.narrow(-1, 0, 4), sin64.narrow(-1, 0, 4), out, out2), "shape");
  EXPECT_FALSE(can_use_interleaved_rope_fp64(x, k, cos64.narrow(-1, 0, 4), sin64, out, out2, &why));
  EXPECT_NE(why.find("must have q's head dim 8"), std::string::npos) << why;
}

TEST_F(RopeGuards, InterleavedRejectsTablesThatDoNotBroadcast) {
  std::vector<double> t(5 * 8, 0.5);
  TensorView bad(t.data(), DType::f64, {1, 5, 1, 8});
  EXPECT_EQ(interleaved_guard(x, k, bad, bad, out, out2), "broadcast");
}

TEST_F(RopeGuards, InterleavedRejectsOverlappingOutputs) {
  EXPECT_EQ(interleaved_guard(x, k, cos64, sin64, out, out), "overlap");  // q_out == k_out
  EXPECT_EQ(interleaved_guard(x, k, cos64, sin64, k, out2), "overlap");   // q_out is k
  EXPECT_EQ(interleaved_guard(x, k, cos64, sin64, out, x), "overlap");    // k_out is q
}

TEST_F(RopeGuards, InterleavedRejectsWrongOutputs) {
  EXPECT_EQ(interleaved_guard(x, k, cos64, sin64, out, TensorView(os2.data(), DType::bf16, {2, 4, 3, 4})), "shape");
  EXPECT_EQ(interleaved_guard(x, k, cos64, sin64, TensorView(os.data(), DType::f32, {2, 4, 3, 4}), out2), "dtype");
}

TEST_F(RopeGuards, InterleavedPairsAcceptsTheBaseCases) {
  EXPECT_TRUE(can_use_rope_interleaved_pairs(x, cos, sin, out));
  EXPECT_TRUE(can_use_rope_interleaved_pairs(x, cos, sin, x));  // in place
  EXPECT_TRUE(can_use_rope_interleaved_pairs(x, cos_bf16, cos_bf16, out));
  int64_t sizes[] = {2, 3, 4, 8}, strides[] = {96, 8, 24, 1};  // [B, H, S, D] view, tables [S, D]
  EXPECT_TRUE(can_use_rope_interleaved_pairs(x.restrided(sizes, strides, 4), TensorView(cs.data(), DType::f32, {4, 8}),
                                             TensorView(ss.data(), DType::f32, {4, 8}),
                                             out.restrided(sizes, strides, 4)));
}

TEST_F(RopeGuards, InterleavedPairsRejectsTableDtypes) {
  int64_t sizes[] = {4, 1, 8}, strides[] = {8, 8, 1};
  EXPECT_EQ(pairs_guard(x, cos64.restrided(sizes, strides, 3), sin64.restrided(sizes, strides, 3), out), "dtype");
  EXPECT_EQ(pairs_guard(x, cos, cos_bf16, out), "dtype");
  std::vector<f16_t> h(4 * 8);
  TensorView cos_f16(h.data(), DType::f16, {4, 1, 8});
  EXPECT_EQ(pairs_guard(x, cos_f16, cos_f16, out), "dtype");  // neither f32 nor x's dtype
}

TEST_F(RopeGuards, InterleavedPairsRejectsTableWidths) {
  std::string why;
  EXPECT_EQ(pairs_guard(x, cos.narrow(-1, 0, 4), sin.narrow(-1, 0, 4), out), "shape");
  EXPECT_FALSE(can_use_rope_interleaved_pairs(x, cos.narrow(-1, 0, 4), sin.narrow(-1, 0, 4), out, &why));
  EXPECT_NE(why.find("must have x's head dim 8"), std::string::npos) << why;
  EXPECT_EQ(pairs_guard(x, cos, sin.narrow(-1, 0, 4), out), "shape");  // sin unlike cos
  std::vector<float> wide(4 * 10, 0.5f);
  TensorView w(wide.data(), DType::f32, {4, 1, 10});
  EXPECT_EQ(pairs_guard(x, w, w, out), "rot_dim");
}

TEST_F(RopeGuards, InterleavedPairsRejectsOddHeadDim) {
  int64_t sizes[] = {2, 4, 3, 7}, strides[] = {96, 24, 8, 1};
  EXPECT_EQ(pairs_guard(x.restrided(sizes, strides, 4), cos.narrow(-1, 0, 7), sin.narrow(-1, 0, 7),
                        out.restrided(sizes, strides, 4)),
            "head_dim");
}

TEST_F(RopeGuards, InterleavedPairsRejectsTableLayouts) {
  std::vector<float> t(5 * 8, 0.5f);
  TensorView bad(t.data(), DType::f32, {5, 1, 8});  // 5 tokens against S = 4
  EXPECT_EQ(pairs_guard(x, bad, bad, out), "broadcast");
  int64_t sizes[] = {4, 1, 4}, strides[] = {8, 8, 2};
  int64_t xsizes[] = {2, 4, 3, 4}, xstrides[] = {96, 24, 8, 1};
  EXPECT_EQ(pairs_guard(x.restrided(xsizes, xstrides, 4), cos.restrided(sizes, strides, 3),
                        sin.restrided(sizes, strides, 3), out.restrided(xsizes, xstrides, 4)),
            "last_dim_stride");
  int64_t nsizes[] = {4, 1, 8}, nstrides[] = {-8, 8, 1};
  TensorView neg_table(cs.data() + 24, DType::f32, nsizes, nstrides, 3);
  EXPECT_EQ(pairs_guard(x, neg_table, neg_table, out), "stride");
  EXPECT_EQ(pairs_guard(x, cos.narrow(-1, 0, 0), sin.narrow(-1, 0, 0), out), "rot_dim");
}

TEST_F(RopeGuards, InterleavedPairsRejectsInputs) {
  int64_t sizes[] = {2, 4, 3, 4}, strides[] = {96, 24, 8, 2};
  EXPECT_EQ(pairs_guard(x.restrided(sizes, strides, 4), cos.narrow(-1, 0, 4), sin.narrow(-1, 0, 4),
                        out.restrided(sizes, strides, 4)),
            "last_dim_stride");
  int64_t flat[] = {192}, flat_strides[] = {1};
  EXPECT_EQ(pairs_guard(x.restrided(flat, flat_strides, 1), cos, sin, out.restrided(flat, flat_strides, 1)), "rank");
  std::vector<double> d(2 * 4 * 3 * 8, 1.0);
  TensorView xd(d.data(), DType::f64, {2, 4, 3, 8});
  EXPECT_EQ(pairs_guard(xd, cos, sin, xd), "dtype");
  int64_t nsizes[] = {2, 4, 3, 8}, nstrides[] = {96, -24, 8, 1};
  EXPECT_EQ(pairs_guard(TensorView(xs.data() + 3 * 24, DType::bf16, nsizes, nstrides, 4), cos, sin, out), "stride");
  int64_t big[] = {1, int64_t(1) << 25, 8, 8}, big_strides[] = {int64_t(1) << 31, 64, 8, 1};
  EXPECT_EQ(pairs_guard(x.restrided(big, big_strides, 4), cos.narrow(0, 0, 1), sin.narrow(0, 0, 1),
                        out.restrided(big, big_strides, 4)),
            "extent");
}

TEST_F(RopeGuards, InterleavedPairsRejectsOutputs) {
  EXPECT_EQ(pairs_guard(x, cos, sin, TensorView(os.data(), DType::bf16, {2, 4, 3, 4})), "shape");
  EXPECT_EQ(pairs_guard(x, cos, sin, TensorView(os.data(), DType::f16, {2, 4, 3, 8})), "dtype");
  std::vector<bf16_t> buf(2 * 4 * 3 * 8 + 1);
  TensorView a(buf.data(), DType::bf16, {2, 4, 3, 8}), shifted(buf.data() + 1, DType::bf16, {2, 4, 3, 8});
  EXPECT_EQ(pairs_guard(a, cos, sin, shifted), "overlap");
  int64_t sizes[] = {2, 4, 3, 8}, strides[] = {96, 0, 8, 1};
  EXPECT_EQ(pairs_guard(x, cos, sin, out.restrided(sizes, strides, 4)), "overlap");
  EXPECT_EQ(pairs_guard(x, cos, sin, TensorView(cs.data(), DType::bf16, {2, 4, 3, 8})), "overlap");  // out on cos
}

TEST_F(RopeGuards, InterleavedPairsRejectsDeviceMismatchAndNullData) {
  TensorView cc(cs.data(), DType::f32, {4, 1, 8}, Device::cuda(0));
  EXPECT_EQ(pairs_guard(x, cc, cc, out), "device");
  EXPECT_EQ(pairs_guard(TensorView(nullptr, DType::bf16, {2, 4, 3, 8}), cos, sin, out), "data");
  EXPECT_EQ(pairs_guard(x, TensorView(nullptr, DType::f32, {4, 1, 8}), sin, out), "data");
}

// ---- fused_inplace_qknorm_rope guards -----------------------------------------------------------

struct QkNormRopeGuards : ::testing::Test {
  // q, k [B=1, S=16, H=2, D=128] in one buffer (k after q), tables [S, 1, 128] f32, weights [128]
  static constexpr int64_t kN = 16 * 2 * 128;
  std::vector<bf16_t> qk = std::vector<bf16_t>(2 * kN + 8, bf(1.0f));
  std::vector<bf16_t> ws = std::vector<bf16_t>(128, bf(1.0f));
  std::vector<float> cs = std::vector<float>(16 * 128, 0.5f);
  TensorView q{qk.data(), DType::bf16, {1, 16, 2, 128}};
  TensorView k{qk.data() + kN, DType::bf16, {1, 16, 2, 128}};
  TensorView w{ws.data(), DType::bf16, {128}};
  TensorView cos{cs.data(), DType::f32, {16, 1, 128}};

  std::string guard(RmsNormChain chain, const TensorView& qv, const TensorView& kv, const TensorView* qw,
                    const TensorView& c, RopeMath math = RopeMath::fp32_opmath) {
    std::string why;
    EXPECT_FALSE(can_use_fused_inplace_qknorm_rope(chain, qv, kv, qw, qw, 1e-6, c, c, math, &why));
    EXPECT_NE(why.find("fused_inplace_qknorm_rope: "), std::string::npos) << why;
    try {
      fused_inplace_qknorm_rope(chain, qv, kv, qw, qw, 1e-6, c, c, math);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(QkNormRopeGuards, AcceptsTheBaseCases) {
  for (RmsNormChain chain : {RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed}) {
    EXPECT_TRUE(can_use_fused_inplace_qknorm_rope(chain, q, k, &w, &w, 1e-6, cos, cos, RopeMath::fp32_opmath));
    EXPECT_TRUE(can_use_fused_inplace_qknorm_rope(chain, q, k, nullptr, nullptr, 1e-6, cos.narrow(-1, 0, 64),
                                                  cos.narrow(-1, 0, 64), RopeMath::fp32_opmath));
  }
}

TEST_F(QkNormRopeGuards, RejectsHeadDims) {
  int64_t sizes[] = {1, 16, 4, 64}, strides[] = {4096, 256, 64, 1};
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, q.restrided(sizes, strides, 4),
                  TensorView(qk.data() + kN, DType::bf16, sizes, strides, 4), nullptr, cos.narrow(-1, 0, 64)),
            "head_dim");
}

TEST_F(QkNormRopeGuards, RejectsTheGenericRmsNormPath) {
  // a contiguous q starting one element past an 8-byte boundary: aten's generic F.rms_norm path
  TensorView shifted(qk.data() + 1, DType::bf16, {1, 16, 2, 128});
  TensorView k2(qk.data() + kN + 4, DType::bf16, {1, 16, 2, 128});
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, shifted, k2, &w, cos), "rms_norm_path");
}

TEST_F(QkNormRopeGuards, RejectsA64LaneDecomposedMean) {
  // rows of 256 over fewer than 16 rows: Reduce.cuh gives each row 64 lanes
  int64_t sizes[] = {1, 2, 2, 256}, strides[] = {1024, 512, 256, 1};
  std::string why;
  EXPECT_EQ(guard(RmsNormChain::diffusers_decomposed, q.restrided(sizes, strides, 4),
                  TensorView(qk.data() + kN, DType::bf16, sizes, strides, 4), nullptr, cos.narrow(0, 0, 2)),
            "rms_norm_path");
  EXPECT_TRUE(can_use_fused_inplace_qknorm_rope(RmsNormChain::torch_rms_norm, q.restrided(sizes, strides, 4),
                                                TensorView(qk.data() + kN, DType::bf16, sizes, strides, 4), nullptr,
                                                nullptr, 1e-6, cos.narrow(0, 0, 2), cos.narrow(0, 0, 2),
                                                RopeMath::fp32_opmath, &why))
      << why;
}

TEST_F(QkNormRopeGuards, RejectsOverlapAndTables) {
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, q, q, &w, cos), "overlap");
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, q, k, &w, cos.narrow(-1, 0, 6).narrow(0, 0, 3)), "broadcast");
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, q, k, &w, cos, RopeMath::storage_dtype), "dtype");
  TensorView short_w(ws.data(), DType::bf16, {64});
  EXPECT_EQ(guard(RmsNormChain::torch_rms_norm, q, k, &short_w, cos), "shape");
}

}  // namespace
}  // namespace dfuse::test
