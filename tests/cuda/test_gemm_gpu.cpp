// The GEMM-epilogue ops on CUDA (cuBLASLt BIAS / GELU_BIAS epilogues) against the eager chain under
// the family's close bound.
#include <gtest/gtest.h>

#include "common/gemm_cases.h"
#include "common/tensors.h"
#include "dfuse/ops/gemm.h"

namespace dfuse::test {
namespace {

class GemmGpu : public ::testing::TestWithParam<DType> {};

TEST_P(GemmGpu, OpsWithinBoundOfEagerChain) {
  for (LinearOp op : {LinearOp::linear_gelu_tanh, LinearOp::qkv_projection_into})
    for (const LinearCase& c : linear_cases(op, !small_shapes_only()))
      EXPECT_EQ(check_linear_op(Device::cuda(0), GetParam(), c), "")
          << "op " << int(op) << " batch " << c.batch << " m " << c.m << " n " << c.n << " k " << c.k;
}

// cuBLASLt rejects a leading dimension below the row length even for one row: the guards refuse
// a single row whose stride is 0 (torch's expand) rather than let the matmul fail.
TEST(GemmGpuGuards, SingleRowStrideBelowRowLength) {
  const Device d = Device::cuda(0);
  const auto t = DType::bf16;
  const TestTensor x = random_tensor(d, t, {1, 16}, {0, 1});
  const TestTensor x_dense = random_tensor(d, t, {1, 16});
  const TestTensor w = random_tensor(d, t, {8, 16});
  const TestTensor out = poisoned_tensor(d, t, {1, 8}, 0xFF);
  EXPECT_TRUE(can_use_qkv_projection_into(x_dense.view, w.view, nullptr, out.view));
  std::string why;
  EXPECT_FALSE(can_use_qkv_projection_into(x.view, w.view, nullptr, out.view, &why));
  EXPECT_NE(why.find("at least the row length"), std::string::npos) << why;
  EXPECT_FALSE(can_use_linear_gelu_tanh(x.view, w.view, nullptr, out.view));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GemmGpu, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
