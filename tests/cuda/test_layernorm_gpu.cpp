// GPU suite (label "gpu"), LayerNorm ops of the normalization family: the CUDA kernels against
// the CUDA eager replicas (layer_norm, binary, cast) over the small and the model-size cases.
// QkHead compares the one-warp-per-head statistics (cuda/layer_norm_stats.cuh warp_* forms) with
// the eager replica's full 128/512-thread blocks, so it also checks that the warp emulation
// reproduces the block's order.
#include <gtest/gtest.h>

#include <vector>

#include "common/layernorm_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<LayernormCase> gpu_cases() {
  auto cases = small_layernorm_cases();
  if (!small_shapes_only())
    for (auto& c : model_layernorm_cases()) cases.push_back(c);
  return cases;
}

class LayernormGpu : public ::testing::TestWithParam<DType> {};

TEST_P(LayernormGpu, ModulateMatchesEagerChain) {
  uint64_t seed = 6000;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_layernorm_modulate_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(LayernormGpu, FoldedModulateMatchesFoldedChain) {
  uint64_t seed = 9000;
  for (const auto& c : gpu_cases()) EXPECT_EQ(run_layernorm_folded_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(LayernormGpu, FoldedModulateStaysWithinItsBound) {
  uint64_t seed = 9500;
  double worst = 0.0;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_layernorm_folded_bound_case(kGpu, GetParam(), c, seed++, &worst), "") << c.name;
  EXPECT_GT(worst, 0.0);
}

TEST_P(LayernormGpu, QkHeadMatchesEagerChain) {
  auto cases = small_qk_head_cases();
  if (!small_shapes_only())
    for (auto& c : model_qk_head_cases()) cases.push_back(c);
  uint64_t seed = 7000;
  for (const auto& c : cases) EXPECT_EQ(run_qk_head_layernorm_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(LayernormGpu, Fp32LayerNormMatchesEagerChain) {
  auto cases = small_fp32_layernorm_cases();
  if (!small_shapes_only())
    for (auto& c : model_fp32_layernorm_cases()) cases.push_back(c);
  uint64_t seed = 8000;
  for (const auto& c : cases) EXPECT_EQ(run_fp32_layernorm_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LayernormGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
