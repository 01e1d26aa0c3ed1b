// GPU suite (label "gpu"), data-movement family: the CUDA kernels against the independent host
// index loops over the small and the model-size cases.
#include <gtest/gtest.h>

#include <vector>

#include "common/data_movement_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

template <typename Case>
std::vector<Case> with_models(std::vector<Case> cases, const std::vector<Case>& models) {
  if (!small_shapes_only()) cases.insert(cases.end(), models.begin(), models.end());
  return cases;
}

class DataMovementGpu : public ::testing::TestWithParam<DType> {};

TEST_P(DataMovementGpu, UspMergeHeadsMatchesPermute) {
  uint64_t seed = 6000;
  for (const auto& c : with_models(small_usp_merge_heads_cases(), model_usp_merge_heads_cases()))
    EXPECT_EQ(run_usp_merge_heads_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementGpu, JointQkvCatMatchesCat) {
  uint64_t seed = 7000;
  for (const auto& c : with_models(small_joint_qkv_cat_cases(), model_joint_qkv_cat_cases()))
    EXPECT_EQ(run_joint_qkv_cat_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementGpu, PackQkvMatchesDestinationShards) {
  uint64_t seed = 8000;
  for (const auto& c : with_models(small_pack_qkv_cases(), model_pack_qkv_cases()))
    EXPECT_EQ(run_pack_qkv_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementGpu, VarlenPackQkvMatchesIndexSelect) {
  uint64_t seed = 9000;
  for (const auto& c : with_models(small_varlen_cases(), model_varlen_cases()))
    EXPECT_EQ(run_varlen_pack_qkv_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementGpu, VarlenPackSegmentedQkvMatchesCatThenIndexSelect) {
  uint64_t seed = 10000;
  for (const auto& c : with_models(small_varlen_cases(), model_varlen_cases()))
    EXPECT_EQ(run_varlen_pack_segmented_qkv_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(DataMovementGpu, VarlenScatterToPaddedMatchesIndexCopy) {
  uint64_t seed = 11000;
  for (const auto& c : with_models(small_varlen_cases(), model_varlen_cases()))
    EXPECT_EQ(run_varlen_scatter_to_padded_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, DataMovementGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
