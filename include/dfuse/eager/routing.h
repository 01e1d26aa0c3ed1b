// dfuse eager reference of the routing family: the LingBot Video router chain written as torch
// runs it on CUDA, one torch.topk(sorted=False) replica per step. It runs on the host; for CUDA
// tensors it synchronizes `stream`, copies the scores to the host and the ids back, and returns
// once the ids are written.
#pragma once

#include <cstdint>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::eager {

// ids = torch.topk(scores.masked_fill(~keep, -inf), top_k, dim=-1, sorted=False).indices, where keep
// marks the experts of the topk_group groups with the highest top-2 sums (see dfuse/ops/routing.h).
// scores [T, E] f32 with a contiguous last dim; ids [T, top_k] int64 contiguous. The ids of a row
// come as torch.topk(sorted=False) lays them out: strict winners, then ties, in index order.
void group_limited_topk_chain(const TensorView& scores, int64_t n_group, int64_t topk_group, int64_t top_k,
                              const TensorView& ids, Stream stream = {});

}  // namespace dfuse::eager
