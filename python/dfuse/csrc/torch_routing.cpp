// torch.ops.dfuse, routing family (a fragment of the library torch_ops.cpp defines):
//   group_limited_topk(scores, n_group, topk_group, top_k)
//     LingBot Video's group-limited expert selection: per-group top-2 sums, the topk_group best
//     groups, experts of the other groups masked to -inf, then topk(top_k, sorted=False).
// Contract: selection-equivalent. Each row holds the same set of expert ids as the aten chain; the
// order within a row is unspecified (as it is for topk(sorted=False)). The first-sight Gate
// compares bits, which an order-free contract does not fix, so this op runs without it; the
// pytest compares sorted rows against the chain. Inputs the kernel does not accept
// (dfuse::can_use_group_limited_topk) run the aten chain.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>
#include <tuple>

#include "dfuse/ops/routing.h"
#include "tensor_views.h"

namespace {

using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_kernel;
using dfuse::torch_binding::stream_of;
using dfuse::torch_binding::view_of;

at::Tensor group_limited_topk_chain(const at::Tensor& scores, int64_t n_group, int64_t topk_group, int64_t top_k) {
  const int64_t tokens = scores.size(0), experts = scores.size(1);
  const int64_t per_group = experts / n_group;
  const at::Tensor group_scores = std::get<0>(scores.reshape({tokens, n_group, per_group}).topk(2, -1)).sum(-1);
  const at::Tensor group_idx = std::get<1>(group_scores.topk(topk_group, -1, true, /*sorted=*/false));
  const at::Tensor group_mask = at::zeros_like(group_scores).scatter_(1, group_idx, 1);
  const at::Tensor score_mask =
      group_mask.unsqueeze(-1).expand({tokens, n_group, per_group}).reshape({tokens, experts});
  const at::Tensor masked = scores.masked_fill(score_mask.logical_not(), -std::numeric_limits<float>::infinity());
  return std::get<1>(masked.topk(top_k, -1, true, /*sorted=*/false));
}

at::Tensor group_limited_topk(const at::Tensor& scores, int64_t n_group, int64_t topk_group, int64_t top_k) {
  const c10::OptionalDeviceGuard device_guard(scores.device());
  if (scores.dim() != 2) return group_limited_topk_chain(scores, n_group, topk_group, top_k);
  at::Tensor ids = at::empty({scores.size(0), top_k}, scores.options().dtype(at::kLong));
  const auto in = input_view(scores);
  const auto out = view_of(ids, ids.mutable_data_ptr());
  if (!in || !out || !dfuse::can_use_group_limited_topk(*in, n_group, topk_group, top_k, *out))
    return group_limited_topk_chain(scores, n_group, topk_group, top_k);
  run_kernel("group_limited_topk",
             [&] { dfuse::group_limited_topk(*in, n_group, topk_group, top_k, *out, stream_of(scores)); });
  return ids;
}

at::Tensor group_limited_topk_meta(const at::Tensor& scores, int64_t, int64_t, int64_t top_k) {
  TORCH_CHECK(scores.dim() == 2, "group_limited_topk: scores must be [tokens, experts]");
  return at::empty_symint({scores.sym_size(0), c10::SymInt(top_k)}, scores.options().dtype(at::kLong));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("group_limited_topk(Tensor scores, int n_group, int topk_group, int top_k) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

// The same kernels serve CUDA and CPU tensors (the dfuse op picks its backend by device).
TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { m.impl("group_limited_topk", &group_limited_topk); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { m.impl("group_limited_topk", &group_limited_topk); }
TORCH_LIBRARY_IMPL(dfuse, Meta, m) { m.impl("group_limited_topk", &group_limited_topk_meta); }
