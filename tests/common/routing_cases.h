// Test cases of the routing family, shared by the host and GPU suites: group_limited_topk against
// the eager router chain (dfuse/eager/routing.h), compared as a set of ids per row.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"

namespace dfuse::test {

struct RoutingConfig {
  int64_t experts, n_group, topk_group, top_k;
};
// LingBot Video's production config (128, 4, 2, 8) and the reference's test configs.
const std::vector<RoutingConfig>& routing_configs();

enum class Scores : uint8_t {
  random,          // uniform in (-2, 2)
  all_equal,       // every score 1: every choice is a tie
  small_integers,  // -1, 0, 1 or 2: ties inside and across groups
  specials,        // random with about 8% NaN, +-inf and +-0
};
const char* scores_name(Scores s);

// Runs the op and the chain on `d` over [tokens, E] scores whose rows are `row_stride` elements
// apart (0: E); "" when every row holds the same set of valid, distinct ids, else what differs.
std::string run_group_limited_topk_case(Device d, const RoutingConfig& c, int64_t tokens, Scores scores,
                                        uint64_t seed, int64_t row_stride = 0);

}  // namespace dfuse::test
