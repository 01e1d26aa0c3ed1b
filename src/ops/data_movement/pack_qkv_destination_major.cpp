// diffusion.pack_qkv_destination_major — replaces the per-destination head shards of q, k and v
// that Ulysses sequence parallelism builds before its all-to-all (per rank w: cat of
// q[:, wL:(w+1)L], k[...], v[...] along the head dim, stacked over w). Contract: bitwise identical
// by construction (common/strided_copy.h copies q, k and v into their slots of out).
#include "common/entries.h"
#include "common/guards.h"
#include "common/strided_copy.h"
#include "dfuse/ops/data_movement.h"
#include "ops/data_movement/copy_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "pack_qkv_destination_major";

detail::GuardList check(const TensorView& q, const TensorView& k, const TensorView& v,
                        const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_copy_input(g, "q", q, 3, q, "q");
  detail::check_copy_input(g, "k", k, 3, q, "q");
  detail::check_copy_input(g, "v", v, 3, q, "q");
  g.same_shape("k", k, q, "q");
  g.same_shape("v", v, q, "q");
  g.rank_between("out", out, 4, 4);
  const int64_t world = out.size(0), heads = q.size(1);
  if (g.ok() && (world < 1 || heads % world != 0))
    g.fail("world", "out.size(0) = " + std::to_string(world) + " ranks must divide q's " +
                        std::to_string(heads) + " heads");
  if (!g.ok()) return g;
  detail::check_copy_output(g, "out", out, {world, q.size(0), heads / world, 3 * q.size(2)}, q, "q",
                            {{"q", &q}, {"k", &k}, {"v", &v}});
  return g;
}

// t [rows, G, hs] viewed as [rows, W, L, hs].
TensorView by_destination(const TensorView& t, int64_t world) {
  const int64_t local = t.size(1) / world;
  const int64_t sizes[] = {t.size(0), world, local, t.size(2)};
  const int64_t strides[] = {t.stride(0), local * t.stride(1), t.stride(1), t.stride(2)};
  return t.restrided(sizes, strides, 4);
}

// Slot `slot` (0 q, 1 k, 2 v) of out [W, rows, L, 3hs], viewed as [rows, W, L, hs].
TensorView slot_of(const TensorView& out, int slot, int64_t head_size) {
  const TensorView s = out.narrow(3, slot * head_size, head_size);
  const int64_t sizes[] = {s.size(1), s.size(0), s.size(2), s.size(3)};
  const int64_t strides[] = {s.stride(1), s.stride(0), s.stride(2), s.stride(3)};
  return s.restrided(sizes, strides, 4);
}

DFUSE_REGISTER_ENTRY(host, "pack_qkv_destination_major", &detail::strided_copy_host);

}  // namespace

bool can_use_pack_qkv_destination_major(const TensorView& q, const TensorView& k, const TensorView& v,
                                        const TensorView& out, std::string* why) {
  return check(q, k, v, out).answer(why);
}

void pack_qkv_destination_major(const TensorView& q, const TensorView& k, const TensorView& v,
                                const TensorView& out, Stream stream) {
  check(q, k, v, out).throw_if_failed();
  const int64_t world = out.size(0), head_size = q.size(2);
  static detail::OpEntry entry("diffusion.pack_qkv_destination_major");
  entry.get<detail::StridedCopyEntry>(q.device())(
      detail::strided_copy_params({{by_destination(q, world), slot_of(out, 0, head_size)},
                                   {by_destination(k, world), slot_of(out, 1, head_size)},
                                   {by_destination(v, world), slot_of(out, 2, head_size)}}),
      stream);
}

}  // namespace dfuse
