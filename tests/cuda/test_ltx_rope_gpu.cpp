// GPU suite (label "gpu"), LTX RoPE ops: the CUDA kernels against the CUDA eager replicas over the
// small and the model-size cases.
#include <gtest/gtest.h>

#include <vector>

#include "common/ltx_rope_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

class LtxRopeGpu : public ::testing::TestWithParam<DType> {};

TEST_P(LtxRopeGpu, QkNormSplitRopeMatchesEagerChain) {
  uint64_t seed = 41000;
  auto cases = small_ltx2_split_rope_cases();
  if (!small_shapes_only())
    for (auto& c : model_ltx2_split_rope_cases()) cases.push_back(c);
  for (const auto& c : cases) EXPECT_EQ(run_ltx2_split_rope_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(LtxRopeGpu, DecoderRopeMatchesEagerChain) {
  uint64_t seed = 43000;
  auto cases = small_ltx25_decoder_rope_cases();
  if (!small_shapes_only())
    for (auto& c : model_ltx25_decoder_rope_cases()) cases.push_back(c);
  for (const auto& c : cases) EXPECT_EQ(run_ltx25_decoder_rope_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, LtxRopeGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
