// The head groups of the RoPE kernels that hold a token's table row while they go over its heads
// (ops/rope/head_groups.h): the cut of a token's heads into equal groups, and the group size chosen by the idle
// share of the launch's last round.
#include <gtest/gtest.h>

#include <utility>

#include "ops/rope/head_groups.h"

namespace dfuse::detail {
namespace {

TEST(RopeHeadGroups, EqualGroupsOfAtMostTheMaximum) {
  const auto cut = [](int64_t heads, int64_t max_group) {
    const HeadGroups g = head_groups(heads, max_group);
    return std::pair<uint32_t, uint32_t>(g.group_heads, g.groups_per_token);
  };
  EXPECT_EQ(cut(24, 8), std::make_pair(8u, 3u));
  EXPECT_EQ(cut(24, 4), std::make_pair(4u, 6u));
  EXPECT_EQ(cut(30, 8), std::make_pair(8u, 4u));  // 8 + 8 + 8 + 6
  EXPECT_EQ(cut(9, 8), std::make_pair(5u, 2u));   // 5 + 4, not 8 + 1
  EXPECT_EQ(cut(3, 8), std::make_pair(3u, 1u));
  EXPECT_EQ(cut(1, 4), std::make_pair(1u, 1u));
  EXPECT_EQ(cut(0, 8).second, 0u);  // no heads, no groups
}

TEST(RopeHeadGroups, IdleRoundShare) {
  EXPECT_DOUBLE_EQ(idle_round_share(8448, 8448), 0.0);
  EXPECT_DOUBLE_EQ(idle_round_share(8449, 8448), 8447.0 / 16896.0);
  EXPECT_DOUBLE_EQ(idle_round_share(0, 8448), 0.0);
}

// Resident half-warps of the H200 at four blocks of 256 threads per SM: 132 * 4 * 16 = 8448.
TEST(RopeHeadGroups, SmallGroupsWhereTheLastRoundIsMostlyIdle) {
  constexpr int64_t kResident = 8448;
  const auto items = [](int64_t tokens, int64_t heads, int64_t parts) {
    return [=](int g) { return tokens * head_groups(heads, g).groups_per_token * parts; };
  };
  // FLUX.1 q and k, 24 heads of 4608 tokens: 3.27 rounds with 8 (18% idle), 6.55 with 4 (6.5%).
  EXPECT_EQ(max_group_heads(items(4608, 24, 2), kResident), 4);
  // FLUX.2's 48 heads: 6.55 rounds with 8; HunyuanVideo (32760 tokens, 24 heads): 23.3; LTX-2 (6144, 32): 5.8.
  EXPECT_EQ(max_group_heads(items(4608, 48, 2), kResident), 8);
  EXPECT_EQ(max_group_heads(items(32760, 24, 2), kResident), 8);
  EXPECT_EQ(max_group_heads(items(6144, 32, 2), kResident), 8);
  // Under one round either way, smaller groups spread a launch over more half-warps: one token of 24 heads.
  EXPECT_EQ(max_group_heads(items(1, 24, 2), kResident), 4);
  // A head count whose groups do not shrink with the maximum (3 heads: one group either way) keeps 8.
  EXPECT_EQ(max_group_heads(items(4097, 3, 2), kResident), 8);
}

}  // namespace
}  // namespace dfuse::detail
