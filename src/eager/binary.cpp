// Eager binary replicas: layout building, the public entry points and the host loop.
#include "dfuse/eager/binary.h"

#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/core/error.h"
#include "eager/elementwise.h"

namespace dfuse::eager {
namespace detail {

ElementwiseLayout make_layout(const TensorView& out, const TensorView& a, const TensorView* b) {
  ElementwiseLayout l;
  const int nd = out.dim();
  const TensorView* ops[3] = {&out, &a, b};
  int64_t sizes[TensorView::kMaxDims], strides[3][TensorView::kMaxDims] = {};
  for (int d = 0; d < nd; ++d) sizes[d] = out.size(d);
  for (int k = 0; k < 3; ++k) {
    const TensorView* t = ops[k];
    if (!t) continue;
    if (t->dim() > nd)
      throw InvalidArgument("eager: operand " + dfuse::detail::shape_str(*t) + " does not broadcast to " +
                            dfuse::detail::shape_str(out));
    const int lead = nd - t->dim();
    for (int d = 0; d < t->dim(); ++d) {
      const int64_t s = t->size(d);
      if (s != sizes[d + lead] && s != 1)
        throw InvalidArgument("eager: operand " + dfuse::detail::shape_str(*t) + " does not broadcast to " +
                              dfuse::detail::shape_str(out));
      strides[k][d + lead] = s == 1 ? 0 : t->stride(d);
    }
  }
  // Merge dim d into the previous kept dim when every operand steps through both as one.
  for (int d = 0; d < nd; ++d) {
    if (sizes[d] == 1) continue;
    if (l.ndim > 0) {
      const int p = l.ndim - 1;
      bool mergeable = true;
      for (int k = 0; k < 3; ++k) mergeable = mergeable && l.strides[k][p] == strides[k][d] * sizes[d];
      if (mergeable) {
        l.sizes[p] *= sizes[d];
        for (int k = 0; k < 3; ++k) l.strides[k][p] = strides[k][d];
        continue;
      }
    }
    l.sizes[l.ndim] = sizes[d];
    for (int k = 0; k < 3; ++k) l.strides[k][l.ndim] = strides[k][d];
    ++l.ndim;
  }
  if (out.numel() == 0) {  // keep the element count at zero
    l.ndim = 1;
    l.sizes[0] = 0;
  }
  return l;
}

}  // namespace detail

namespace {

template <typename T>
void host_binary_typed(const detail::BinaryParams& p) {
  using S = dfuse::detail::Storage<T>;
  const int64_t n = p.layout.numel();
  auto* out = static_cast<T*>(p.out);
  const auto* a = static_cast<const T*>(p.a);
  const auto* b = static_cast<const T*>(p.b);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off[3];
    p.layout.offsets(i, off);
    const float av = S::load(a[off[1]]);
    const float bv = b ? S::load(b[off[2]]) : p.scalar;
    const float r = p.scalar_first ? detail::binary_apply(p.op, bv, av, p.alpha)
                                   : detail::binary_apply(p.op, av, bv, p.alpha);
    out[off[0]] = S::store(r);
  }
}

void host_binary(const detail::BinaryParams& p, Stream) {
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.binary",
                                       [&](auto tag) { host_binary_typed<decltype(tag)>(p); });
}
DFUSE_REGISTER_ENTRY(host, "eager.binary", &host_binary);

void check_operands(const TensorView& a, const TensorView* b, const TensorView& out) {
  dfuse::detail::GuardList g("eager.binary");
  g.dtype_in("a", a, {DType::bf16, DType::f16, DType::f32});
  if (b) {
    g.same_dtype("b", *b, a, "a");
    g.same_device("b", *b, a, "a");
  }
  g.same_dtype("out", out, a, "a");
  g.same_device("out", out, a, "a");
  g.throw_if_failed();
}

void run(const detail::BinaryParams& p, Device d, Stream s) {
  auto entry = reinterpret_cast<detail::BinaryEntry>(
      dfuse::detail::find_entry(dfuse::detail::backend_for(d), "eager.binary"));
  entry(p, s);
}

}  // namespace

void binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out, double alpha,
            Stream stream) {
  check_operands(a, &b, out);
  detail::BinaryParams p;
  p.op = op;
  p.dtype = a.dtype();
  p.layout = detail::make_layout(out, a, &b);
  p.out = out.data();
  p.a = a.data();
  p.b = b.data();
  p.alpha = float(alpha);
  run(p, a.device(), stream);
}

void binary_scalar(BinaryOp op, const TensorView& a, double s, const TensorView& out, Stream stream) {
  check_operands(a, nullptr, out);
  detail::BinaryParams p;
  p.dtype = a.dtype();
  p.layout = detail::make_layout(out, a, nullptr);
  p.out = out.data();
  p.a = a.data();
  if (op == BinaryOp::div) {
    // aten computes a / s as a * reciprocal, the reciprocal taken in double then rounded.
    p.op = BinaryOp::mul;
    p.scalar = float(1.0 / s);
  } else {
    p.op = op;
    p.scalar = float(s);
  }
  run(p, a.device(), stream);
}

void scalar_binary(BinaryOp op, double s, const TensorView& a, const TensorView& out, Stream stream) {
  if (op == BinaryOp::div) throw InvalidArgument("eager.scalar_binary: scalar / tensor is not replicated");
  check_operands(a, nullptr, out);
  detail::BinaryParams p;
  p.op = op;
  p.dtype = a.dtype();
  p.layout = detail::make_layout(out, a, nullptr);
  p.out = out.data();
  p.a = a.data();
  p.scalar = float(s);
  p.scalar_first = true;
  run(p, a.device(), stream);
}

}  // namespace dfuse::eager
