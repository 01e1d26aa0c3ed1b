// The GEMM-epilogue ops on CUDA (cuBLASLt BIAS / GELU_BIAS epilogues) against the eager chain under
// the family's close bound.
#include <gtest/gtest.h>

#include "common/gemm_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

class GemmGpu : public ::testing::TestWithParam<DType> {};

TEST_P(GemmGpu, OpsWithinBoundOfEagerChain) {
  for (LinearOp op : {LinearOp::linear_gelu_tanh, LinearOp::qkv_projection_into})
    for (const LinearCase& c : linear_cases(op, !small_shapes_only()))
      EXPECT_EQ(check_linear_op(Device::cuda(0), GetParam(), c), "")
          << "op " << int(op) << " batch " << c.batch << " m " << c.m << " n " << c.n << " k " << c.k;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GemmGpu, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
