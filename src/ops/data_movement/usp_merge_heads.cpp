// diffusion.usp_merge_heads — replaces `x.permute(2, 1, 0, 3, 4).contiguous()` (the head merge of
// Ulysses sequence parallelism, [W, S, B, h, D] -> [B, S, W, h, D]). Contract: bitwise identical by
// construction (common/strided_copy.h copies the permuted view of x into out).
#include "common/entries.h"
#include "common/guards.h"
#include "common/strided_copy.h"
#include "dfuse/ops/data_movement.h"
#include "ops/data_movement/copy_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "usp_merge_heads";

detail::GuardList check(const TensorView& x, const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_copy_input(g, "x", x, 5, x, "x");
  detail::check_copy_output(g, "out", out, {x.size(2), x.size(1), x.size(0), x.size(3), x.size(4)}, x, "x",
                            {{"x", &x}});
  return g;
}

// x viewed in out's dim order.
TensorView permuted(const TensorView& x) {
  const int64_t sizes[] = {x.size(2), x.size(1), x.size(0), x.size(3), x.size(4)};
  const int64_t strides[] = {x.stride(2), x.stride(1), x.stride(0), x.stride(3), x.stride(4)};
  return x.restrided(sizes, strides, 5);
}

DFUSE_REGISTER_ENTRY(host, "usp_merge_heads", &detail::strided_copy_host);

}  // namespace

bool can_use_usp_merge_heads(const TensorView& x, const TensorView& out, std::string* why) {
  return check(x, out).answer(why);
}

void usp_merge_heads(const TensorView& x, const TensorView& out, Stream stream) {
  check(x, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.usp_merge_heads");
  entry.get<detail::StridedCopyEntry>(x.device())(detail::strided_copy_params({{permuted(x), out}}), stream);
}

}  // namespace dfuse
