// GPU suite (label "gpu"), rope family: the CUDA kernels against the CUDA eager replicas over the
// small and the model-size cases.
#include <gtest/gtest.h>

#include <vector>

#include "common/rope_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<RopeCase> gpu_cases() {
  auto cases = small_rope_cases();
  if (!small_shapes_only())
    for (auto& c : model_rope_cases()) cases.push_back(c);
  return cases;
}

class RopeGpu : public ::testing::TestWithParam<DType> {};

TEST_P(RopeGpu, RotateHalfFp32OpmathMatchesEagerChain) {
  uint64_t seed = 7000;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_rope_rotate_half_case(kGpu, GetParam(), RopeMath::fp32_opmath, c, seed++), "") << c.name;
}

TEST_P(RopeGpu, RotateHalfStorageDtypeMatchesEagerChain) {
  uint64_t seed = 8000;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_rope_rotate_half_case(kGpu, GetParam(), RopeMath::storage_dtype, c, seed++), "") << c.name;
}

TEST_P(RopeGpu, InterleavedRopeFp64MatchesEagerChain) {
  uint64_t seed = 9000;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_interleaved_rope_fp64_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(RopeGpu, InterleavedPairsMatchesEagerChain) {
  uint64_t seed = 11000;
  auto cases = small_rope_cases();
  if (!small_shapes_only())
    for (auto& c : model_rope_interleaved_pairs_cases()) cases.push_back(c);
  for (const auto& c : cases)
    EXPECT_EQ(run_rope_interleaved_pairs_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(RopeGpu, QkNormRopeMatchesSplitChain) {
  uint64_t seed = 10000;
  auto cases = small_qknorm_rope_cases();
  if (!small_shapes_only())
    for (auto& c : model_qknorm_rope_cases()) cases.push_back(c);
  for (RmsNormChain chain : {RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed})
    for (RopeMath math : {RopeMath::fp32_opmath, RopeMath::storage_dtype})
      for (const auto& c : cases)
        EXPECT_EQ(run_qknorm_rope_case(kGpu, GetParam(), chain, math, c, seed++), "")
            << c.name << " " << rms_norm_chain_name(chain) << (math == RopeMath::storage_dtype ? " storage" : " fp32");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RopeGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
