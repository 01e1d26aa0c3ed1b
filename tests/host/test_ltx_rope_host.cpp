// LTX RoPE ops on the host backend: fused == eager chain bit for bit over every case, the addcmul_
// rounding the chain relies on, and every guard's error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/ltx_rope_cases.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {
namespace {

class LtxRopeHost : public ::testing::TestWithParam<DType> {};

TEST_P(LtxRopeHost, QkNormSplitRopeMatchesEagerChain) {
  uint64_t seed = 4100;
  for (const auto& c : small_ltx2_split_rope_cases())
    EXPECT_EQ(run_ltx2_split_rope_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

TEST_P(LtxRopeHost, DecoderRopeMatchesEagerChain) {
  uint64_t seed = 4300;
  for (const auto& c : small_ltx25_decoder_rope_cases())
    EXPECT_EQ(run_ltx25_decoder_rope_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LtxRopeHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The eager addcmul_ replica is one fma (torch 2.11's pointwise_op_impl): with t1 = t2 = 1 + 2^-12,
// t1 * t2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 in fp32, so a product rounded before the add
// would give 2^-11; the fma keeps the 2^-24.
TEST(LtxRopeHostArithmetic, AddcmulIsOneFma) {
  const float t = 1.0f + 0x1p-12f;
  std::vector<float> self = {-1.0f, 3.0f}, t1 = {t, 0.5f}, t2 = {t, 2.0f};
  TensorView sv(self.data(), DType::f32, {2}), av(t1.data(), DType::f32, {2}), bv(t2.data(), DType::f32, {2});
  eager::addcmul_(sv, av, bv);
  EXPECT_EQ(self[0], 0x1p-11f + 0x1p-24f);
  EXPECT_EQ(self[1], 4.0f);
}

TEST(LtxRopeHostArithmetic, AddcmulRejectsNonF32) {
  std::vector<bf16_t> b(2);
  std::vector<float> f(2);
  TensorView bv(b.data(), DType::bf16, {2}), fv(f.data(), DType::f32, {2});
  EXPECT_THROW(eager::addcmul_(bv, fv, fv), Unsupported);
}

// One token, one head of D = 2 in f32: x = (1, 1) normalizes to rstd * x = (1, 1) exactly, the weight
// makes it (x1, x2) = (1, 1 + 2^-12). With c = -1 and s = -(1 + 2^-12) the first output is
// fma(-s, x2, x1 * c) = (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 with the fma; a product rounded before the
// add would lose the 2^-24 (the fp32 square rounds to 1 + 2^-11). The second is -(2 + 2^-11), exact.
TEST(LtxRopeHostArithmetic, SplitPairRoundsOnce) {
  const float t = 1.0f + 0x1p-12f;
  std::vector<float> x = {1.0f, 1.0f, 1.0f, 1.0f}, w = {1.0f, t}, out(4), ref(2);
  std::vector<float> cos = {-1.0f}, sin = {-t};
  TensorView qv(x.data(), DType::f32, {1, 1, 2}), kv(x.data() + 2, DType::f32, {1, 1, 2});
  TensorView qo(out.data(), DType::f32, {1, 1, 2}), ko(out.data() + 2, DType::f32, {1, 1, 2});
  TensorView rv(ref.data(), DType::f32, {1, 1, 2}), wv(w.data(), DType::f32, {2});
  TensorView cv(cos.data(), DType::f32, {1, 1, 1, 1}), sv(sin.data(), DType::f32, {1, 1, 1, 1});
  ltx2_qknorm_split_rope(qv, kv, &wv, &wv, 0.0, cv, sv, cv, sv, qo, ko);
  eager::Workspace ws(Device::host());
  eager::ltx2_qknorm_split_rope_chain(qv, &wv, 0.0, cv, sv, rv, ws);
  EXPECT_EQ(out[0], 0x1p-11f + 0x1p-24f);
  EXPECT_EQ(out[1], -(2.0f + 0x1p-11f));
  EXPECT_EQ(ref[0], out[0]);
  EXPECT_EQ(ref[1], out[1]);
  EXPECT_EQ(out[2], out[0]);  // k: the same values
  EXPECT_EQ(out[3], out[1]);
}

// ---- guards ----------------------------------------------------------------------------------------

struct Ltx2SplitRopeGuards : ::testing::Test {
  // q, k [B=1, S=4, C=2*64] bf16 in one buffer (k after q), tables [1, 2, 4, 32] f32, weights [128],
  // outputs in their own buffer.
  static constexpr int64_t kN = 4 * 128;
  std::vector<bf16_t> qk = std::vector<bf16_t>(2 * kN + 8, float_to_bf16(1.0f));
  std::vector<bf16_t> outs = std::vector<bf16_t>(2 * kN, float_to_bf16(0.0f));
  std::vector<bf16_t> ws = std::vector<bf16_t>(256, float_to_bf16(1.0f));
  std::vector<float> cs = std::vector<float>(2 * 4 * 64, 0.5f);
  TensorView q{qk.data(), DType::bf16, {1, 4, 128}};
  TensorView k{qk.data() + kN, DType::bf16, {1, 4, 128}};
  TensorView qo{outs.data(), DType::bf16, {1, 4, 128}};
  TensorView ko{outs.data() + kN, DType::bf16, {1, 4, 128}};
  TensorView w{ws.data(), DType::bf16, {128}};
  TensorView cos{cs.data(), DType::f32, {1, 2, 4, 32}};

  std::string guard(const TensorView& qv, const TensorView& kv, const TensorView* qw, const TensorView& c,
                    const TensorView& q_out, const TensorView& k_out, double eps = 1e-6) {
    std::string why;
    EXPECT_FALSE(can_use_ltx2_qknorm_split_rope(qv, kv, qw, qw, eps, c, c, c, c, q_out, k_out, &why));
    EXPECT_NE(why.find("ltx2_qknorm_split_rope: "), std::string::npos) << why;
    try {
      ltx2_qknorm_split_rope(qv, kv, qw, qw, eps, c, c, c, c, q_out, k_out);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(Ltx2SplitRopeGuards, AcceptsTheBaseCases) {
  EXPECT_TRUE(can_use_ltx2_qknorm_split_rope(q, k, &w, &w, 1e-6, cos, cos, cos, cos, qo, ko));
  EXPECT_TRUE(can_use_ltx2_qknorm_split_rope(q, k, nullptr, nullptr, 1e-6, cos, cos, cos, cos, qo, ko));
  EXPECT_TRUE(can_use_ltx2_qknorm_split_rope(q, k, &w, &w, 1e-6, cos, cos, cos, cos, q, k));  // in place
}

TEST_F(Ltx2SplitRopeGuards, RejectsRank) {
  TensorView q4(qk.data(), DType::bf16, {1, 4, 2, 64});
  EXPECT_EQ(guard(q4, k, &w, cos, qo, ko), "rank");
}

TEST_F(Ltx2SplitRopeGuards, RejectsTableShapes) {
  TensorView three_heads(cs.data(), DType::f32, {1, 3, 4, 32});  // 3 * 64 != 128
  EXPECT_EQ(guard(q, k, &w, three_heads, qo, ko), "shape");
  TensorView wrong_seq(cs.data(), DType::f32, {1, 2, 2, 32});
  EXPECT_EQ(guard(q, k, &w, wrong_seq, qo, ko), "shape");
  TensorView rank3(cs.data(), DType::f32, {2, 4, 32});
  EXPECT_EQ(guard(q, k, &w, rank3, qo, ko), "shape");
  TensorView four_heads(cs.data(), DType::f32, {1, 4, 4, 16});  // 4 heads of D = 32: H * D = 128, accepted
  EXPECT_TRUE(can_use_ltx2_qknorm_split_rope(q, k, &w, &w, 1e-6, four_heads, four_heads, four_heads, four_heads, qo, ko));
}

TEST_F(Ltx2SplitRopeGuards, RejectsTableDtype) {
  std::vector<bf16_t> bt(2 * 4 * 64);
  TensorView bf_table(bt.data(), DType::bf16, {1, 2, 4, 32});
  EXPECT_EQ(guard(q, k, &w, bf_table, qo, ko), "dtype");
}

TEST_F(Ltx2SplitRopeGuards, RejectsTableLayout) {
  int64_t sizes[] = {1, 2, 4, 32}, strides[] = {512, 256, 64, 2};
  EXPECT_EQ(guard(q, k, &w, cos.restrided(sizes, strides, 4), qo, ko), "last_dim_stride");
}

TEST_F(Ltx2SplitRopeGuards, RejectsMixedDtypes) {
  std::vector<float> kf(kN);
  TensorView k32(kf.data(), DType::f32, {1, 4, 128});
  EXPECT_EQ(guard(q, k32, nullptr, cos, qo, TensorView(kf.data(), DType::f32, {1, 4, 128})), "dtype");
}

TEST_F(Ltx2SplitRopeGuards, RejectsWeightShape) {
  TensorView w64(ws.data(), DType::bf16, {64});
  EXPECT_EQ(guard(q, k, &w64, cos, qo, ko), "shape");
}

TEST_F(Ltx2SplitRopeGuards, RejectsEps) { EXPECT_EQ(guard(q, k, &w, cos, qo, ko, -1.0), "eps"); }

TEST_F(Ltx2SplitRopeGuards, RejectsOverlappingOutputs) {
  // q_out overlapping k (an input other than its own), and k_out partially overlapping q_out
  EXPECT_EQ(guard(q, k, &w, cos, k, ko), "overlap");
  TensorView shifted(outs.data() + 64, DType::bf16, {1, 4, 128});
  EXPECT_EQ(guard(q, k, &w, cos, qo, shifted), "overlap");
}

TEST_F(Ltx2SplitRopeGuards, RejectsOutputShape) {
  TensorView small(outs.data(), DType::bf16, {1, 2, 128});
  EXPECT_EQ(guard(q, k, &w, cos, small, ko), "shape");
}

TEST_F(Ltx2SplitRopeGuards, RejectsLongRows) {
  std::vector<bf16_t> big(8200 * 2);
  std::vector<float> bc(8200);
  TensorView bq(big.data(), DType::bf16, {1, 1, 8200}), bk(big.data() + 8200, DType::bf16, {1, 1, 8200});
  std::vector<bf16_t> bo(8200 * 2);
  TensorView bqo(bo.data(), DType::bf16, {1, 1, 8200}), bko(bo.data() + 8200, DType::bf16, {1, 1, 8200});
  TensorView bt(bc.data(), DType::f32, {1, 1, 1, 4100});
  EXPECT_EQ(guard(bq, bk, nullptr, bt, bqo, bko), "extent");
}

// A rejected call writes nothing.
TEST_F(Ltx2SplitRopeGuards, RejectedCallLeavesOutputsIntact) {
  const std::vector<bf16_t> before = outs;
  EXPECT_THROW(ltx2_qknorm_split_rope(q, k, &w, &w, -1.0, cos, cos, cos, cos, qo, ko), Unsupported);
  for (size_t i = 0; i < outs.size(); ++i) ASSERT_EQ(outs[i].bits, before[i].bits) << i;
}

// ---- ltx25_decoder_rope --------------------------------------------------------------------------------

// The axis split of LTX2VideoVaeRotaryPosEmbed3D: a quarter of the head (even) to the frames, the rest
// halved, moved by 2 when the halves would be odd.
TEST(LtxRopeHostArithmetic, DecoderDimSplit) {
  auto s = ltx25_decoder_rope_dim_split(64);
  EXPECT_EQ(s[0], 16);
  EXPECT_EQ(s[1], 24);
  s = ltx25_decoder_rope_dim_split(128);
  EXPECT_EQ(s[0], 32);
  EXPECT_EQ(s[1], 48);
  s = ltx25_decoder_rope_dim_split(40);
  EXPECT_EQ(s[0], 8);
  EXPECT_EQ(s[2], 16);
  s = ltx25_decoder_rope_dim_split(8);
  EXPECT_EQ(s[0], 0);
  EXPECT_EQ(s[1], 4);
}

// Each product and the difference round in fp32 before the one rounding to T: with e = o = 1 + 2^-12
// (f32), c = 1 + 2^-12 and s = 1, e * c = 1 + 2^-11 (the 2^-24 tie rounds to even) and the first output
// is (1 + 2^-11) - (1 + 2^-12) = 2^-12; an fma would give 2^-12 + 2^-24.
TEST(LtxRopeHostArithmetic, DecoderPairRoundsEachOp) {
  const float t = 1.0f + 0x1p-12f;
  // one token, one head of D = 8: split (0, 4, 4): the row axis has pairs 0-1, the column axis 2-3
  std::vector<float> x(8, t), out(8, 0.0f), k(8, t), kout(8, 0.0f);
  std::vector<float> ch = {t, t}, sh = {1.0f, 1.0f}, cw = {t, t}, sw = {1.0f, 1.0f};
  std::vector<float> none(1);
  TensorView xv(x.data(), DType::f32, {1, 1, 1, 1, 1, 8}), ov(out.data(), DType::f32, {1, 1, 1, 1, 1, 8});
  TensorView kv(k.data(), DType::f32, {1, 1, 1, 1, 1, 8}), kov(kout.data(), DType::f32, {1, 1, 1, 1, 1, 8});
  TensorView ct(none.data(), DType::f32, {1, 0}), chv(ch.data(), DType::f32, {1, 2}), shv(sh.data(), DType::f32, {1, 2});
  TensorView cwv(cw.data(), DType::f32, {1, 2}), swv(sw.data(), DType::f32, {1, 2});
  ltx25_decoder_rope(xv, kv, ct, ct, chv, shv, cwv, swv, ov, kov);
  EXPECT_EQ(out[0], 0x1p-12f);
  // second = e * s + o * c = (1 + 2^-12) + (1 + 2^-11) = 2 + 3 * 2^-12 (exact in fp32)
  EXPECT_EQ(out[1], 2.0f + 3.0f * 0x1p-12f);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(kout[i], out[i]) << i;
}

struct Ltx25DecoderRopeGuards : ::testing::Test {
  // q, k [1, 2, 3, 4, 2, 64] bf16, tables (frame 16, row 24, column 24 channels), outputs apart
  static constexpr int64_t kN = 2 * 3 * 4 * 2 * 64;
  std::vector<bf16_t> qk = std::vector<bf16_t>(2 * kN, float_to_bf16(1.0f));
  std::vector<bf16_t> outs = std::vector<bf16_t>(2 * kN, float_to_bf16(0.0f));
  std::vector<float> tab = std::vector<float>(256, 0.5f);
  TensorView q{qk.data(), DType::bf16, {1, 2, 3, 4, 2, 64}};
  TensorView k{qk.data() + kN, DType::bf16, {1, 2, 3, 4, 2, 64}};
  TensorView qo{outs.data(), DType::bf16, {1, 2, 3, 4, 2, 64}};
  TensorView ko{outs.data() + kN, DType::bf16, {1, 2, 3, 4, 2, 64}};
  TensorView ct{tab.data(), DType::f32, {2, 8}};
  TensorView ch{tab.data(), DType::f32, {3, 12}};
  TensorView cw{tab.data(), DType::f32, {4, 12}};

  std::string guard(const TensorView& qv, const TensorView& kv, const TensorView& t, const TensorView& h,
                    const TensorView& w, const TensorView& q_out, const TensorView& k_out) {
    std::string why;
    EXPECT_FALSE(can_use_ltx25_decoder_rope(qv, kv, t, t, h, h, w, w, q_out, k_out, &why));
    EXPECT_NE(why.find("ltx25_decoder_rope: "), std::string::npos) << why;
    try {
      ltx25_decoder_rope(qv, kv, t, t, h, h, w, w, q_out, k_out);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(Ltx25DecoderRopeGuards, AcceptsTheBaseCases) {
  EXPECT_TRUE(can_use_ltx25_decoder_rope(q, k, ct, ct, ch, ch, cw, cw, qo, ko));
  EXPECT_TRUE(can_use_ltx25_decoder_rope(q, k, ct, ct, ch, ch, cw, cw, q, k));  // in place
}

TEST_F(Ltx25DecoderRopeGuards, RejectsRank) {
  TensorView q5(qk.data(), DType::bf16, {2, 3, 4, 2, 64});
  EXPECT_EQ(guard(q5, k, ct, ch, cw, qo, ko), "rank");
}

TEST_F(Ltx25DecoderRopeGuards, RejectsTableShapes) {
  TensorView wrong_frames(tab.data(), DType::f32, {3, 8});
  EXPECT_EQ(guard(q, k, wrong_frames, ch, cw, qo, ko), "shape");
  TensorView rank1(tab.data(), DType::f32, {16});
  EXPECT_EQ(guard(q, k, rank1, ch, cw, qo, ko), "shape");
}

TEST_F(Ltx25DecoderRopeGuards, RejectsChannelSum) {
  TensorView wide(tab.data(), DType::f32, {2, 10});  // 20 + 24 + 24 != 64
  EXPECT_EQ(guard(q, k, wide, ch, cw, qo, ko), "head_dim");
}

TEST_F(Ltx25DecoderRopeGuards, RejectsTableDtype) {
  std::vector<bf16_t> bt(64);
  TensorView bf(bt.data(), DType::bf16, {2, 8});
  EXPECT_EQ(guard(q, k, bf, ch, cw, qo, ko), "dtype");
}

TEST_F(Ltx25DecoderRopeGuards, RejectsStrides) {
  int64_t sizes[] = {2, 8}, strides[] = {16, 2};
  EXPECT_EQ(guard(q, k, ct.restrided(sizes, strides, 2), ch, cw, qo, ko), "last_dim_stride");
}

TEST_F(Ltx25DecoderRopeGuards, RejectsShapeMismatch) {
  TensorView k_small(qk.data() + kN, DType::bf16, {1, 2, 3, 4, 1, 64});
  EXPECT_EQ(guard(q, k_small, ct, ch, cw, qo, ko), "shape");
}

TEST_F(Ltx25DecoderRopeGuards, RejectsOverlaps) {
  EXPECT_EQ(guard(q, k, ct, ch, cw, k, ko), "overlap");  // q_out is k
  TensorView shifted(outs.data() + 64, DType::bf16, {1, 2, 3, 4, 2, 64});
  EXPECT_EQ(guard(q, k, ct, ch, cw, qo, shifted), "overlap");
}

TEST_F(Ltx25DecoderRopeGuards, RejectedCallLeavesOutputsIntact) {
  const std::vector<bf16_t> before = outs;
  TensorView wide(tab.data(), DType::f32, {2, 10});
  EXPECT_THROW(ltx25_decoder_rope(q, k, wide, wide, ch, ch, cw, cw, qo, ko), Unsupported);
  for (size_t i = 0; i < outs.size(); ++i) ASSERT_EQ(outs[i].bits, before[i].bits) << i;
}

}  // namespace
}  // namespace dfuse::test
