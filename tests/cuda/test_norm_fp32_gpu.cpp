// GPU suite (label "gpu"), the request-gated norm + epilogue ops with fp32 internals
// (norm_scale_shift, rmsnorm_modulate_fp32, rmsnorm_tanh_residual_fp32): the CUDA kernels bit for
// bit against the CUDA fp32 eager chains and within their bounds against the lossless CUDA chains,
// over the small and the model-size cases (FLUX.1, Wan 2.1, Qwen-Image, LTX-2, odd shapes).
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "common/norm_fp32_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<NormFp32Case> gpu_cases() {
  auto cases = small_norm_fp32_cases();
  if (!small_shapes_only())
    for (auto& c : model_norm_fp32_cases()) cases.push_back(c);
  return cases;
}

class NormFp32Gpu : public ::testing::TestWithParam<DType> {};

TEST_P(NormFp32Gpu, NormScaleShiftMatchesFp32Chain) {
  uint64_t seed = 9000;
  for (const auto& c : gpu_cases())
    if (!fp32_chain_takes_another_path(GetParam(), c)) {
      EXPECT_EQ(run_norm_scale_shift_exact_case(kGpu, GetParam(), ModulateFp32Op::norm_scale_shift, c, seed++), "")
          << c.name;
    }
}

TEST_P(NormFp32Gpu, NormScaleShiftStaysWithinItsBound) {
  uint64_t seed = 9100;
  double worst = 0.0;
  for (const auto& c : gpu_cases())
    EXPECT_EQ(run_norm_scale_shift_bound_case(kGpu, GetParam(), ModulateFp32Op::norm_scale_shift, c, seed++, &worst),
              "")
        << c.name;
  std::printf("norm_scale_shift: max |out - chain| / bound = %.3f\n", worst);
  if (GetParam() != DType::f32) {
    EXPECT_GT(worst, 0.0);
  }
}

TEST(NormFp32SubnormalGpu, NormScaleShiftBoundCoversSubnormalN) {
  int beyond_relative = 0;
  EXPECT_EQ(run_norm_scale_shift_subnormal_case(kGpu, &beyond_relative), "");
  EXPECT_GT(beyond_relative, 0);
}

TEST_P(NormFp32Gpu, RmsnormModulateFp32MatchesAndStaysWithinItsBound) {
  uint64_t seed = 9200;
  for (const auto& c : gpu_cases()) {
    if (c.norm != NormKind::rms_norm) continue;
    EXPECT_EQ(run_norm_scale_shift_exact_case(kGpu, GetParam(), ModulateFp32Op::rmsnorm_modulate_fp32, c, seed), "")
          << c.name;
    EXPECT_EQ(run_norm_scale_shift_bound_case(kGpu, GetParam(), ModulateFp32Op::rmsnorm_modulate_fp32, c, seed + 1),
              "")
        << c.name;
    seed += 2;
  }
}

TEST_P(NormFp32Gpu, TanhResidualMatchesFp32Chain) {
  uint64_t seed = 9300;
  for (const auto& c : gpu_cases())
    if (tanh_residual_row_fits(c)) {
      EXPECT_EQ(run_rmsnorm_tanh_residual_fp32_exact_case(kGpu, GetParam(), c, seed++), "") << c.name;
    }
}

TEST_P(NormFp32Gpu, TanhResidualStaysWithinItsBound) {
  uint64_t seed = 9400;
  double worst = 0.0;
  for (const auto& c : gpu_cases())
    if (tanh_residual_row_fits(c)) {
      EXPECT_EQ(run_rmsnorm_tanh_residual_fp32_bound_case(kGpu, GetParam(), c, seed++, &worst), "") << c.name;
    }
  std::printf("rmsnorm_tanh_residual_fp32: max |out - chain| / bound = %.3f\n", worst);
  if (GetParam() != DType::f32) {
    EXPECT_GT(worst, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NormFp32Gpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace dfuse::test
