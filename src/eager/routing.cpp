// The eager router chain on the host, step by step as torch runs it: each torch.topk(sorted=False)
// is a replica of the CUDA radix select (find the k-th ranking key, then write the strictly greater
// elements and then the equal ones, both in index order).
#include "dfuse/eager/routing.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "dfuse/core/runtime.h"

namespace dfuse::eager {

namespace {

// TopKTypeConfig<float>::convert: NaN above everything, +0 above -0.
uint32_t radix_key(float v) {
  if (v != v) return 0xFFFFFFFFu;
  const auto bits = std::bit_cast<uint32_t>(v);
  return bits ^ ((bits & 0x80000000u) ? 0xFFFFFFFFu : 0x80000000u);
}

// torch.topk(values, k, sorted=False).indices.
std::vector<int> topk_unsorted(const std::vector<float>& values, int k) {
  std::vector<uint32_t> keys(values.size());
  std::transform(values.begin(), values.end(), keys.begin(), radix_key);
  std::vector<uint32_t> descending = keys;
  std::nth_element(descending.begin(), descending.begin() + (k - 1), descending.end(), std::greater<>());
  const uint32_t kth = descending[size_t(k - 1)];
  std::vector<int> picked;
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] > kth) picked.push_back(int(i));
  for (size_t i = 0; i < keys.size() && int(picked.size()) < k; ++i)
    if (keys[i] == kth) picked.push_back(int(i));
  return picked;
}

void route_row(const float* row, int experts, int n_group, int topk_group, int top_k, int64_t* ids) {
  const int per_group = experts / n_group;
  // group_scores = scores.view(T, n_group, G).topk(2).values.sum(-1): ATen sums from +0.
  std::vector<float> group_scores(static_cast<size_t>(n_group));
  for (int g = 0; g < n_group; ++g) {
    const std::vector<float> group(row + g * per_group, row + (g + 1) * per_group);
    float sum = 0.0f;
    for (int e : topk_unsorted(group, 2)) sum += group[size_t(e)];
    group_scores[size_t(g)] = sum;
  }
  std::vector<bool> keep(size_t(n_group), false);
  for (int g : topk_unsorted(group_scores, topk_group)) keep[size_t(g)] = true;
  std::vector<float> masked(row, row + experts);
  for (int e = 0; e < experts; ++e)
    if (!keep[size_t(e / per_group)]) masked[size_t(e)] = -std::numeric_limits<float>::infinity();
  const std::vector<int> chosen = topk_unsorted(masked, top_k);
  std::copy(chosen.begin(), chosen.end(), ids);
}

}  // namespace

void group_limited_topk_chain(const TensorView& scores, int64_t n_group, int64_t topk_group, int64_t top_k,
                              const TensorView& ids, Stream stream) {
  const int64_t tokens = scores.size(0), experts = scores.size(1), row_stride = scores.stride(0);
  if (tokens == 0) return;
  const size_t score_elements = size_t((tokens - 1) * row_stride + experts);
  std::vector<float> host_scores;
  std::vector<int64_t> host_ids;
  const bool on_host = !scores.device().is_cuda();
  const float* rows = static_cast<const float*>(scores.data());
  int64_t* out = static_cast<int64_t*>(ids.data());
  if (!on_host) {
    Runtime& rt = runtime(scores.device());
    rt.synchronize(stream);
    host_scores.resize(score_elements);
    host_ids.resize(size_t(tokens * top_k));
    rt.copy_to_host(host_scores.data(), rows, score_elements * sizeof(float));
    rows = host_scores.data();
    out = host_ids.data();
  }
  for (int64_t t = 0; t < tokens; ++t)
    route_row(rows + t * row_stride, int(experts), int(n_group), int(topk_group), int(top_k),
              out + t * top_k);
  if (!on_host)
    runtime(ids.device()).copy_to_device(ids.data(), host_ids.data(), host_ids.size() * sizeof(int64_t));
}

}  // namespace dfuse::eager
