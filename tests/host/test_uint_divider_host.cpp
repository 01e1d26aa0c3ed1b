// UintDivider (src/common/uint_divider.h) against the / operator: every small divisor with numerators
// around its multiples, powers of two and their neighbours, and random pairs up to 2^31; its range check.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "common/uint_divider.h"
#include "dfuse/core/error.h"

namespace dfuse::detail {
namespace {

void expect_divides(uint32_t d, uint32_t n) {
  const UintDivider div(d);
  ASSERT_EQ(div.div(n), n / d) << n << " / " << d;
  ASSERT_EQ(div.mod(n, div.div(n)), n % d) << n << " % " << d;
}

TEST(UintDivider, SmallDivisorsAroundMultiples) {
  for (uint32_t d = 1; d <= 5000; ++d)
    for (uint32_t k : {0u, 1u, 2u, 3u, 1000u, (uint32_t(1) << 31) / d - 1})
      for (int delta = -1; delta <= 1; ++delta) {
        const int64_t n = int64_t(k) * d + delta;
        if (n >= 0 && n < (int64_t(1) << 31)) expect_divides(d, uint32_t(n));
      }
}

TEST(UintDivider, PowersOfTwoAndNeighbours) {
  std::vector<uint32_t> values;
  for (int s = 0; s <= 31; ++s)
    for (int delta = -1; delta <= 1; ++delta) {
      const int64_t v = (int64_t(1) << s) + delta;
      if (v >= 1 && v <= (int64_t(1) << 31)) values.push_back(uint32_t(v));
    }
  for (uint32_t d : values)
    for (uint32_t n : values)
      if (n < (uint32_t(1) << 31)) expect_divides(d, n);
}

TEST(UintDivider, RejectsDivisorsOutsideItsRange) {
  EXPECT_THROW(UintDivider(0), InvalidArgument);
  EXPECT_THROW(UintDivider((uint32_t(1) << 31) + 1), InvalidArgument);
  EXPECT_NO_THROW(UintDivider(uint32_t(1) << 31));
}

TEST(UintDivider, RandomPairs) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const int bits = 1 + int(rng() % 31);
    const uint32_t d = uint32_t(rng() % (uint64_t(1) << bits)) + 1;
    const uint32_t n = uint32_t(rng() % (uint64_t(1) << 31));
    expect_divides(d, n);
  }
}

}  // namespace
}  // namespace dfuse::detail
