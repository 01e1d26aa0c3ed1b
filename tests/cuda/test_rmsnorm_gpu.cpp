// GPU suite (label "gpu"), RMSNorm ops: the CUDA kernels against the CUDA eager replicas (aten's
// launch geometry) over the small and the model-size cases, both RMSNorm chains.
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "common/rmsnorm_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<RmsNormCase> gpu_cases() {
  auto cases = small_rmsnorm_cases();
  if (!small_shapes_only())
    for (auto& c : model_rmsnorm_cases()) cases.push_back(c);
  return cases;
}

class RmsNormGpu : public ::testing::TestWithParam<std::tuple<DType, RmsNormChain>> {};

TEST_P(RmsNormGpu, ScaleShiftMatchesEagerChain) {
  const auto [dtype, chain] = GetParam();
  uint64_t seed = 6000;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_rmsnorm_scale_shift_case(kGpu, dtype, chain, c, seed++), "") << c.name;
}

TEST_P(RmsNormGpu, QkRmsNormMatchesEagerChain) {
  const auto [dtype, chain] = GetParam();
  uint64_t seed = 7000;
  auto cases = small_qk_rmsnorm_cases();
  if (!small_shapes_only())
    for (auto& c : model_qk_rmsnorm_cases()) cases.push_back(c);
  for (const auto& c : cases) EXPECT_EQ(run_qk_rmsnorm_case(kGpu, dtype, chain, c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(
    DtypesAndChains, RmsNormGpu,
    ::testing::Combine(::testing::Values(DType::bf16, DType::f16, DType::f32),
                       ::testing::Values(RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed)),
    [](const auto& info) {
      return std::string(dtype_name(std::get<0>(info.param))) + "_" + rms_norm_chain_name(std::get<1>(info.param));
    });

class RmsNormStorageGpu : public ::testing::TestWithParam<DType> {};

TEST_P(RmsNormStorageGpu, ScaleMatchesEagerChain) {
  uint64_t seed = 8000;
  for (const auto& c : gpu_cases()) EXPECT_EQ(run_rmsnorm_scale_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(RmsNormStorageGpu, TanhResidualMatchesEagerChain) {
  uint64_t seed = 9000;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_rmsnorm_tanh_residual_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(RmsNormStorageGpu, QkRmsNormMatchesEagerChain) {
  uint64_t seed = 10000;
  auto cases = small_qk_rmsnorm_cases();
  if (!small_shapes_only())
    for (auto& c : model_qk_rmsnorm_cases()) cases.push_back(c);
  for (const auto& c : cases)
    if (c.Dh == 128) {
      EXPECT_EQ(run_qk_rmsnorm_case(kGpu, GetParam(), RmsNormChain::storage_dtype, c, seed++), "") << c.name;
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RmsNormStorageGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
