// GPU suite (label "gpu"), adaLN value ops: the CUDA kernels against the host replicas of their
// eager chains (bit-exact; timestep_embedding within its bound) over the small and the
// model-size cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "common/adaln_values_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

template <typename Case>
std::vector<Case> with_model_cases(std::vector<Case> small, std::vector<Case> model) {
  if (!small_shapes_only()) small.insert(small.end(), model.begin(), model.end());
  return small;
}

class AdalnValuesGpu : public ::testing::TestWithParam<DType> {};

TEST_P(AdalnValuesGpu, TembTableSlicesMatchesEagerChain) {
  uint64_t seed = 7000;
  for (const auto& c : with_model_cases(small_temb_slices_cases(), model_temb_slices_cases()))
    EXPECT_EQ(run_temb_slices_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(AdalnValuesGpu, Ltx2AdaValuesMatchesEagerChain) {
  uint64_t seed = 8000;
  for (DType table : {DType::bf16, DType::f16, DType::f32})
    for (const auto& c : with_model_cases(small_ltx2_cases(), model_ltx2_cases()))
      EXPECT_EQ(run_ltx2_case(kGpu, table, GetParam(), c, seed++), "") << c.name << " table " << dtype_name(table);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AdalnValuesGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(AdalnValuesGpuScaledResidual, MatchesEagerChain) {
  uint64_t seed = 9000;
  for (const auto& c : with_model_cases(small_scaled_residual_cases(), model_scaled_residual_cases()))
    EXPECT_EQ(run_scaled_residual_case(kGpu, c, seed++), "") << c.name;
}

TEST(AdalnValuesGpuTimestepEmbedding, WithinBoundOfTheFp32Chain) {
  uint64_t seed = 10000;
  double worst = 0;
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i64}) {
    for (const auto& c : timestep_embedding_cases()) {
      double w = 0;
      EXPECT_EQ(run_timestep_embedding_case(kGpu, t, c, seed++, &w), "") << c.name << " " << dtype_name(t);
      worst = std::max(worst, w);
    }
  }
  std::printf("timestep_embedding cuda: worst |out - ref| / max(1, |scale * t|) = %.3g\n", worst);
}

}  // namespace
}  // namespace dfuse::test
