// The Welford step with a known count (welford_vec_update_nth, the unrolled CUDA LayerNorm loops)
// must equal the counting step PyTorch's vectorized kernel takes, bit for bit, at every count.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "common/layer_norm_stats.h"

namespace dfuse::detail {
namespace {

TEST(WelfordVecUpdateNth, EqualsTheCountingUpdate) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.5f, 3.0f);
  for (int trial = 0; trial < 200; ++trial) {
    WelfordVec counted, nth;
    for (int count = 1; count <= 64; ++count) {
      float v = normal(rng) * std::ldexp(1.0f, int(rng() % 20) - 10);
      if (trial == 0 && count == 5) v = std::numeric_limits<float>::infinity();
      if (trial == 1 && count == 9) v = std::numeric_limits<float>::quiet_NaN();
      counted = welford_vec_update(counted, v);
      nth = welford_vec_update_nth(nth, v, count);
      ASSERT_EQ(std::bit_cast<uint32_t>(counted.mean), std::bit_cast<uint32_t>(nth.mean)) << trial << " " << count;
      ASSERT_EQ(std::bit_cast<uint32_t>(counted.sigma2), std::bit_cast<uint32_t>(nth.sigma2)) << trial << " " << count;
      ASSERT_EQ(counted.count, nth.count);
    }
  }
}

}  // namespace
}  // namespace dfuse::detail
