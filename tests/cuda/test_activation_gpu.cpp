// GPU suite (label "gpu"), activation family: the CUDA kernels against the CUDA eager replicas
// over the small and the model-size cases.
#include <gtest/gtest.h>

#include <vector>

#include "common/activation_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<ActivationCase> gpu_cases() {
  auto cases = small_activation_cases();
  if (!small_shapes_only())
    for (auto& c : model_activation_cases()) cases.push_back(c);
  return cases;
}

class ActivationGpu : public ::testing::TestWithParam<DType> {};

TEST_P(ActivationGpu, SiluMulMatchesEagerChain) {
  uint64_t seed = 3000;
  for (const auto& c : gpu_cases()) EXPECT_EQ(run_silu_mul_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(ActivationGpu, BiasSiluMatchesEagerChain) {
  uint64_t seed = 4000;
  for (const auto& c : gpu_cases()) EXPECT_EQ(run_bias_silu_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(ActivationGpu, BiasGluMatchesEagerChain) {
  uint64_t seed = 5000;
  for (const auto& c : gpu_cases()) EXPECT_EQ(run_bias_glu_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ActivationGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
