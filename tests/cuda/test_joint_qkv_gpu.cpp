// GPU suite (label "gpu"), joint-QKV epilogues (qwen_qkv_epilogue, hunyuan_qkv_rope_pack): the CUDA
// kernel against the CUDA eager replicas over the small and the model-size cases.
#include <gtest/gtest.h>

#include <vector>

#include "common/joint_qkv_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<JointQkvCase> gpu_cases() {
  auto cases = small_joint_qkv_cases();
  if (!small_shapes_only())
    for (auto& c : model_joint_qkv_cases()) cases.push_back(c);
  return cases;
}

class JointQkvGpu : public ::testing::TestWithParam<DType> {};

TEST_P(JointQkvGpu, QwenQkvEpilogueMatchesEagerChain) {
  uint64_t seed = 21000;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_qwen_qkv_epilogue_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(JointQkvGpu, HunyuanQkvRopePackMatchesEagerChain) {
  uint64_t seed = 23000;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_hunyuan_qkv_rope_pack_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, JointQkvGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
