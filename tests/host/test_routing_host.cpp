// Routing ops on the host backend: group_limited_topk picks the chain's set of ids over every
// config on random, fully tied, integer-tied and NaN/inf/+-0 scores; every guard's error; and
// the CLI harness's set comparison.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/routing_cases.h"
#include "dfuse/cli_harness.h"
#include "dfuse/core/error.h"
#include "dfuse/ops/routing.h"

namespace dfuse::test {
namespace {

TEST(RoutingHost, GroupLimitedTopkMatchesChainAsSets) {
  uint64_t seed = 700;
  for (Scores scores : {Scores::random, Scores::all_equal, Scores::small_integers, Scores::specials})
    for (const auto& c : routing_configs())
      for (int64_t tokens : {1, 17, 128})
        EXPECT_EQ(run_group_limited_topk_case(Device::host(), c, tokens, scores, seed++), "")
            << scores_name(scores) << " E" << c.experts << " tokens " << tokens;
}

TEST(RoutingHost, StridedRowsAndLargestRows) {
  EXPECT_EQ(run_group_limited_topk_case(Device::host(), {128, 4, 2, 8}, 17, Scores::random, 1, 200), "");
  EXPECT_EQ(run_group_limited_topk_case(Device::host(), {1024, 8, 8, 1024}, 3, Scores::small_integers, 2),
            "");
  EXPECT_EQ(run_group_limited_topk_case(Device::host(), {1024, 512, 1, 2}, 3, Scores::specials, 3), "");
}

// Ties resolve to the lowest index; a group with a NaN outranks every other, NaN outranks +inf.
TEST(RoutingHost, TiesAndNans) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> scores = {1, 1, 1, 1, 1, 1, 1, 1,  // all tied: groups 0, 1; experts 0, 1, 2
                               0, 0, 5, 5, 1, inf, nan, 0};  // groups 3 (NaN), 2 (inf); 6, 5, 4
  std::vector<int64_t> ids(6);
  const TensorView s(scores.data(), DType::f32, {2, 8}), out(ids.data(), DType::i64, {2, 3});
  group_limited_topk(s, 4, 2, 3, out);
  EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.begin() + 3), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(std::vector<int64_t>(ids.begin() + 3, ids.end()), (std::vector<int64_t>{6, 5, 4}));
}

// ---- guards ----------------------------------------------------------------------------------

struct RoutingGuards : ::testing::Test {
  std::vector<float> score_data = std::vector<float>(4 * 64, 1.0f);
  std::vector<int64_t> id_data = std::vector<int64_t>(4 * 64);
  TensorView scores{score_data.data(), DType::f32, {4, 64}};
  TensorView ids{id_data.data(), DType::i64, {4, 8}};

  // The guard named by the Unsupported the op throws; can_use must refuse too.
  std::string guard_of(const TensorView& s, int64_t n_group, int64_t topk_group, int64_t top_k,
                       const TensorView& out) {
    std::string why;
    EXPECT_FALSE(can_use_group_limited_topk(s, n_group, topk_group, top_k, out, &why));
    EXPECT_NE(why.find("group_limited_topk: "), std::string::npos) << why;
    try {
      group_limited_topk(s, n_group, topk_group, top_k, out);
    } catch (const Unsupported& e) {
      return e.guard();
    }
    return "(no throw)";
  }
};

TEST_F(RoutingGuards, AcceptsTheValidCall) {
  EXPECT_TRUE(can_use_group_limited_topk(scores, 8, 3, 8, ids));
}

TEST_F(RoutingGuards, ScoresTensor) {
  EXPECT_EQ(guard_of(TensorView(score_data.data(), DType::bf16, {4, 64}), 8, 3, 8, ids), "dtype");
  EXPECT_EQ(guard_of(TensorView(score_data.data(), DType::f32, {256}), 8, 3, 8, ids), "rank");
  EXPECT_EQ(guard_of(TensorView(score_data.data(), DType::f32, {0, 64}), 8, 3, 8,
                     TensorView(id_data.data(), DType::i64, {0, 8})),
            "empty");
  const int64_t sizes[] = {4, 32}, column_strides[] = {1, 4};
  EXPECT_EQ(guard_of(TensorView(score_data.data(), DType::f32, sizes, column_strides, 2), 8, 3, 8, ids),
            "last_dim_stride");
  const int64_t negative_rows[] = {-64, 1};
  EXPECT_EQ(guard_of(TensorView(score_data.data() + 192, DType::f32, sizes, negative_rows, 2), 8, 3, 8, ids),
            "stride");
  std::vector<float> wide(4 * 2048, 1.0f);
  EXPECT_EQ(guard_of(TensorView(wide.data(), DType::f32, {4, 2048}), 8, 3, 8, ids), "experts");
}

TEST_F(RoutingGuards, Parameters) {
  EXPECT_EQ(guard_of(scores, 1, 1, 8, ids), "n_group");
  EXPECT_EQ(guard_of(scores, 6, 3, 8, ids), "n_group");
  EXPECT_EQ(guard_of(scores, 64, 3, 8, ids), "group_size");
  EXPECT_EQ(guard_of(scores, 8, 0, 8, ids), "topk_group");
  EXPECT_EQ(guard_of(scores, 8, 9, 8, ids), "topk_group");
  EXPECT_EQ(guard_of(scores, 8, 3, 0, TensorView(id_data.data(), DType::i64, {4, 0})), "top_k");
  EXPECT_EQ(guard_of(scores, 8, 1, 9, TensorView(id_data.data(), DType::i64, {4, 9})), "top_k");
}

TEST_F(RoutingGuards, IdsTensor) {
  EXPECT_EQ(guard_of(scores, 8, 3, 8, TensorView(id_data.data(), DType::i32, {4, 8})), "dtype");
  EXPECT_EQ(guard_of(scores, 8, 3, 8, TensorView(id_data.data(), DType::i64, {4, 7})), "ids_shape");
  EXPECT_EQ(guard_of(scores, 8, 3, 8, TensorView(id_data.data(), DType::i64, {3, 8})), "ids_shape");
  const int64_t sizes[] = {4, 8}, strides[] = {16, 1};
  EXPECT_EQ(guard_of(scores, 8, 3, 8, TensorView(id_data.data(), DType::i64, sizes, strides, 2)),
            "ids_layout");
  EXPECT_EQ(guard_of(scores, 8, 3, 8, TensorView(score_data.data(), DType::i64, {4, 8})), "overlap");
}

// ---- the CLI harness's set comparison -------------------------------------------------------

TEST(RoutingCliHarness, SortedRowsCompareAsSets) {
  std::vector<int64_t> a = {3, 1, 2, 9, 7, 8}, b = {1, 2, 3, 7, 8, 9};
  EXPECT_EQ(cli::compare_bits(a.data(), b.data(), 6, 8).mismatches, 6);
  cli::sort_rows(a.data(), 6, 3, sizeof(int64_t));
  EXPECT_EQ(cli::compare_bits(a.data(), b.data(), 6, 8).mismatches, 0);
  std::vector<int64_t> c = {1, 2, 4, 7, 8, 9};
  EXPECT_EQ(cli::compare_bits(c.data(), b.data(), 6, 8).mismatches, 1);
}

}  // namespace
}  // namespace dfuse::test
