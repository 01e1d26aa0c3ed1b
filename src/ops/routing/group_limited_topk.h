// diffusion.group_limited_topk — replaces the LingBot Video router's group-limited top-k chain
// (per-group top-2 sum, group topk, scatter/expand mask, masked_fill(-inf), expert topk; about
// seven kernels). Contract: the same set of expert ids per row as the chain on CUDA (see
// dfuse/ops/routing.h). Both kernels pick by repeated argmax over torch.topk's ranking keys with
// the lowest index winning ties, which selects exactly torch.topk(sorted=False)'s set.
#pragma once

#include <bit>
#include <cstdint>

#include "common/arith.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

struct GroupLimitedTopkParams {
  const float* scores;
  int64_t row_stride;  // elements between rows of scores
  int64_t* ids;        // [tokens, top_k], contiguous
  int64_t tokens;
  int experts, n_group, topk_group, top_k;
  int device;  // CUDA device index of scores and ids (the kernel launches there)
};

using GroupLimitedTopkEntry = void (*)(const GroupLimitedTopkParams& p, Stream stream);

DFUSE_HD uint32_t float_bits_of(float v) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(v);
#else
  return std::bit_cast<uint32_t>(v);
#endif
}

DFUSE_HD float float_of_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

// torch.topk's ranking key on CUDA (TopKTypeConfig<float>::convert): unsigned order of the keys is
// the order of the values, with every NaN equal and above +inf, and +0 above -0.
DFUSE_HD uint32_t topk_key(float v) {
  if (v != v) return 0xFFFFFFFFu;
  const uint32_t bits = float_bits_of(v);
  return bits ^ ((bits & 0x80000000u) ? 0xFFFFFFFFu : 0x80000000u);
}

// The value of a key (a NaN for the NaN key). Never 0 for a value, so 0 marks a picked entry.
DFUSE_HD float key_value(uint32_t key) {
  if (key == 0xFFFFFFFFu) return float_of_bits(0x7FC00000u);
  return float_of_bits((key & 0x80000000u) ? key ^ 0x80000000u : ~key);
}

inline constexpr uint32_t kPickedKey = 0;

// A group's score key: torch's sum of its two highest values, accumulated from a +0 identity.
DFUSE_HD uint32_t group_score_key(uint32_t first, uint32_t second) {
  return topk_key(add_rn(add_rn(0.0f, key_value(first)), key_value(second)));
}

// An argmax candidate: the higher key wins, then the lower index.
DFUSE_HD uint64_t candidate(uint32_t key, int index) {
  return (uint64_t(key) << 32) | (0xFFFFFFFFu - uint32_t(index));
}
DFUSE_HD int candidate_index(uint64_t c) { return int(0xFFFFFFFFu - uint32_t(c)); }

// topk_key(-inf): the key of an expert of a group that was not chosen (masked_fill(-inf)).
inline constexpr uint32_t kMaskedKey = 0x007FFFFFu;

}  // namespace dfuse::detail
