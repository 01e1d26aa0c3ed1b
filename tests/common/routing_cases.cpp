#include "common/routing_cases.h"

#include <algorithm>
#include <limits>
#include <random>

#include "dfuse/core/runtime.h"
#include "dfuse/eager/routing.h"
#include "dfuse/ops/routing.h"

namespace dfuse::test {

const std::vector<RoutingConfig>& routing_configs() {
  static const std::vector<RoutingConfig> configs = {{128, 4, 2, 8}, {64, 8, 3, 8}, {128, 8, 3, 8},
                                                     {256, 8, 3, 8}, {64, 8, 3, 4}, {32, 4, 2, 4}};
  return configs;
}

const char* scores_name(Scores s) {
  switch (s) {
    case Scores::random: return "random";
    case Scores::all_equal: return "all_equal";
    case Scores::small_integers: return "small_integers";
    case Scores::specials: return "specials";
  }
  return "?";
}

namespace {

std::vector<float> make_scores(size_t elements, Scores kind, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::uniform_int_distribution<int> small(-1, 2), percent(0, 99), special(0, 4);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f, -0.0f};
  std::vector<float> scores(elements);
  for (float& v : scores) {
    switch (kind) {
      case Scores::random: v = uniform(rng); break;
      case Scores::all_equal: v = 1.0f; break;
      case Scores::small_integers: v = float(small(rng)); break;
      case Scores::specials: v = percent(rng) < 8 ? specials[special(rng)] : uniform(rng); break;
    }
  }
  return scores;
}

// A row's ids, sorted; "" or what is wrong with them.
std::string sorted_row(std::vector<int64_t>& row, int64_t experts) {
  std::sort(row.begin(), row.end());
  if (row.front() < 0 || row.back() >= experts) return "id out of range (unwritten?)";
  if (std::adjacent_find(row.begin(), row.end()) != row.end()) return "repeated id";
  return "";
}

std::string row_str(const std::vector<int64_t>& row) {
  std::string s;
  for (int64_t id : row) s.append(s.empty() ? "" : " ").append(std::to_string(id));
  return s;
}

}  // namespace

std::string run_group_limited_topk_case(Device d, const RoutingConfig& c, int64_t tokens, Scores scores,
                                        uint64_t seed, int64_t row_stride) {
  if (row_stride == 0) row_stride = c.experts;
  const std::vector<float> host_scores =
      make_scores(size_t((tokens - 1) * row_stride + c.experts), scores, seed);
  const size_t score_bytes = host_scores.size() * sizeof(float);
  const size_t id_bytes = size_t(tokens * c.top_k) * sizeof(int64_t);
  Runtime& rt = runtime(d);
  DeviceBuffer score_buffer(d, score_bytes), fused_buffer(d, id_bytes), eager_buffer(d, id_bytes);
  rt.copy_to_device(score_buffer.data(), host_scores.data(), score_bytes);
  const std::vector<int64_t> poison(size_t(tokens * c.top_k), -1);
  rt.copy_to_device(fused_buffer.data(), poison.data(), id_bytes);
  rt.copy_to_device(eager_buffer.data(), poison.data(), id_bytes);

  const int64_t score_sizes[] = {tokens, c.experts}, score_strides[] = {row_stride, 1};
  const TensorView score_view(score_buffer.data(), DType::f32, score_sizes, score_strides, 2, d);
  const TensorView fused(fused_buffer.data(), DType::i64, {tokens, c.top_k}, d);
  const TensorView eager(eager_buffer.data(), DType::i64, {tokens, c.top_k}, d);
  std::string why;
  if (!can_use_group_limited_topk(score_view, c.n_group, c.topk_group, c.top_k, fused, &why))
    return "rejected: " + why;
  group_limited_topk(score_view, c.n_group, c.topk_group, c.top_k, fused);
  eager::group_limited_topk_chain(score_view, c.n_group, c.topk_group, c.top_k, eager);
  rt.synchronize({});

  std::vector<int64_t> fused_ids(size_t(tokens * c.top_k)), eager_ids(fused_ids.size());
  rt.copy_to_host(fused_ids.data(), fused_buffer.data(), id_bytes);
  rt.copy_to_host(eager_ids.data(), eager_buffer.data(), id_bytes);
  for (int64_t t = 0; t < tokens; ++t) {
    const auto row_begin = [&](std::vector<int64_t>& ids) { return ids.begin() + t * c.top_k; };
    std::vector<int64_t> got(row_begin(fused_ids), row_begin(fused_ids) + c.top_k);
    std::vector<int64_t> want(row_begin(eager_ids), row_begin(eager_ids) + c.top_k);
    const std::string got_error = sorted_row(got, c.experts), want_error = sorted_row(want, c.experts);
    if (!want_error.empty()) return "row " + std::to_string(t) + " of the chain: " + want_error;
    if (!got_error.empty()) return "row " + std::to_string(t) + ": " + got_error;
    if (got != want)
      return "row " + std::to_string(t) + ": ids {" + row_str(got) + "}, chain {" + row_str(want) + "}";
  }
  return "";
}

}  // namespace dfuse::test
