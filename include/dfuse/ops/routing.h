// dfuse ops, routing family: MoE expert selection.
//
// Same pattern as every dfuse op: can_use_<op>(...) answers for exactly the inputs the kernel
// accepts (and, given `why`, says which guard failed), and <op>(...) re-checks and throws
// dfuse::Unsupported naming the failed guard. The backend is chosen by the device of the tensors
// (host or CUDA). Outputs are caller-owned.
#pragma once

#include <cstdint>
#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

// The most experts a row may have: one warp keeps a row's E ranks in shared memory (4 KiB per
// row at E = 1024, four rows per block) and scans E / 32 of them per lane for each pick.
inline constexpr int64_t kGroupLimitedTopkMaxExperts = 1024;

// diffusion.group_limited_topk: the group-limited expert choice of the LingBot Video MoE router.
// Replaces the eager chain (E = n_group * G experts per row, scores already biased):
//   group_scores = scores.view(T, n_group, G).topk(2, dim=-1).values.sum(dim=-1)
//   group_idx = torch.topk(group_scores, topk_group, dim=-1, sorted=False).indices
//   keep = zeros(T, n_group).scatter_(1, group_idx, 1).repeat_interleave(G, dim=-1).bool()
//   ids = torch.topk(scores.masked_fill(~keep, -inf), top_k, dim=-1, sorted=False).indices
// Contract (selection-equivalent): every row of `ids` holds the same SET of expert ids as the
// chain on CUDA; the order within a row is unspecified. Every choice ranks values in
// torch.topk's order on CUDA (radix keys: NaN above +inf, all NaNs equal, +0 above -0) and breaks
// ties towards the lowest index, as torch.topk(sorted=False) does (strict winners, then the
// lowest-index ties). A group score is the sum of its two highest values, summed from torch's
// +0 identity (-0 + -0 gives +0); a group holding a NaN scores NaN and is chosen first. NaN
// inputs are therefore matched too, not refused.
//   scores: [T, E] f32, T >= 1, last dim contiguous, any non-negative row stride
//   ids:    [T, top_k] int64, contiguous, never overlapping scores
//   n_group > 1, E % n_group == 0, E / n_group >= 2, 0 < topk_group <= n_group,
//   0 < top_k <= topk_group * (E / n_group), E <= kGroupLimitedTopkMaxExperts
bool can_use_group_limited_topk(const TensorView& scores, int64_t n_group, int64_t topk_group, int64_t top_k,
                                const TensorView& ids, std::string* why = nullptr);
void group_limited_topk(const TensorView& scores, int64_t n_group, int64_t topk_group, int64_t top_k,
                        const TensorView& ids, Stream stream = {});

}  // namespace dfuse
