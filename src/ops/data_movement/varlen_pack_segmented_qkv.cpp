// diffusion.varlen_pack_segmented_qkv — replaces `torch.cat([prefix, main], dim=1)` followed by
// the varlen pack `.reshape(B * S, H, D).index_select(0, indices)`, for each of q, k and v, with one
// launch and no cat. Contract: bitwise identical by construction (common/row_gather.h copies
// whole rows from prefix or main; -0 and NaN payloads unchanged).
#include "common/entries.h"
#include "common/guards.h"
#include "common/row_gather.h"
#include "dfuse/ops/data_movement.h"
#include "ops/data_movement/copy_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "varlen_pack_segmented_qkv";

detail::GuardList check(const QkvViews& prefix, const QkvViews& main, const TensorView& indices,
                        const QkvViews& out) {
  detail::GuardList g(kOp);
  const TensorView& ref = prefix.q;
  detail::check_contiguous_input(g, "prefix.q", prefix.q, 4, ref, "prefix.q");
  detail::check_contiguous_input(g, "prefix.k", prefix.k, 4, ref, "prefix.q");
  detail::check_contiguous_input(g, "prefix.v", prefix.v, 4, ref, "prefix.q");
  detail::check_contiguous_input(g, "main.q", main.q, 4, ref, "prefix.q");
  detail::check_contiguous_input(g, "main.k", main.k, 4, ref, "prefix.q");
  detail::check_contiguous_input(g, "main.v", main.v, 4, ref, "prefix.q");
  g.same_shape("prefix.k", prefix.k, prefix.q, "prefix.q");
  g.same_shape("prefix.v", prefix.v, prefix.q, "prefix.q");
  g.same_shape("main.k", main.k, main.q, "main.q");
  g.same_shape("main.v", main.v, main.q, "main.q");
  detail::check_indices(g, "indices", indices, -1, ref, "prefix.q");
  if (!g.ok()) return g;
  if (main.q.size(0) != ref.size(0) || main.q.size(2) != ref.size(2) || main.q.size(3) != ref.size(3))
    g.fail("shape", "main.q " + detail::shape_str(main.q) + " must match prefix.q " + detail::shape_str(ref) +
                        " in every dim but 1");
  detail::check_qkv_outputs(g, out, {indices.size(0), ref.size(2), ref.size(3)}, ref, "prefix.q",
                            {{"prefix.q", &prefix.q}, {"prefix.k", &prefix.k}, {"prefix.v", &prefix.v},
                             {"main.q", &main.q}, {"main.k", &main.k}, {"main.v", &main.v},
                             {"indices", &indices}});
  return g;
}

DFUSE_REGISTER_ENTRY(host, "varlen_pack_segmented_qkv", &detail::row_gather_host);

}  // namespace

bool can_use_varlen_pack_segmented_qkv(const QkvViews& prefix, const QkvViews& main, const TensorView& indices,
                                       const QkvViews& out, std::string* why) {
  return check(prefix, main, indices, out).answer(why);
}

void varlen_pack_segmented_qkv(const QkvViews& prefix, const QkvViews& main, const TensorView& indices,
                               const QkvViews& out, Stream stream) {
  check(prefix, main, indices, out).throw_if_failed();
  const int64_t batch = prefix.q.size(0), segment = prefix.q.size(1) + main.q.size(1);
  detail::RowGatherParams params = detail::row_gather_params(
      indices, prefix.q.size(2) * prefix.q.size(3), batch * segment, false,
      {{&prefix.q, &main.q, out.q}, {&prefix.k, &main.k, out.k}, {&prefix.v, &main.v, out.v}});
  params.segment = segment;
  params.prefix = prefix.q.size(1);
  static detail::OpEntry entry("diffusion.varlen_pack_segmented_qkv");
  entry.get<detail::RowGatherEntry>(prefix.q.device())(params, stream);
}

}  // namespace dfuse
