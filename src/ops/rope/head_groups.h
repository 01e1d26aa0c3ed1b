// A token's heads cut into the work items of the RoPE kernels that hold a token's table row in registers while
// they go over its heads (half a warp per item): equal groups of at most a given number of consecutive heads,
// and that number chosen by how full the launch's last round of items is.
#pragma once

#include <cstdint>

namespace dfuse::detail {

struct HeadGroups {
  uint32_t group_heads = 0;  // heads per group (a token's last group may have fewer)
  uint32_t groups_per_token = 0;
};

// The groups of `heads` heads: ceil(heads / max_group) groups of equal size, rounded up (none of no heads).
inline HeadGroups head_groups(int64_t heads, int64_t max_group) {
  if (heads < 1) return {1, 0};
  const int64_t groups = (heads + max_group - 1) / max_group;
  const int64_t group_heads = (heads + groups - 1) / groups;
  return {uint32_t(group_heads), uint32_t((heads + group_heads - 1) / group_heads)};
}

// The share of ceil(items / resident) rounds' capacity (one item per resident half-warp a round) left idle.
inline double idle_round_share(int64_t items, int64_t resident) {
  if (items <= 0 || resident <= 0) return 0.0;
  const int64_t capacity = (items + resident - 1) / resident * resident;
  return double(capacity - items) / double(capacity);
}

// The largest group: 8 heads, or 4 where groups of 8 leave more than a tenth of their rounds' capacity idle and
// groups of 4 leave less; items_of(g) is the launch's work items with groups of at most g heads. Measured on the
// H200 (docs/BENCHMARKS.md, session 13): groups of 4 ran FLUX.1's 24 heads of 4608 tokens (3.27 rounds with 8,
// the last a quarter full) 4% faster, and 1-4% slower where 8 leave few idle (48 heads, LTX-2, HunyuanVideo):
// the tables are loaded once per group.
constexpr int kGroupHeads = 8, kSmallGroupHeads = 4;
template <typename ItemsOf>
int max_group_heads(ItemsOf items_of, int64_t resident_half_warps) {
  const double idle = idle_round_share(items_of(kGroupHeads), resident_half_warps);
  const bool small = idle > 0.1 && idle_round_share(items_of(kSmallGroupHeads), resident_half_warps) < idle;
  return small ? kSmallGroupHeads : kGroupHeads;
}

}  // namespace dfuse::detail
