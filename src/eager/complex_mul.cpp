// Eager replica of aten's complex64 multiply: the entry point and the host loop.
#include "eager/complex_mul.h"

#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/eager/rope.h"

namespace dfuse::eager {

namespace {

void host_complex_mul(const detail::ComplexMulParams& p, Stream) {
  const int64_t n = p.layout.numel();
  for (int64_t i = 0; i < n; ++i) {
    int64_t off[3];
    p.layout.offsets(i, off);
    detail::complex_mul_apply(p, off);
  }
}
DFUSE_REGISTER_ENTRY(host, "eager.complex_mul", &host_complex_mul);

// The complex elements of t ([..., 2] floats): t without its last dim.
TensorView complex_elements(const TensorView& t) {
  return TensorView(t.data(), DType::f32, t.sizes(), t.strides(), t.dim() - 1, t.device());
}

}  // namespace

void complex_mul(const TensorView& a, const TensorView& b, const TensorView& out, Stream stream) {
  dfuse::detail::GuardList g("eager.complex_mul");
  for (const auto& [name, t] : {std::pair{"a", &a}, std::pair{"b", &b}, std::pair{"out", &out}}) {
    g.dtype_in(name, *t, {DType::f32});
    g.same_device(name, *t, a, "a");
    g.rank_between(name, *t, 2, TensorView::kMaxDims);
    if (g.ok() && (t->size(-1) != 2 || t->stride(-1) != 1))
      g.fail("layout", std::string(name) + " must be a view_as_real [..., 2] with unit last stride, got " +
                           dfuse::detail::shape_str(*t));
  }
  g.throw_if_failed();
  detail::ComplexMulParams p;
  p.device = a.device().index;
  const TensorView out_c = complex_elements(out), a_c = complex_elements(a), b_c = complex_elements(b);
  p.layout = detail::make_layout(out_c, a_c, &b_c);
  p.out = static_cast<float*>(out.data());
  p.a = static_cast<const float*>(a.data());
  p.b = static_cast<const float*>(b.data());
  if (p.layout.numel() == 0) return;
  auto entry = reinterpret_cast<detail::ComplexMulEntry>(
      dfuse::detail::find_entry(dfuse::detail::backend_for(a.device()), "eager.complex_mul"));
  entry(p, stream);
}

}  // namespace dfuse::eager
