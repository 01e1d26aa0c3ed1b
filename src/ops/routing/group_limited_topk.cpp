// diffusion.group_limited_topk: guards, dispatch, and the host kernel.
#include "ops/routing/group_limited_topk.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/routing.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "group_limited_topk";

void check_parameters(detail::GuardList& g, int64_t experts, int64_t n_group, int64_t topk_group,
                      int64_t top_k) {
  const auto text = [](int64_t v) { return std::to_string(v); };
  if (experts > kGroupLimitedTopkMaxExperts)
    g.fail("experts", "scores must have at most " + text(kGroupLimitedTopkMaxExperts) + " experts, got " +
                          text(experts));
  if (n_group <= 1) g.fail("n_group", "n_group must be > 1, got " + text(n_group));
  if (n_group > 1 && experts % n_group != 0)
    g.fail("n_group", "n_group " + text(n_group) + " must divide the " + text(experts) + " experts");
  if (!g.ok()) return;
  const int64_t per_group = experts / n_group;
  if (per_group < 2) g.fail("group_size", "groups must hold at least 2 experts, got " + text(per_group));
  if (topk_group <= 0 || topk_group > n_group)
    g.fail("topk_group", "topk_group must be in 1.." + text(n_group) + ", got " + text(topk_group));
  if (top_k <= 0 || (g.ok() && top_k > topk_group * per_group))
    g.fail("top_k", "top_k must be in 1.." + text(topk_group * per_group) +
                        " (topk_group * experts per group), got " + text(top_k));
}

detail::GuardList check(const TensorView& scores, int64_t n_group, int64_t topk_group, int64_t top_k,
                        const TensorView& ids) {
  detail::GuardList g(kOp);
  g.dtype_in("scores", scores, {DType::f32});
  g.rank_between("scores", scores, 2, 2);
  if (!g.ok()) return g;
  if (scores.numel() == 0) g.fail("empty", "scores must be non-empty, got " + detail::shape_str(scores));
  // The CUDA grid has one block per four tokens.
  if (scores.size(0) > std::numeric_limits<int32_t>::max())
    g.fail("tokens", "scores must have fewer than 2^31 tokens, got " + std::to_string(scores.size(0)));
  g.not_null("scores", scores);
  g.last_dim_contiguous("scores", scores);
  g.non_negative_strides("scores", scores);
  check_parameters(g, scores.size(1), n_group, topk_group, top_k);
  g.dtype_in("ids", ids, {DType::i64});
  g.same_device("ids", ids, scores, "scores");
  if (!g.ok()) return g;
  if (ids.dim() != 2 || ids.size(0) != scores.size(0) || ids.size(1) != top_k)
    g.fail("ids_shape", "ids must be [" + std::to_string(scores.size(0)) + ", " + std::to_string(top_k) +
                            "], got " + detail::shape_str(ids));
  if (g.ok() && !ids.is_contiguous())
    g.fail("ids_layout", "ids must be contiguous, got strides " + detail::strides_str(ids));
  g.not_null("ids", ids);
  g.no_partial_overlap("ids", ids, "scores", scores, /*in_place_ok=*/false);
  return g;
}

// Picks `count` of keys[0, n) by repeated argmax (higher key, then lower index); each pick's
// key becomes kPickedKey.
template <typename OnPick>
void pick_host(uint32_t* keys, int n, int count, OnPick on_pick) {
  for (int pick = 0; pick < count; ++pick) {
    uint64_t best = 0;
    for (int i = 0; i < n; ++i) best = std::max(best, detail::candidate(keys[i], i));
    const int index = detail::candidate_index(best);
    keys[index] = detail::kPickedKey;
    on_pick(pick, index);
  }
}

void host_kernel(const detail::GroupLimitedTopkParams& p, Stream) {
  const int per_group = p.experts / p.n_group;
  std::vector<uint32_t> keys(size_t(p.experts)), group_keys(size_t(p.n_group));
  std::vector<char> selected(size_t(p.n_group));
  for (int64_t t = 0; t < p.tokens; ++t) {
    const float* row = p.scores + t * p.row_stride;
    for (int g = 0; g < p.n_group; ++g) {
      uint32_t* group = keys.data() + g * per_group;
      for (int e = 0; e < per_group; ++e) group[e] = detail::topk_key(row[g * per_group + e]);
      uint32_t top[2];
      pick_host(group, per_group, 2,
                [&](int pick, int e) { top[pick] = detail::topk_key(row[g * per_group + e]); });
      group_keys[size_t(g)] = detail::group_score_key(top[0], top[1]);
    }
    std::fill(selected.begin(), selected.end(), 0);
    pick_host(group_keys.data(), p.n_group, p.topk_group, [&](int, int g) { selected[size_t(g)] = 1; });
    for (int e = 0; e < p.experts; ++e)
      keys[size_t(e)] = selected[size_t(e / per_group)] ? detail::topk_key(row[e]) : detail::kMaskedKey;
    int64_t* out = p.ids + t * p.top_k;
    pick_host(keys.data(), p.experts, p.top_k, [&](int pick, int e) { out[pick] = e; });
  }
}
DFUSE_REGISTER_ENTRY(host, "group_limited_topk", &host_kernel);

}  // namespace

bool can_use_group_limited_topk(const TensorView& scores, int64_t n_group, int64_t topk_group, int64_t top_k,
                                const TensorView& ids, std::string* why) {
  return check(scores, n_group, topk_group, top_k, ids).answer(why);
}

void group_limited_topk(const TensorView& scores, int64_t n_group, int64_t topk_group, int64_t top_k,
                        const TensorView& ids, Stream stream) {
  check(scores, n_group, topk_group, top_k, ids).throw_if_failed();
  static detail::OpEntry entry("diffusion.group_limited_topk");
  const detail::GroupLimitedTopkParams params{
      .scores = static_cast<const float*>(scores.data()),
      .row_stride = scores.stride(0),
      .ids = static_cast<int64_t*>(ids.data()),
      .tokens = scores.size(0),
      .experts = int(scores.size(1)),
      .n_group = int(n_group),
      .topk_group = int(topk_group),
      .top_k = int(top_k),
      .device = scores.device().index,
  };
  entry.get<detail::GroupLimitedTopkEntry>(scores.device())(params, stream);
}

}  // namespace dfuse
