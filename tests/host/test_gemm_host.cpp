// The GEMM-epilogue ops on the host: the reference arithmetic under the close bound, and every guard.
#include <gtest/gtest.h>

#include "common/gemm_cases.h"
#include "common/tensors.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/gemm.h"

namespace dfuse::test {
namespace {

const Device kHost = Device::host();

class GemmHost : public ::testing::TestWithParam<DType> {};

TEST_P(GemmHost, OpsWithinBoundOfEagerChain) {
  for (LinearOp op : {LinearOp::linear_gelu_tanh, LinearOp::qkv_projection_into})
    for (const LinearCase& c : linear_cases(op, false))
      EXPECT_EQ(check_linear_op(kHost, GetParam(), c), "")
          << "op " << int(op) << " batch " << c.batch << " m " << c.m << " n " << c.n << " k " << c.k;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GemmHost, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The refusal of both ops (they share their guards), returned from linear_gelu_tanh.
std::string refusal(const TensorView& x, const TensorView& w, const TensorView* b, const TensorView& out) {
  std::string why, why_qkv;
  EXPECT_FALSE(can_use_linear_gelu_tanh(x, w, b, out, &why));
  EXPECT_FALSE(can_use_qkv_projection_into(x, w, b, out, &why_qkv));
  EXPECT_THROW(linear_gelu_tanh(x, w, b, out), Unsupported);
  EXPECT_THROW(qkv_projection_into(x, w, b, out), Unsupported);
  return why;
}

TEST(GemmHostGuards, EveryRefusalSaysWhy) {
  const auto t = DType::bf16;
  const TestTensor x = random_tensor(kHost, t, {2, 3, 16});
  const TestTensor w = random_tensor(kHost, t, {8, 16});
  const TestTensor b = random_tensor(kHost, t, {8});
  const TestTensor out = poisoned_tensor(kHost, t, {2, 3, 8}, 0xFF);
  EXPECT_TRUE(can_use_linear_gelu_tanh(x.view, w.view, &b.view, out.view));
  EXPECT_TRUE(can_use_qkv_projection_into(x.view, w.view, &b.view, out.view));

  const TestTensor x32 = random_tensor(kHost, DType::f32, {2, 3, 16});
  EXPECT_NE(refusal(x32.view, w.view, &b.view, out.view).find("got f32"), std::string::npos);
  const TestTensor w_wrong_k = random_tensor(kHost, t, {8, 12});
  EXPECT_NE(refusal(x.view, w_wrong_k.view, &b.view, out.view).find("weight"), std::string::npos);
  const TestTensor b_wrong = random_tensor(kHost, t, {7});
  EXPECT_NE(refusal(x.view, w.view, &b_wrong.view, out.view).find("bias"), std::string::npos);
  const TestTensor out_wrong = poisoned_tensor(kHost, t, {2, 3, 9}, 0xFF);
  EXPECT_NE(refusal(x.view, w.view, &b.view, out_wrong.view).find("out"), std::string::npos);
  // Batches of x that overlap: batch stride 16 < 3 rows of 16.
  const TestTensor x_batches_overlap = random_tensor(kHost, t, {2, 3, 16}, {16, 16, 1});
  EXPECT_NE(refusal(x_batches_overlap.view, w.view, &b.view, out.view).find("overlap"), std::string::npos);
  const TestTensor x_rows_overlap = random_tensor(kHost, t, {3, 16}, {8, 1});
  const TestTensor out2 = poisoned_tensor(kHost, t, {3, 8}, 0xFF);
  EXPECT_NE(refusal(x_rows_overlap.view, w.view, &b.view, out2.view).find("overlap"), std::string::npos);
  const TestTensor out_rows_overlap = poisoned_tensor(kHost, t, {3, 8}, 0xFF);
  const int64_t sizes[] = {3, 8}, strides[] = {4, 1};
  const TensorView out_overlapping(out_rows_overlap.view.data(), t, sizes, strides, 2, kHost);
  const TestTensor x2 = random_tensor(kHost, t, {3, 16});
  EXPECT_NE(refusal(x2.view, w.view, &b.view, out_overlapping).find("overlap"), std::string::npos);
  const TestTensor w_rows_overlap = random_tensor(kHost, t, {8, 16}, {4, 1});
  EXPECT_NE(refusal(x.view, w_rows_overlap.view, &b.view, out.view).find("overlap"), std::string::npos);
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
