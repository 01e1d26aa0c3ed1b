// The other forms of fused_inplace_qknorm_rope on the host backend: the one-rounding form within its
// stated bound of the split chain (and provably not that chain), the out-of-place and pack-KV forms bit
// for bit against the split chain with their inputs intact, and their guards.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/data_movement.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {
namespace {

const Device kHost = Device::host();
constexpr double kEps = 1e-6;

// Every element of a contiguous view as float.
std::vector<float> values(const TensorView& t) {
  const std::vector<uint8_t> b = gather_bytes(t);
  std::vector<float> out(size_t(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t.dtype() == DType::f32) {
      std::memcpy(&out[i], b.data() + 4 * i, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, b.data() + 2 * i, 2);
      out[i] = t.dtype() == DType::bf16 ? bf16_to_float(bf16_t{h}) : f16_to_float(f16_t{h});
    }
  }
  return out;
}

struct FormsCase {
  int64_t batch, seq, heads, head_dim, rot;
  double amplitude;
  bool specials;
};

// The one-rounding form against the split chain: the stated bound on every rotated element, equality
// on the tail and for f32; returns how many elements differ (the form is one rounding away).
int64_t check_one_rounding(DType t, RmsNormChain chain, const FormsCase& c, uint64_t seed) {
  const std::vector<int64_t> shape = {c.batch, c.seq, c.heads, c.head_dim};
  auto q = random_tensor(kHost, t, shape, {}, 0, {seed, c.amplitude, c.specials});
  auto k = random_tensor(kHost, t, shape, {}, 0, {seed + 1, c.amplitude, c.specials});
  auto qw = random_tensor(kHost, t, {c.head_dim}, {}, 0, {seed + 2, 0.75, false});
  auto cos = random_tensor(kHost, DType::f32, {c.seq, 1, c.rot}, {}, 0, {seed + 3, 0.5, false});
  auto sin = random_tensor(kHost, DType::f32, {c.seq, 1, c.rot}, {}, 0, {seed + 4, 0.5, false});
  auto split = poisoned_tensor(kHost, t, shape, kOutputPoison), normed = poisoned_tensor(kHost, t, shape, kOutputPoison);
  eager::Workspace ws(kHost);
  eager::qknorm_rope_chain(chain, q.view, &qw.view, kEps, cos.view, sin.view, RopeMath::fp32_opmath, split.view, ws);
  if (chain == RmsNormChain::torch_rms_norm)
    eager::rms_norm(q.view, &qw.view, kEps, normed.view);
  else
    eager::rms_norm_decomposed_chain(q.view, &qw.view, kEps, normed.view, ws);
  std::string why;
  EXPECT_TRUE(can_use_fused_inplace_qknorm_rope_one_rounding(chain, q.view, k.view, &qw.view, &qw.view, kEps, cos.view,
                                                             sin.view, &why))
      << why;
  fused_inplace_qknorm_rope_one_rounding(chain, q.view, k.view, &qw.view, &qw.view, kEps, cos.view, sin.view);
  const std::vector<float> f = values(q.view), e = values(split.view), n = values(normed.view),
                           cs = values(cos.view), sn = values(sin.view);
  const double u = unit_roundoff(t), d = half_min_subnormal(t);
  int64_t differ = 0;
  const int64_t half = c.rot / 2;
  for (int64_t i = 0; i < int64_t(f.size()); ++i) {
    const int64_t col = i % c.head_dim, token = (i / (c.heads * c.head_dim)) % c.seq;
    const bool same_bits = std::memcmp(&f[size_t(i)], &e[size_t(i)], 4) == 0;
    if (std::isnan(e[size_t(i)]) || std::isnan(f[size_t(i)])) {
      EXPECT_TRUE(std::isnan(e[size_t(i)]) && std::isnan(f[size_t(i)])) << "element " << i;
      continue;
    }
    if (t == DType::f32 || col >= c.rot) {
      EXPECT_TRUE(same_bits) << "element " << i << ": " << f[size_t(i)] << " vs " << e[size_t(i)];
      continue;
    }
    if (!same_bits) ++differ;
    if (std::isinf(e[size_t(i)]) || std::isinf(f[size_t(i)])) {
      EXPECT_EQ(f[size_t(i)], e[size_t(i)]) << "element " << i;
      continue;
    }
    const int64_t partner = i - col + (col < half ? col + half : col - half);
    const double cv = cs[size_t(token * c.rot + col)], sv = sn[size_t(token * c.rot + col)];
    const double bound = (u + std::ldexp(1.0, -21)) * (std::fabs(cv * n[size_t(i)]) + std::fabs(sv * n[size_t(partner)])) +
                         u * (std::fabs(f[size_t(i)]) + std::fabs(e[size_t(i)])) + (std::fabs(cv) + std::fabs(sv) + 2) * d;
    EXPECT_LE(std::fabs(double(f[size_t(i)]) - double(e[size_t(i)])), bound)
        << "element " << i << ": fused " << f[size_t(i)] << " split " << e[size_t(i)];
  }
  return differ;
}

class QkNormRopeForms : public ::testing::TestWithParam<DType> {};

TEST_P(QkNormRopeForms, OneRoundingWithinItsBound) {
  const std::vector<FormsCase> cases = {{1, 9, 3, 128, 128, 1.0, false},   {2, 5, 2, 128, 64, 3.0e4, false},
                                        {1, 7, 4, 256, 160, 1.0e-20, false}, {1, 17, 3, 128, 96, 1.0, true},
                                        {1, 33, 4, 128, 128, 300.0, false}};
  uint64_t seed = 5100;
  int64_t differ = 0;
  for (RmsNormChain chain : {RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed})
    for (const auto& c : cases) differ += check_one_rounding(GetParam(), chain, c, seed++);
  if (GetParam() == DType::f32)
    EXPECT_EQ(differ, 0);
  else
    EXPECT_GT(differ, 0) << "the one-rounding form gave the split chain's bits everywhere: the inputs do not separate";
}

TEST_P(QkNormRopeForms, OutOfPlaceMatchesSplitChain) {
  const DType t = GetParam();
  uint64_t seed = 5300;
  for (RmsNormChain chain : {RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed})
    for (RopeMath math : {RopeMath::fp32_opmath, RopeMath::storage_dtype}) {
      // q, k: slots of one packed [B, S, 3, H, D] projection
      const int64_t B = 2, S = 7, H = 3, D = 128, R = 96;
      int64_t sizes[] = {B, S, H, D}, strides[] = {S * 3 * H * D, 3 * H * D, D, 1};
      auto proj = random_tensor(kHost, t, {B, S, 3 * H * D}, {}, 0, {seed++, 2.0, true});
      const TensorView q = proj.view.restrided(sizes, strides, 4);
      const TensorView k = proj.view.narrow(2, H * D, 2 * H * D).restrided(sizes, strides, 4);
      const DType table = math == RopeMath::storage_dtype ? t : DType::f32;
      auto cos = random_tensor(kHost, table, {S, 1, R}, {}, 0, {seed++, 0.5, false});
      auto sin = random_tensor(kHost, table, {S, 1, R}, {}, 0, {seed++, 0.5, false});
      auto w = random_tensor(kHost, t, {D}, {}, 0, {seed++, 0.75, false});
      const std::vector<int64_t> shape = {B, S, H, D};
      auto eq = poisoned_tensor(kHost, t, shape, kOutputPoison), ek = poisoned_tensor(kHost, t, shape, kOutputPoison);
      auto fq = poisoned_tensor(kHost, t, shape, kOutputPoison), fk = poisoned_tensor(kHost, t, shape, kOutputPoison);
      eager::Workspace ws(kHost);
      eager::qknorm_rope_chain(chain, q, &w.view, kEps, cos.view, sin.view, math, eq.view, ws);
      eager::qknorm_rope_chain(chain, k, nullptr, kEps, cos.view, sin.view, math, ek.view, ws);
      const auto before = gather_bytes(proj.view);
      std::string why;
      ASSERT_TRUE(can_use_fused_qknorm_rope(chain, q, k, &w.view, nullptr, kEps, cos.view, sin.view, math, fq.view,
                                            fk.view, &why))
          << why;
      fused_qknorm_rope(chain, q, k, &w.view, nullptr, kEps, cos.view, sin.view, math, fq.view, fk.view);
      EXPECT_EQ(gather_bytes(proj.view), before) << "an input changed";
      EXPECT_TRUE(fully_written(fq.view, kOutputPoison) && fully_written(fk.view, kOutputPoison));
      EXPECT_EQ(compare_bits(fq.view, eq.view, true), "");
      EXPECT_EQ(compare_bits(fk.view, ek.view, true), "");
    }
}

TEST_P(QkNormRopeForms, PackKvMatchesSplitChain) {
  const DType t = GetParam();
  uint64_t seed = 5500;
  for (RmsNormChain chain : {RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed}) {
    const int64_t B = 1, S = 9, H = 2, D = 128;
    const std::vector<int64_t> shape = {B, S, H, D};
    auto q = random_tensor(kHost, t, shape, {}, 0, {seed++, 2.0, true});
    auto k = random_tensor(kHost, t, shape, {}, 0, {seed++, 2.0, false});
    auto v = random_tensor(kHost, t, shape, {}, 0, {seed++, 2.0, true});
    auto cos = random_tensor(kHost, DType::f32, {S, 1, D}, {}, 0, {seed++, 0.5, false});
    auto sin = random_tensor(kHost, DType::f32, {S, 1, D}, {}, 0, {seed++, 0.5, false});
    auto w = random_tensor(kHost, t, {D}, {}, 0, {seed++, 0.75, false});
    const RopeMath m = RopeMath::fp32_opmath;
    auto eq = poisoned_tensor(kHost, t, shape, kOutputPoison);
    auto ekv = poisoned_tensor(kHost, t, {B, S, 2, H, D}, kOutputPoison);
    auto kv = poisoned_tensor(kHost, t, {B, S, 2, H, D}, kOutputPoison);
    eager::Workspace ws(kHost);
    eager::qknorm_rope_chain(chain, q.view, &w.view, kEps, cos.view, sin.view, m, eq.view, ws);
    int64_t slot_sizes[] = {B, S, H, D}, slot_strides[] = {S * 2 * H * D, 2 * H * D, D, 1};
    const TensorView ek = ekv.view.restrided(slot_sizes, slot_strides, 4);
    const TensorView ev = ekv.view.narrow(2, 1, 1).restrided(slot_sizes, slot_strides, 4);
    eager::qknorm_rope_chain(chain, k.view, &w.view, kEps, cos.view, sin.view, m, ek, ws);
    eager::copy(v.view, ev);
    const auto k_before = gather_bytes(k.view), v_before = gather_bytes(v.view);
    std::string why;
    ASSERT_TRUE(can_use_fused_qknorm_rope_pack_kv(chain, q.view, k.view, v.view, &w.view, &w.view, kEps, cos.view,
                                                  sin.view, m, kv.view, &why))
        << why;
    fused_qknorm_rope_pack_kv(chain, q.view, k.view, v.view, &w.view, &w.view, kEps, cos.view, sin.view, m, kv.view);
    EXPECT_EQ(gather_bytes(k.view), k_before);
    EXPECT_EQ(gather_bytes(v.view), v_before);
    EXPECT_TRUE(fully_written(kv.view, kOutputPoison));
    EXPECT_EQ(compare_bits(q.view, eq.view, true), "");
    EXPECT_EQ(compare_bits(kv.view, ekv.view, true), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, QkNormRopeForms, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- guards ------------------------------------------------------------------------------------------

struct QkNormRopeFormsGuards : ::testing::Test {
  static constexpr int64_t kN = 16 * 2 * 128;
  std::vector<float> qkv = std::vector<float>(3 * kN, 1.0f);
  std::vector<float> kvs = std::vector<float>(2 * kN, 0.0f);
  std::vector<float> cs = std::vector<float>(16 * 128, 0.5f);
  TensorView q{qkv.data(), DType::f32, {1, 16, 2, 128}};
  TensorView k{qkv.data() + kN, DType::f32, {1, 16, 2, 128}};
  TensorView v{qkv.data() + 2 * kN, DType::f32, {1, 16, 2, 128}};
  TensorView kv{kvs.data(), DType::f32, {1, 16, 2, 2, 128}};
  TensorView cos{cs.data(), DType::f32, {16, 1, 128}};
  const RmsNormChain chain = RmsNormChain::torch_rms_norm;

  template <typename CanUse, typename Run>
  std::string guard(const char* op, CanUse can_use, Run run) {
    std::string why;
    const std::vector<float> before = qkv, kv_before = kvs;
    EXPECT_FALSE(can_use(&why));
    EXPECT_NE(why.find(std::string(op) + ": "), std::string::npos) << why;
    try {
      run();
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      EXPECT_TRUE(qkv == before && kvs == kv_before) << "a refused call wrote";
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(QkNormRopeFormsGuards, OneRoundingTakesFp32OpmathTablesOnly) {
  std::vector<bf16_t> bq(kN), bk(kN), bc(16 * 128);
  TensorView qb(bq.data(), DType::bf16, {1, 16, 2, 128}), kb(bk.data(), DType::bf16, {1, 16, 2, 128});
  EXPECT_TRUE(can_use_fused_inplace_qknorm_rope_one_rounding(chain, qb, kb, nullptr, nullptr, kEps, cos, cos));
  EXPECT_EQ(guard("fused_inplace_qknorm_rope_one_rounding",
                  [&](std::string* why) {
                    return can_use_fused_inplace_qknorm_rope_one_rounding(chain, qb, qb, nullptr, nullptr, kEps, cos,
                                                                          cos, why);
                  },
                  [&] { fused_inplace_qknorm_rope_one_rounding(chain, qb, qb, nullptr, nullptr, kEps, cos, cos); }),
            "overlap");
}

TEST_F(QkNormRopeFormsGuards, OutOfPlaceRejectsOverlapAndShape) {
  TensorView out_a(kvs.data(), DType::f32, {1, 16, 2, 128}), out_b(kvs.data() + kN, DType::f32, {1, 16, 2, 128});
  const RopeMath m = RopeMath::fp32_opmath;
  EXPECT_TRUE(can_use_fused_qknorm_rope(chain, q, k, nullptr, nullptr, kEps, cos, cos, m, out_a, out_b));
  const auto try_outs = [&](const TensorView& qo, const TensorView& ko) {
    return guard(
        "fused_qknorm_rope",
        [&](std::string* why) { return can_use_fused_qknorm_rope(chain, q, k, nullptr, nullptr, kEps, cos, cos, m, qo, ko, why); },
        [&] { fused_qknorm_rope(chain, q, k, nullptr, nullptr, kEps, cos, cos, m, qo, ko); });
  };
  EXPECT_EQ(try_outs(q, out_b), "overlap");      // out of place: q_out may not be q
  EXPECT_EQ(try_outs(out_a, out_a), "overlap");  // both outputs one tensor
  TensorView wrong(kvs.data(), DType::f32, {1, 16, 1, 256});
  EXPECT_EQ(try_outs(wrong, out_b), "shape");
}

TEST_F(QkNormRopeFormsGuards, PackKvRejectsLayoutAndOverlap) {
  const RopeMath m = RopeMath::fp32_opmath;
  EXPECT_TRUE(can_use_fused_qknorm_rope_pack_kv(chain, q, k, v, nullptr, nullptr, kEps, cos, cos, m, kv));
  const auto try_kv = [&](const TensorView& vv, const TensorView& out) {
    return guard(
        "fused_qknorm_rope_pack_kv",
        [&](std::string* why) {
          return can_use_fused_qknorm_rope_pack_kv(chain, q, k, vv, nullptr, nullptr, kEps, cos, cos, m, out, why);
        },
        [&] { fused_qknorm_rope_pack_kv(chain, q, k, vv, nullptr, nullptr, kEps, cos, cos, m, out); });
  };
  TensorView kv_wrong(kvs.data(), DType::f32, {1, 16, 1, 4, 128});
  EXPECT_EQ(try_kv(v, kv_wrong), "shape");
  TensorView kv_over_v(qkv.data() + kN, DType::f32, {1, 16, 2, 2, 128});  // over k and v
  EXPECT_EQ(try_kv(v, kv_over_v), "overlap");
  EXPECT_EQ(try_kv(q, kv), "overlap");  // v is q, which is written
}

}  // namespace
}  // namespace dfuse::test
