// diffusion.varlen_scatter_to_padded — replaces `torch.zeros(B * S, H, D).index_copy_(0, indices,
// x)` (the unpack of varlen masked attention back to the padded layout; a fill and a scatter)
// with one gather by the inverse index. Contract: bitwise identical by construction
// (common/row_gather.h copies whole rows; padding rows are +0.0 bits).
#include "common/entries.h"
#include "common/guards.h"
#include "common/row_gather.h"
#include "dfuse/ops/data_movement.h"
#include "ops/data_movement/copy_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "varlen_scatter_to_padded";

detail::GuardList check(const TensorView& x, const TensorView& inv_indices, const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_contiguous_input(g, "x", x, 3, x, "x");
  g.rank_between("out", out, 4, 4);
  if (!g.ok()) return g;
  detail::check_indices(g, "inv_indices", inv_indices, out.size(0) * out.size(1), x, "x");
  detail::check_copy_output(g, "out", out, {out.size(0), out.size(1), x.size(1), x.size(2)}, x, "x",
                            {{"x", &x}, {"inv_indices", &inv_indices}});
  return g;
}

DFUSE_REGISTER_ENTRY(host, "varlen_scatter_to_padded", &detail::row_gather_host);

}  // namespace

bool can_use_varlen_scatter_to_padded(const TensorView& x, const TensorView& inv_indices, const TensorView& out,
                                      std::string* why) {
  return check(x, inv_indices, out).answer(why);
}

void varlen_scatter_to_padded(const TensorView& x, const TensorView& inv_indices, const TensorView& out,
                              Stream stream) {
  check(x, inv_indices, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.varlen_scatter_to_padded");
  entry.get<detail::RowGatherEntry>(x.device())(
      detail::row_gather_params(inv_indices, x.size(1) * x.size(2), x.size(0), true, {{&x, nullptr, out}}),
      stream);
}

}  // namespace dfuse
