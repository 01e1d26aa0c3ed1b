// linear_gelu_tanh on the host: the reference arithmetic under the close bound, and every guard.
#include <gtest/gtest.h>

#include "common/gemm_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/gemm.h"

namespace dfuse::test {
namespace {

const Device kHost = Device::host();

class GemmHost : public ::testing::TestWithParam<DType> {};

TEST_P(GemmHost, LinearGeluTanhWithinBoundOfEagerChain) {
  for (const LinearGeluCase& c : {LinearGeluCase{.batch = 2, .m = 7, .n = 24, .k = 40},
                                  LinearGeluCase{.batch = 0, .m = 5, .n = 16, .k = 64, .x_row_pad = 8},
                                  LinearGeluCase{.batch = 1, .m = 3, .n = 40, .k = 256, .bias = false},
                                  LinearGeluCase{.batch = 3, .m = 1, .n = 8, .k = 8, .seed = 9}})
    EXPECT_EQ(check_linear_gelu_tanh(kHost, GetParam(), c), "") << "m " << c.m << " n " << c.n << " k " << c.k;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GemmHost, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The guard that refuses, by name.
std::string refusal(const TensorView& x, const TensorView& w, const TensorView* b, const TensorView& out) {
  std::string why;
  EXPECT_FALSE(can_use_linear_gelu_tanh(x, w, b, out, &why));
  EXPECT_THROW(linear_gelu_tanh(x, w, b, out), Unsupported);
  return why;
}

TEST(GemmHostGuards, EveryRefusalSaysWhy) {
  const auto t = DType::bf16;
  const TestTensor x = random_tensor(kHost, t, {2, 3, 16});
  const TestTensor w = random_tensor(kHost, t, {8, 16});
  const TestTensor b = random_tensor(kHost, t, {8});
  const TestTensor out = poisoned_tensor(kHost, t, {2, 3, 8}, 0xFF);
  EXPECT_TRUE(can_use_linear_gelu_tanh(x.view, w.view, &b.view, out.view));

  const TestTensor x32 = random_tensor(kHost, DType::f32, {2, 3, 16});
  EXPECT_NE(refusal(x32.view, w.view, &b.view, out.view).find("got f32"), std::string::npos);
  const TestTensor w_wrong_k = random_tensor(kHost, t, {8, 12});
  EXPECT_NE(refusal(x.view, w_wrong_k.view, &b.view, out.view).find("weight"), std::string::npos);
  const TestTensor b_wrong = random_tensor(kHost, t, {7});
  EXPECT_NE(refusal(x.view, w.view, &b_wrong.view, out.view).find("bias"), std::string::npos);
  const TestTensor out_wrong = poisoned_tensor(kHost, t, {2, 3, 9}, 0xFF);
  EXPECT_NE(refusal(x.view, w.view, &b.view, out_wrong.view).find("out"), std::string::npos);
  // x [2, 3, 16] viewed with batch stride 64 (rows of different batches are not evenly spaced).
  const TestTensor x_gapped = random_tensor(kHost, t, {2, 3, 16}, {64, 16, 1});
  EXPECT_NE(refusal(x_gapped.view, w.view, &b.view, out.view).find("collapse"), std::string::npos);
  const TestTensor x_overlap = random_tensor(kHost, t, {3, 16}, {8, 1});
  const TestTensor out2 = poisoned_tensor(kHost, t, {3, 8}, 0xFF);
  EXPECT_NE(refusal(x_overlap.view, w.view, &b.view, out2.view).find("overlap"), std::string::npos);
  const TestTensor x_empty_k = random_tensor(kHost, t, {3, 0});
  const TestTensor w_empty_k = random_tensor(kHost, t, {8, 0});
  EXPECT_NE(refusal(x_empty_k.view, w_empty_k.view, &b.view, out2.view).find("K = 0"), std::string::npos);
  // out aliasing x's storage.
  const TestTensor square = random_tensor(kHost, t, {3, 16});
  const TestTensor w16 = random_tensor(kHost, t, {16, 16});
  const TestTensor b16 = random_tensor(kHost, t, {16});
  EXPECT_NE(refusal(square.view, w16.view, &b16.view, square.view).find("overlap"), std::string::npos);
}

}  // namespace
}  // namespace dfuse::test
