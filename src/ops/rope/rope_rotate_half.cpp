// diffusion.rope_rotate_half: guards, dispatch, and the host kernel.
#include "ops/rope/rope_rotate_half.h"

#include <cstring>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "dfuse/ops/rope.h"
#include "ops/rope/rope_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "rope_rotate_half";

detail::GuardList check(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out,
                        RopeMath math) {
  detail::GuardList g(kOp);
  g.rank_between("x", x, 2, 4);
  detail::check_rowwise_input(g, "x", x);
  detail::check_rope_extent(g, "x", x);
  detail::check_rotate_half_tables(g, "x", x, cos, sin, math);
  detail::check_rowwise_output(g, out, x, {{"x", &x, true}, {"cos", &cos, false}, {"sin", &sin, false}});
  return g;
}

detail::RopeRotateHalfParams params(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                    const TensorView& out, RopeMath math) {
  detail::RopeRotateHalfParams p;
  p.dtype = x.dtype();
  p.table_dtype = cos.dtype();
  p.math = math;
  p.device = x.device().index;
  p.geom = detail::row_geometry(x);
  p.rot_dim = cos.size(-1);
  const TensorView x_rot = x.narrow(-1, 0, p.rot_dim);
  p.x = detail::row_operand(x, x);
  p.cos = detail::row_operand(cos, x_rot);
  p.sin = detail::row_operand(sin, x_rot);
  p.out = detail::row_operand(out, x);
  return p;
}

template <typename T, typename Table, RopeMath M>
void host_rows(const detail::RopeRotateHalfParams& p) {
  using detail::Storage;
  const int64_t rows = p.geom.rows(), cols = p.geom.cols, half = p.rot_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t idx[3];
    p.geom.split(uint32_t(r), idx);
    const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
    const Table* c = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx);
    const Table* s = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx);
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    for (int64_t i = 0; i < half; ++i) {  // both values are read before either is written (in place)
      const float x1 = Storage<T>::load(x[i]), x2 = Storage<T>::load(x[i + half]);
      const T lo = detail::rotate_half_element<T, M>(x1, -x2, Storage<Table>::load(c[i]), Storage<Table>::load(s[i]));
      const T hi = detail::rotate_half_element<T, M>(x2, x1, Storage<Table>::load(c[i + half]),
                                                     Storage<Table>::load(s[i + half]));
      out[i] = lo;
      out[i + half] = hi;
    }
    if (out != x) std::memcpy(out + p.rot_dim, x + p.rot_dim, size_t(cols - p.rot_dim) * sizeof(T));
  }
}

void host_entry(const detail::RopeRotateHalfParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.dtype, "rope_rotate_half host kernel", [&](auto tag) {
    using T = decltype(tag);
    if (p.math == RopeMath::storage_dtype) return host_rows<T, T, RopeMath::storage_dtype>(p);
    if (p.table_dtype == DType::f32) return host_rows<T, float, RopeMath::fp32_opmath>(p);
    return host_rows<T, T, RopeMath::fp32_opmath>(p);
  });
}

DFUSE_REGISTER_ENTRY(host, "rope_rotate_half", &host_entry);

}  // namespace

bool can_use_rope_rotate_half(const TensorView& x, const TensorView& cos, const TensorView& sin,
                              const TensorView& out, RopeMath math, std::string* why) {
  return check(x, cos, sin, out, math).answer(why);
}

void rope_rotate_half(const TensorView& x, const TensorView& cos, const TensorView& sin, const TensorView& out,
                      RopeMath math, Stream stream) {
  check(x, cos, sin, out, math).throw_if_failed();
  if (x.numel() == 0) return;
  static detail::OpEntry entry("diffusion.rope_rotate_half");
  entry.get<detail::RopeRotateHalfEntry>(x.device())(params(x, cos, sin, out, math), stream);
}

}  // namespace dfuse
