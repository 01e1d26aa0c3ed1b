// GPU suite (label "gpu"), scale_residual_norm_scale_shift: the CUDA kernel against the CUDA eager
// replicas (binary, layer_norm, rms_norm) over the small and the model-size cases, both outputs.
#include <gtest/gtest.h>

#include <vector>

#include "common/residual_norm_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

class ResidualNormGpu : public ::testing::TestWithParam<DType> {};

TEST_P(ResidualNormGpu, MatchesEagerChain) {
  auto cases = small_residual_norm_cases();
  if (!small_shapes_only())
    for (auto& c : model_residual_norm_cases()) cases.push_back(c);
  uint64_t seed = 12000;
  for (const auto& c : cases)
    EXPECT_EQ(run_scale_residual_norm_case(Device::cuda(0), GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ResidualNormGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
