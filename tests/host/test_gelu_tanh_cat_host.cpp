// gelu_tanh_cat on the host backend: fused == eager chain bit for bit (dense attention output and
// transposed heads, NaN/Inf), the GELU element against aten's formula, and every guard's error.
// Model and odd shapes run through the CLI's cases (test_cli: verify on the host; the GPU check).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/activation.h"

namespace dfuse::test {
namespace {

struct GeluTanhCatHost : ::testing::Test {
  static constexpr int64_t kB = 2, kS = 5, kH = 3, kD = 8, kDa = kH * kD, kDm = 4 * kDa;
  std::vector<float> heads_storage = std::vector<float>(kB * kH * kS * kD);  // [B, H, S, D]
  std::vector<float> mlp_storage = std::vector<float>(kB * kS * kDm);
  std::vector<float> fused_out = std::vector<float>(kB * kS * (kDa + kDm), -7.0f);
  std::vector<float> eager_out = std::vector<float>(kB * kS * (kDa + kDm), 9.0f);
  const int64_t heads_sizes[4] = {kB, kS, kH, kD};
  const int64_t heads_strides[4] = {kH * kS * kD, kD, kS * kD, 1};  // transpose(1, 2) of [B, H, S, D]
  TensorView heads{heads_storage.data(), DType::f32, heads_sizes, heads_strides, 4};
  TensorView mlp{mlp_storage.data(), DType::f32, {kB, kS, kDm}};
  TensorView fused{fused_out.data(), DType::f32, {kB, kS, kDa + kDm}};
  TensorView eager{eager_out.data(), DType::f32, {kB, kS, kDa + kDm}};

  GeluTanhCatHost() {
    uint32_t state = 12345;
    auto next = [&] { return float(int((state = state * 1664525u + 1013904223u) >> 9) % 20001 - 10000) / 1500.0f; };
    for (float& v : heads_storage) v = next();
    for (float& v : mlp_storage) v = next();
    const float inf = std::numeric_limits<float>::infinity();
    mlp_storage[3] = inf, mlp_storage[4] = -inf, mlp_storage[5] = std::nanf(""), mlp_storage[6] = -0.0f;
  }

  void expect_same_bits() {
    for (size_t i = 0; i < fused_out.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(fused_out[i]), std::bit_cast<uint32_t>(eager_out[i])) << "element " << i;
  }
};

TEST_F(GeluTanhCatHost, HeadsMatchTheEagerChain) {
  gelu_tanh_cat(heads, mlp, fused);
  eager::Workspace ws(Device::host());
  eager::gelu_tanh_cat_chain(heads, mlp, eager, ws);
  expect_same_bits();
  // Token 1 of batch 1, head 2, element 5: the attention half holds heads[1, 2, 1, 5] at column 2 * kD + 5.
  EXPECT_EQ(fused_out[(1 * kS + 1) * (kDa + kDm) + 2 * kD + 5], heads_storage[((1 * kH + 2) * kS + 1) * kD + 5]);
}

TEST_F(GeluTanhCatHost, DenseAttentionMatchesTheEagerChain) {
  const TensorView dense(heads_storage.data(), DType::f32, {kB, kS, kDa});
  gelu_tanh_cat(dense, mlp, fused);
  eager::Workspace ws(Device::host());
  eager::gelu_tanh_cat_chain(dense, mlp, eager, ws);
  expect_same_bits();
}

// aten's element: (0.5 x) * (tanh(fma(x * (x * x), 0.044715, x) * 0.7978845834732055) + 1).
TEST_F(GeluTanhCatHost, GeluElementIsAtensFormula) {
  gelu_tanh_cat(heads, mlp, fused);
  for (int64_t t = 0; t < kB * kS; ++t) {
    for (int64_t j = 0; j < kDm; ++j) {
      const float x = mlp_storage[t * kDm + j];
      const float inner = std::fma(x * (x * x), 0.044715f, x) * 0.79788458347320556641f;
      const float want = (0.5f * x) * (std::tanh(inner) + 1.0f);
      ASSERT_EQ(std::bit_cast<uint32_t>(fused_out[t * (kDa + kDm) + kDa + j]), std::bit_cast<uint32_t>(want)) << t << " " << j;
    }
  }
  EXPECT_TRUE(std::isnan(fused_out[kDa + 4]));  // gelu(-inf) = -inf * 0 = NaN, as torch
  EXPECT_EQ(fused_out[kDa + 3], std::numeric_limits<float>::infinity());
}

std::string guard_of(const TensorView& attn, const TensorView& mlp, const TensorView& out) {
  std::string why;
  EXPECT_FALSE(can_use_gelu_tanh_cat(attn, mlp, out, &why));
  EXPECT_NE(why.find("gelu_tanh_cat: "), std::string::npos) << why;
  try {
    gelu_tanh_cat(attn, mlp, out);
  } catch (const Unsupported& e) {
    EXPECT_EQ(why, e.what());
    return e.guard();
  }
  ADD_FAILURE() << "no Unsupported thrown";
  return "";
}

TEST_F(GeluTanhCatHost, GuardsNameTheirCheck) {
  std::vector<uint16_t> half(fused_out.size());
  const TensorView bf16_mlp(half.data(), DType::bf16, {kB, kS, kDm});
  EXPECT_EQ(guard_of(heads, bf16_mlp, fused), "dtype");
  EXPECT_EQ(guard_of(heads, TensorView(mlp_storage.data(), DType::f32, {kB * kS, kDm}), fused), "rank");
  EXPECT_EQ(guard_of(TensorView(heads_storage.data(), DType::f32, {kB, kS + 1, kD}), mlp, fused), "shape");
  EXPECT_EQ(guard_of(heads, mlp, TensorView(fused_out.data(), DType::f32, {kB, kS, kDa + kDm - 1})), "shape");
  const int64_t sizes[] = {kB, kS, kDa + kDm}, strides[] = {kS * (kDa + kDm + 1), kDa + kDm + 1, 1};
  std::vector<float> wide(kB * kS * (kDa + kDm + 1));
  EXPECT_EQ(guard_of(heads, mlp, TensorView(wide.data(), DType::f32, sizes, strides, 3)), "out_layout");
  const int64_t transposed[] = {kH * kS * kD, 1, kS * kD, kS};  // D not contiguous
  EXPECT_EQ(guard_of(TensorView(heads_storage.data(), DType::f32, heads_sizes, transposed, 4), mlp, fused),
            "last_dim_stride");
  EXPECT_EQ(guard_of(heads, mlp, TensorView(mlp_storage.data(), DType::f32, {kB, kS, kDa + kDm})), "overlap");
}

}  // namespace
}  // namespace dfuse::test
