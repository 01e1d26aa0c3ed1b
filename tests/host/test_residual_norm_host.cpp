// scale_residual_norm_scale_shift on the host backend: both outputs == the eager chain bit for bit
// over every case (both norms, both aten paths, every gate/scale/shift layout), the path the op
// picks for r, and every guard's error.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/residual_norm_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/norm.h"

namespace dfuse::test {
namespace {

class ResidualNormHost : public ::testing::TestWithParam<DType> {};

TEST_P(ResidualNormHost, MatchesEagerChain) {
  uint64_t seed = 1200;
  for (const auto& c : small_residual_norm_cases())
    EXPECT_EQ(run_scale_residual_norm_case(Device::host(), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ResidualNormHost, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// r is a fresh tensor in the chain, so the residual's alignment must not change the norm's path:
// the same values through a misaligned residual view give the same bits.
TEST(ResidualNormHostPath, ResidualAlignmentDoesNotChangeThePath) {
  const Device h = Device::host();
  const std::vector<int64_t> sizes{1, 3, 256};
  auto misaligned = random_tensor(h, DType::bf16, sizes, {768, 256, 1}, 1, {5});
  auto aligned = poisoned_tensor(h, DType::bf16, sizes, 0);
  const auto bytes = gather_bytes(misaligned.view);
  std::copy(bytes.begin(), bytes.end(), static_cast<uint8_t*>(aligned.view.data()));
  auto gate = random_tensor(h, DType::bf16, {1, 1, 256}, {}, 0, {6, 0.5});
  auto update = random_tensor(h, DType::bf16, sizes, {}, 0, {7});
  auto scale = random_tensor(h, DType::bf16, {1, 1, 256}, {}, 0, {8, 0.5});
  TestTensor r[2], o[2];
  for (int i = 0; i < 2; ++i) {
    r[i] = poisoned_tensor(h, DType::bf16, sizes, 0xFF);
    o[i] = poisoned_tensor(h, DType::bf16, sizes, 0xFF);
    scale_residual_norm_scale_shift(ResidualNorm::layer_norm, (i ? aligned : misaligned).view, gate.view,
                                    update.view, nullptr, 1e-6, scale.view, scale.view, r[i].view, o[i].view);
  }
  EXPECT_EQ(compare_bits(r[0].view, r[1].view), "");
  EXPECT_EQ(compare_bits(o[0].view, o[1].view), "");
}

struct ResidualNormGuard : ::testing::Test {
  std::vector<bf16_t> rs = std::vector<bf16_t>(2 * 8 * 16, float_to_bf16(1.0f));
  std::vector<bf16_t> us = std::vector<bf16_t>(2 * 8 * 16, float_to_bf16(0.25f));
  std::vector<bf16_t> ss = std::vector<bf16_t>(2 * 16, float_to_bf16(0.5f));
  std::vector<bf16_t> ws = std::vector<bf16_t>(17, float_to_bf16(1.5f));
  std::vector<bf16_t> ros = std::vector<bf16_t>(2 * 8 * 16);
  std::vector<bf16_t> os = std::vector<bf16_t>(2 * 8 * 16);
  TensorView residual{rs.data(), DType::bf16, {2, 8, 16}};
  TensorView update{us.data(), DType::bf16, {2, 8, 16}};
  TensorView s{ss.data(), DType::bf16, {2, 1, 16}};
  TensorView weight{ws.data(), DType::bf16, {16}};
  TensorView r_out{ros.data(), DType::bf16, {2, 8, 16}};
  TensorView out{os.data(), DType::bf16, {2, 8, 16}};

  struct Args {
    ResidualNorm norm;
    TensorView residual, gate, update;
    const TensorView* weight;
    double eps;
    TensorView scale, shift, r_out, out;
  };
  Args base(ResidualNorm norm = ResidualNorm::rms_norm) {
    return {norm, residual, s, update, norm == ResidualNorm::rms_norm ? &weight : nullptr, 1e-6, s, s, r_out, out};
  }
  std::string guard(const Args& a) {
    std::string why;
    EXPECT_FALSE(can_use_scale_residual_norm_scale_shift(a.norm, a.residual, a.gate, a.update, a.weight, a.eps,
                                                         a.scale, a.shift, a.r_out, a.out, &why));
    EXPECT_NE(why.find("scale_residual_norm_scale_shift: "), std::string::npos) << why;
    try {
      scale_residual_norm_scale_shift(a.norm, a.residual, a.gate, a.update, a.weight, a.eps, a.scale, a.shift,
                                      a.r_out, a.out);
    } catch (const Unsupported& e) {
      EXPECT_EQ(why, e.what());
      return e.guard();
    }
    ADD_FAILURE() << "no Unsupported thrown";
    return "";
  }
};

TEST_F(ResidualNormGuard, AcceptsTheBaseCasesAndInPlaceResidual) {
  for (ResidualNorm n : {ResidualNorm::layer_norm, ResidualNorm::rms_norm}) {
    Args a = base(n);
    EXPECT_TRUE(can_use_scale_residual_norm_scale_shift(a.norm, a.residual, a.gate, a.update, a.weight, a.eps,
                                                        a.scale, a.shift, a.r_out, a.out));
    EXPECT_TRUE(can_use_scale_residual_norm_scale_shift(a.norm, a.residual, a.gate, a.update, a.weight, a.eps,
                                                        a.scale, a.shift, a.residual, a.out));
  }
  Args a = base();
  EXPECT_TRUE(can_use_scale_residual_norm_scale_shift(a.norm, a.residual, a.gate, a.update, nullptr, a.eps, a.scale,
                                                      a.shift, a.r_out, a.out));
}

TEST_F(ResidualNormGuard, RejectsUnknownNorm) {
  Args a = base();
  a.norm = static_cast<ResidualNorm>(7);
  EXPECT_EQ(guard(a), "norm");
}

TEST_F(ResidualNormGuard, RejectsMixedDtype) {
  std::vector<float> fs(2 * 16, 0.5f);
  Args a = base();
  a.gate = TensorView(fs.data(), DType::f32, {2, 1, 16});
  EXPECT_EQ(guard(a), "dtype");
}

TEST_F(ResidualNormGuard, RejectsUnsupportedDtype) {
  std::vector<double> d(2 * 8 * 16, 1.0);
  Args a = base();
  a.residual = TensorView(d.data(), DType::f64, {2, 8, 16});
  EXPECT_EQ(guard(a), "dtype");
}

TEST_F(ResidualNormGuard, RejectsNonContiguousLastDim) {
  std::vector<bf16_t> wide(2 * 8 * 32, float_to_bf16(1.0f));
  int64_t sizes[] = {2, 8, 16}, strides[] = {256, 32, 2};
  const TensorView strided = TensorView(wide.data(), DType::bf16, {2 * 8 * 32}).restrided(sizes, strides, 3);
  Args a = base();
  a.update = strided;
  EXPECT_EQ(guard(a), "last_dim_stride");
  Args b = base();
  b.residual = strided;
  EXPECT_EQ(guard(b), "last_dim_stride");
}

TEST_F(ResidualNormGuard, RejectsEmptyLastDim) {
  int64_t sizes[] = {2, 8, 0}, strides[] = {0, 0, 1};
  Args a = base(ResidualNorm::layer_norm);
  a.residual = residual.restrided(sizes, strides, 3);
  EXPECT_EQ(guard(a), "shape");
}

TEST_F(ResidualNormGuard, RejectsRowsOver8192) {
  std::vector<bf16_t> big(8196, float_to_bf16(1.0f));
  Args a = base(ResidualNorm::layer_norm);
  a.residual = TensorView(big.data(), DType::bf16, {1, 1, 8196});
  EXPECT_EQ(guard(a), "extent");
}

TEST_F(ResidualNormGuard, RejectsBadEps) {
  Args a = base();
  a.eps = -1.0;
  EXPECT_EQ(guard(a), "eps");
  a.eps = std::nan("");
  EXPECT_EQ(guard(a), "eps");
}

TEST_F(ResidualNormGuard, RejectsNonBroadcastableGateScaleShift) {
  int64_t sizes[] = {2, 3, 16}, strides[] = {48, 16, 1};
  for (int which = 0; which < 4; ++which) {
    Args a = base();
    TensorView bad = s.restrided(sizes, strides, 3);
    (which == 0 ? a.gate : which == 1 ? a.update : which == 2 ? a.scale : a.shift) = bad;
    EXPECT_EQ(guard(a), "broadcast") << which;
  }
}

TEST_F(ResidualNormGuard, RejectsWeightForLayerNorm) {
  Args a = base(ResidualNorm::layer_norm);
  a.weight = &weight;
  EXPECT_EQ(guard(a), "weight");
}

TEST_F(ResidualNormGuard, RejectsWeightOfWrongLengthLayoutOrDtype) {
  Args a = base();
  TensorView w17(ws.data(), DType::bf16, {17});
  a.weight = &w17;
  EXPECT_EQ(guard(a), "shape");
  std::vector<bf16_t> wide(32, float_to_bf16(1.0f));
  int64_t sz[] = {16}, st[] = {2};
  TensorView strided = TensorView(wide.data(), DType::bf16, {32}).restrided(sz, st, 1);
  Args b = base();
  b.weight = &strided;
  EXPECT_EQ(guard(b), "layout");
  std::vector<float> wf(16, 1.0f);
  TensorView wf32(wf.data(), DType::f32, {16});
  Args c = base();
  c.weight = &wf32;
  EXPECT_EQ(guard(c), "dtype");
}

TEST_F(ResidualNormGuard, RejectsWrongOutputShapes) {
  int64_t sizes[] = {2, 4, 16}, strides[] = {64, 16, 1};
  Args a = base();
  a.r_out = r_out.restrided(sizes, strides, 3);
  EXPECT_EQ(guard(a), "shape");
  Args b = base();
  b.out = out.restrided(sizes, strides, 3);
  EXPECT_EQ(guard(b), "shape");
}

TEST_F(ResidualNormGuard, RejectsRankAboveFour) {
  int64_t sizes[] = {1, 2, 1, 8, 16}, strides[] = {256, 128, 128, 16, 1};
  Args a = base();
  a.residual = residual.restrided(sizes, strides, 5);
  a.r_out = r_out.restrided(sizes, strides, 5);
  a.out = out.restrided(sizes, strides, 5);
  EXPECT_EQ(guard(a), "rank");
}

TEST_F(ResidualNormGuard, RejectsOutputsOverlappingInputsOrEachOther) {
  Args a = base();
  a.out = a.residual;  // out may not be residual (only residual_out may)
  EXPECT_EQ(guard(a), "overlap");
  Args b = base();
  b.out = b.r_out;
  EXPECT_EQ(guard(b), "overlap");
  Args c = base();
  c.r_out = c.update;
  EXPECT_EQ(guard(c), "overlap");
  Args d = base();
  std::vector<bf16_t> big(2 * 8 * 16 + 1);
  d.residual = TensorView(big.data(), DType::bf16, {2, 8, 16});
  d.r_out = TensorView(big.data() + 1, DType::bf16, {2, 8, 16});
  EXPECT_EQ(guard(d), "overlap");
  Args e = base();
  std::vector<bf16_t> wo(2 * 8 * 16);
  TensorView wv(wo.data(), DType::bf16, {16});
  e.weight = &wv;
  e.out = TensorView(wo.data(), DType::bf16, {2, 8, 16});
  EXPECT_EQ(guard(e), "overlap");
}

TEST_F(ResidualNormGuard, RejectsNullData) {
  Args a = base();
  a.update = TensorView(nullptr, DType::bf16, {2, 8, 16});
  EXPECT_EQ(guard(a), "data");
}

TEST_F(ResidualNormGuard, RejectsDeviceMismatch) {
  Args a = base();
  a.shift = TensorView(ss.data(), DType::bf16, {2, 1, 16}, Device::cuda(0));
  EXPECT_EQ(guard(a), "device");
}

}  // namespace
}  // namespace dfuse::test
