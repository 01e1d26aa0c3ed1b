// diffusion.group_limited_topk: the CUDA kernel. One warp per token: the row's ranking keys sit
// in the warp's shared memory (E <= 1024), each lane scores groups lane, lane + 32, ... and every
// pick is a warp-shuffle argmax (higher key, then lower index). Contract and ranking:
// ops/routing/group_limited_topk.h.
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "dfuse/ops/routing.h"
#include "ops/routing/group_limited_topk.h"

namespace dfuse::detail {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMaxExperts = int(kGroupLimitedTopkMaxExperts);
constexpr int kMaxGroups = kMaxExperts / 2;

__device__ uint64_t warp_max(uint64_t c) {
  for (int offset = 16; offset > 0; offset >>= 1) c = max(c, __shfl_xor_sync(0xFFFFFFFFu, c, offset));
  return c;
}

// Picks `count` of keys[0, n) (warp-wide) by repeated argmax; each pick's key becomes kPickedKey.
// Every lane sees the picks in order.
template <typename OnPick>
__device__ void pick_warp(uint32_t* keys, int n, int count, int lane, OnPick on_pick) {
  for (int pick = 0; pick < count; ++pick) {
    uint64_t best = 0;
    for (int i = lane; i < n; i += 32) best = max(best, candidate(keys[i], i));
    const int index = candidate_index(warp_max(best));
    __syncwarp();
    if (lane == 0) keys[index] = kPickedKey;
    __syncwarp();
    on_pick(pick, index);
  }
}

// The two highest keys of a group, scanning in index order (the lower index wins ties).
__device__ uint32_t group_key(const uint32_t* keys, int per_group) {
  uint32_t first = 0, second = 0;
  for (int e = 0; e < per_group; ++e) {
    const uint32_t k = keys[e];
    if (k > first) {
      second = first;
      first = k;
    } else if (k > second) {
      second = k;
    }
  }
  return group_score_key(first, second);
}

__global__ void __launch_bounds__(kWarpsPerBlock * 32) group_limited_topk_kernel(GroupLimitedTopkParams p) {
  __shared__ uint32_t expert_keys[kWarpsPerBlock][kMaxExperts];
  __shared__ uint32_t group_keys[kWarpsPerBlock][kMaxGroups];
  __shared__ bool selected[kWarpsPerBlock][kMaxGroups];
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  const int64_t token = int64_t(blockIdx.x) * kWarpsPerBlock + warp;
  if (token >= p.tokens) return;
  uint32_t* keys = expert_keys[warp];
  const float* row = p.scores + token * p.row_stride;
  const int per_group = p.experts / p.n_group;

  for (int e = lane; e < p.experts; e += 32) keys[e] = topk_key(row[e]);
  __syncwarp();
  for (int g = lane; g < p.n_group; g += 32) {
    group_keys[warp][g] = group_key(keys + g * per_group, per_group);
    selected[warp][g] = false;
  }
  __syncwarp();
  pick_warp(group_keys[warp], p.n_group, p.topk_group, lane, [&](int, int g) {
    if (lane == 0) selected[warp][g] = true;
  });
  __syncwarp();
  for (int e = lane; e < p.experts; e += 32)
    if (!selected[warp][e / per_group]) keys[e] = kMaskedKey;
  __syncwarp();
  int64_t* out = p.ids + token * p.top_k;
  pick_warp(keys, p.experts, p.top_k, lane, [&](int pick, int e) {
    if (lane == 0) out[pick] = e;
  });
}

void cuda_kernel(const GroupLimitedTopkParams& p, Stream stream) {
  const DeviceGuard device(p.device);
  const auto blocks = unsigned((p.tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
  group_limited_topk_kernel<<<blocks, kWarpsPerBlock * 32, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "group_limited_topk", &cuda_kernel);

}  // namespace
}  // namespace dfuse::detail
