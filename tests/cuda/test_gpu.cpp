// GPU suite (label "gpu"): CUDA kernels against the CUDA eager replicas at model shapes, and the
// host conversions against the hardware conversion instructions. Runs only where a CUDA device
// is present; it fails (never skips) when the CUDA backend cannot be loaded.
#include <gtest/gtest.h>

#include <vector>

#include "common/adaln_cases.h"
#include "common/entries.h"
#include "common/tensors.h"
#include "dfuse/core/runtime.h"
#include "dfuse/registry/registry.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

std::vector<AdalnCase> gpu_cases() {
  auto cases = small_adaln_cases();
  if (!small_shapes_only())
    for (auto& c : model_adaln_cases()) cases.push_back(c);
  return cases;
}

class AdalnGpu : public ::testing::TestWithParam<DType> {};

TEST_P(AdalnGpu, ModulateMatchesEagerChain) {
  uint64_t seed = 1000;
  for (const auto& c : gpu_cases()) EXPECT_EQ(run_modulate_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

TEST_P(AdalnGpu, ResidualGateAddMatchesEagerChain) {
  uint64_t seed = 2000;
  for (const auto& c : gpu_cases()) EXPECT_EQ(run_residual_gate_case(kGpu, GetParam(), c, seed++), "") << c.name;
}

INSTANTIATE_TEST_SUITE_P(Dtypes, AdalnGpu, ::testing::Values(DType::bf16, DType::f16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(GpuPlatform, DetectsHopper) {
  const Platform& p = Platform::detect();
  ASSERT_EQ(p.device, DeviceKind::cuda);
  EXPECT_EQ(p.sm->major, 9);
  EXPECT_EQ(select_kernel("diffusion.modulate_scale_shift").backend, Backend::cuda);
}

TEST(GpuConversions, HostConversionsEqualHardwareForEveryFloat) {
  if (small_shapes_only()) GTEST_SKIP() << "exhaustive sweep skipped under DFUSE_GPU_TEST_SMALL";
  DeviceBuffer counters(kGpu, 2 * sizeof(unsigned long long));
  unsigned long long zero[2] = {0, 0};
  runtime(kGpu).copy_to_device(counters.data(), zero, sizeof zero);
  auto fn = reinterpret_cast<void (*)(unsigned long long*)>(
      detail::find_entry(Backend::cuda, "selftest.exhaustive_conversion"));
  fn(static_cast<unsigned long long*>(counters.data()));
  unsigned long long bad[2];
  runtime(kGpu).copy_to_host(bad, counters.data(), sizeof bad);
  EXPECT_EQ(bad[0], 0u) << "bf16 mismatches";
  EXPECT_EQ(bad[1], 0u) << "f16 mismatches";
}

TEST(GpuConversions, HostBuildMatchesHardwareOnSampledPatterns) {
  // The exhaustive test runs the portable conversion compiled for the device; this one checks
  // the host compilation of the same code against the hardware.
  const int64_t n = 1 << 22;
  std::vector<float> in(static_cast<size_t>(n));
  uint64_t s = 12345;
  for (auto& f : in) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    f = bits_float(uint32_t(s >> 32));
  }
  DeviceBuffer din(kGpu, n * 4), dbf(kGpu, n * 2), dh(kGpu, n * 2);
  runtime(kGpu).copy_to_device(din.data(), in.data(), n * 4);
  auto fn = reinterpret_cast<void (*)(const float*, int64_t, uint16_t*, uint16_t*)>(
      detail::find_entry(Backend::cuda, "selftest.hardware_conversion"));
  fn(static_cast<const float*>(din.data()), n, static_cast<uint16_t*>(dbf.data()), static_cast<uint16_t*>(dh.data()));
  std::vector<uint16_t> bf(static_cast<size_t>(n)), h(static_cast<size_t>(n));
  runtime(kGpu).copy_to_host(bf.data(), dbf.data(), n * 2);
  runtime(kGpu).copy_to_host(h.data(), dh.data(), n * 2);
  int64_t bad_bf = 0, bad_h = 0;
  for (int64_t i = 0; i < n; ++i) {
    bad_bf += float_to_bf16(in[size_t(i)]).bits != bf[size_t(i)];
    bad_h += float_to_f16(in[size_t(i)]).bits != h[size_t(i)];
  }
  EXPECT_EQ(bad_bf, 0);
  EXPECT_EQ(bad_h, 0);
}

}  // namespace
}  // namespace dfuse::test
