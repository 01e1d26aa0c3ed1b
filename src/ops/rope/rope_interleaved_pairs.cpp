// diffusion.rope_interleaved_pairs: guards, dispatch, and the host kernel.
#include "ops/rope/rope_interleaved_pairs.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/rope_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "rope_interleaved_pairs";

detail::GuardList check(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out) {
  detail::GuardList g(kOp);
  g.rank_between("x", x, 2, 4);
  detail::check_rowwise_input(g, "x", x);
  detail::check_rope_extent(g, "x", x);
  if (g.ok() && x.size(-1) % 2 != 0)
    g.fail("head_dim", "the head dim D = x.size(-1) must be even (pairs), got " + std::to_string(x.size(-1)));
  // The rotate-half table checks (dtype f32 or x's, shape, broadcast, strides) with R = D.
  detail::check_rotate_half_tables(g, "x", x, cos, sin, RopeMath::fp32_opmath);
  if (g.ok() && cos.size(-1) != x.size(-1))
    g.fail("shape", "cos " + detail::shape_str(cos) + " must have x's head dim " + std::to_string(x.size(-1)) +
                        " as its last dim (the pairs cover the whole head)");
  detail::check_rowwise_output(g, out, x, {{"x", &x, true}, {"cos", &cos, false}, {"sin", &sin, false}});
  return g;
}

detail::RopeInterleavedPairsParams params(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                          const TensorView& out) {
  detail::RopeInterleavedPairsParams p;
  p.dtype = x.dtype();
  p.table_dtype = cos.dtype();
  p.device = x.device().index;
  p.geom = detail::row_geometry(x);
  p.x = detail::row_operand(x, x);
  p.cos = detail::row_operand(cos, x);
  p.sin = detail::row_operand(sin, x);
  p.out = detail::row_operand(out, x);
  return p;
}

template <typename T, typename Table>
void host_rows(const detail::RopeInterleavedPairsParams& p) {
  using detail::Storage;
  const int64_t rows = p.geom.rows(), cols = p.geom.cols;
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
    const Table* c = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx);
    const Table* s = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx);
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    for (int64_t i = 0; i < cols; i += 2) {  // both values are read before either is written (in place)
      const auto r2 = detail::rope_interleaved_pair<T>(
          Storage<T>::load(x[i]), Storage<T>::load(x[i + 1]), Storage<Table>::load(c[i]),
          Storage<Table>::load(c[i + 1]), Storage<Table>::load(s[i]), Storage<Table>::load(s[i + 1]));
      out[i] = r2.even;
      out[i + 1] = r2.odd;
    }
  }
}

void host_entry(const detail::RopeInterleavedPairsParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.dtype, "rope_interleaved_pairs host kernel", [&](auto tag) {
    using T = decltype(tag);
    if (p.table_dtype == DType::f32) return host_rows<T, float>(p);
    return host_rows<T, T>(p);
  });
}

DFUSE_REGISTER_ENTRY(host, "rope_interleaved_pairs", &host_entry);

}  // namespace

bool can_use_rope_interleaved_pairs(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                    const TensorView& out, std::string* why) {
  return check(x, cos, sin, out).answer(why);
}

void rope_interleaved_pairs(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out,
                            Stream stream) {
  check(x, cos, sin, out).throw_if_failed();
  if (x.numel() == 0) return;
  static detail::OpEntry entry("diffusion.rope_interleaved_pairs");
  entry.get<detail::RopeInterleavedPairsEntry>(x.device())(params(x, cos, sin, out), stream);
}

}  // namespace dfuse
