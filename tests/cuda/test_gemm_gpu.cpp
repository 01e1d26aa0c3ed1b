// linear_gelu_tanh on CUDA (cuBLASLt GELU_BIAS epilogue) against the eager chain under the close bound.
#include <gtest/gtest.h>

#include "common/gemm_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

class GemmGpu : public ::testing::TestWithParam<DType> {};

TEST_P(GemmGpu, LinearGeluTanhWithinBoundOfEagerChain) {
  const Device cuda = Device::cuda(0);
  std::vector<LinearGeluCase> cases = {LinearGeluCase{.batch = 2, .m = 7, .n = 24, .k = 40},
                                       LinearGeluCase{.batch = 0, .m = 5, .n = 16, .k = 64, .x_row_pad = 8},
                                       LinearGeluCase{.batch = 1, .m = 3, .n = 40, .k = 256, .bias = false},
                                       LinearGeluCase{.batch = 3, .m = 1, .n = 8, .k = 8, .seed = 9}};
  // FLUX.1's FFN up-projection (K 3072 -> N 12288) on a slice of tokens.
  if (!small_shapes_only()) cases.push_back({.batch = 1, .m = 64, .n = 1536, .k = 3072, .seed = 5});
  for (const LinearGeluCase& c : cases)
    EXPECT_EQ(check_linear_gelu_tanh(cuda, GetParam(), c), "") << "m " << c.m << " n " << c.n << " k " << c.k;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GemmGpu, ::testing::Values(DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
