// GPU suite (label "gpu"), helios_qk_rope: the CUDA kernel against the CUDA eager replica over the
// small and the model-size cases.
#include <gtest/gtest.h>

#include <vector>

#include "common/helios_rope_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

class HeliosRopeGpu : public ::testing::TestWithParam<DType> {};

TEST_P(HeliosRopeGpu, QkRopeMatchesEagerChain) {
  uint64_t seed = 45000;
  auto cases = small_helios_rope_cases();
  if (!small_shapes_only())
    for (auto& c : model_helios_rope_cases()) cases.push_back(c);
  for (const auto& c : cases) EXPECT_EQ(run_helios_rope_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HeliosRopeGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
