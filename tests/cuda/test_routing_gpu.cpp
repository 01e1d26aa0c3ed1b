// GPU suite (label "gpu"), routing family: the CUDA group_limited_topk against the eager router
// chain, compared as sets per row, over every config, score kind and token count up to 4096.
#include <gtest/gtest.h>

#include <vector>

#include "common/routing_cases.h"
#include "common/tensors.h"

namespace dfuse::test {
namespace {

const Device kGpu = Device::cuda(0);

TEST(RoutingGpu, GroupLimitedTopkMatchesChainAsSets) {
  std::vector<int64_t> token_counts = {1, 17, 128};
  if (!small_shapes_only()) token_counts.push_back(4096);
  uint64_t seed = 7000;
  for (Scores scores : {Scores::random, Scores::all_equal, Scores::small_integers, Scores::specials})
    for (const auto& c : routing_configs())
      for (int64_t tokens : token_counts)
        EXPECT_EQ(run_group_limited_topk_case(kGpu, c, tokens, scores, seed++), "")
            << scores_name(scores) << " E" << c.experts << " tokens " << tokens;
}

TEST(RoutingGpu, StridedRowsAndLargestRows) {
  EXPECT_EQ(run_group_limited_topk_case(kGpu, {128, 4, 2, 8}, 4097, Scores::random, 1, 200), "");
  EXPECT_EQ(run_group_limited_topk_case(kGpu, {1024, 8, 8, 1024}, 33, Scores::small_integers, 2), "");
  EXPECT_EQ(run_group_limited_topk_case(kGpu, {1024, 512, 1, 2}, 33, Scores::specials, 3), "");
}

}  // namespace
}  // namespace dfuse::test
