// diffusion.varlen_pack_qkv — replaces `x.reshape(B * S, H, D).index_select(0, indices)` for each
// of q, k and v (the valid-token pack of varlen masked attention; three gather kernels) with one
// launch. Contract: bitwise identical by construction (common/row_gather.h copies whole rows).
#include "common/entries.h"
#include "common/guards.h"
#include "common/row_gather.h"
#include "dfuse/ops/data_movement.h"
#include "ops/data_movement/copy_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "varlen_pack_qkv";

detail::GuardList check(const QkvViews& x, const TensorView& indices, const QkvViews& out) {
  detail::GuardList g(kOp);
  detail::check_contiguous_input(g, "q", x.q, 4, x.q, "q");
  detail::check_contiguous_input(g, "k", x.k, 4, x.q, "q");
  detail::check_contiguous_input(g, "v", x.v, 4, x.q, "q");
  g.same_shape("k", x.k, x.q, "q");
  g.same_shape("v", x.v, x.q, "q");
  detail::check_indices(g, "indices", indices, -1, x.q, "q");
  if (!g.ok()) return g;
  detail::check_qkv_outputs(g, out, {indices.size(0), x.q.size(2), x.q.size(3)}, x.q, "q",
                            {{"q", &x.q}, {"k", &x.k}, {"v", &x.v}, {"indices", &indices}});
  return g;
}

DFUSE_REGISTER_ENTRY(host, "varlen_pack_qkv", &detail::row_gather_host);

}  // namespace

bool can_use_varlen_pack_qkv(const QkvViews& x, const TensorView& indices, const QkvViews& out, std::string* why) {
  return check(x, indices, out).answer(why);
}

void varlen_pack_qkv(const QkvViews& x, const TensorView& indices, const QkvViews& out, Stream stream) {
  check(x, indices, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.varlen_pack_qkv");
  entry.get<detail::RowGatherEntry>(x.q.device())(
      detail::row_gather_params(indices, x.q.size(2) * x.q.size(3), x.q.size(0) * x.q.size(1), false,
                                {{&x.q, nullptr, out.q}, {&x.k, nullptr, out.k}, {&x.v, nullptr, out.v}}),
      stream);
}

}  // namespace dfuse
