// GPU suite (label "gpu"), FLUX.2's QK-norm + RoPE ops: the CUDA kernels against the CUDA eager
// replicas over the small and the model-size cases (inputs and V/MLP columns left intact).
#include <gtest/gtest.h>

#include <vector>

#include "common/flux2_rope_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<Flux2RopeCase> with_model_cases(std::vector<Flux2RopeCase> small, std::vector<Flux2RopeCase> model) {
  if (!small_shapes_only()) small.insert(small.end(), model.begin(), model.end());
  return small;
}

class Flux2RopeGpu : public ::testing::TestWithParam<DType> {};

TEST_P(Flux2RopeGpu, StridedQkNormRopeMatchesEagerChain) {
  uint64_t seed = 41000;
  for (const auto& c : with_model_cases(small_flux2_strided_cases(), model_flux2_strided_cases()))
    EXPECT_EQ(run_flux2_strided_qknorm_rope_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(Flux2RopeGpu, QkvEpilogueMatchesEagerChain) {
  uint64_t seed = 43000;
  for (const auto& c : with_model_cases(small_flux2_epilogue_cases(), model_flux2_epilogue_cases()))
    EXPECT_EQ(run_flux2_qkv_epilogue_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Flux2RopeGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
