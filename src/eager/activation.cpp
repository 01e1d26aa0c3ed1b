// Eager activation replicas: the public entry point and the host loop.
#include "dfuse/eager/activation.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "eager/elementwise.h"

namespace dfuse::eager {

namespace {

template <typename T>
void host_activation_typed(const detail::ActivationParams& p) {
  using S = dfuse::detail::Storage<T>;
  const int64_t n = p.layout.numel();
  auto* out = static_cast<T*>(p.out);
  const auto* x = static_cast<const T*>(p.x);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off[3];
    p.layout.offsets(i, off);
    out[off[0]] = S::store(detail::activation_apply(p.op, S::load(x[off[1]])));
  }
}

void host_activation(const detail::ActivationParams& p, Stream) {
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.activation",
                                       [&](auto tag) { host_activation_typed<decltype(tag)>(p); });
}
DFUSE_REGISTER_ENTRY(host, "eager.activation", &host_activation);

}  // namespace

void activation(ActivationOp op, const TensorView& x, const TensorView& out, Stream stream) {
  dfuse::detail::GuardList g("eager.activation");
  g.dtype_in("x", x, {DType::bf16, DType::f16, DType::f32});
  g.same_dtype("out", out, x, "x");
  g.same_device("out", out, x, "x");
  g.throw_if_failed();
  detail::ActivationParams p;
  p.op = op;
  p.dtype = x.dtype();
  p.layout = detail::make_layout(out, x, nullptr);
  p.out = out.data();
  p.x = x.data();
  auto entry = reinterpret_cast<detail::ActivationEntry>(
      dfuse::detail::find_entry(dfuse::detail::backend_for(x.device()), "eager.activation"));
  entry(p, stream);
}

}  // namespace dfuse::eager
