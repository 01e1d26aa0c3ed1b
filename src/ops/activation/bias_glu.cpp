// diffusion.bias_glu: guards, dispatch, and the host kernel. h and g are the two halves of x's
// last dim, seen as two row-wise operands (and likewise the bias), so no chunk is copied.
#include "ops/activation/bias_glu.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "common/rowwise_host.h"
#include "dfuse/ops/activation.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "bias_glu";

// Chunk `k` of 2 of t's last dim: k = 0 is the first half (h), 1 the second (g).
TensorView half(const TensorView& t, int k) {
  const int64_t c = t.size(-1) / 2;
  return t.narrow(-1, k * c, c);
}

detail::GuardList check(const TensorView& x, const TensorView* bias, const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_rowwise_input(g, "x", x);
  if (g.ok() && x.size(-1) % 2 != 0)
    g.fail("chunk",
           "x's last dim must be even (2C channels chunked into h and g), got " + detail::shape_str(x));
  if (bias) {
    detail::check_rowwise_operand(g, "bias", *bias, x);
    if (g.ok() && (bias->dim() == 0 || bias->size(-1) != x.size(-1)))
      g.fail("bias_channels", "bias must have x's " + std::to_string(x.size(-1)) +
                                  " channels in its last dim, got " + detail::shape_str(*bias));
  }
  if (!g.ok()) return g;
  const TensorView h = half(x, 0);
  if (bias)
    detail::check_rowwise_output(g, out, h, {{"x", &x, false}, {"bias", bias, false}}, "x[..., :C]");
  else
    detail::check_rowwise_output(g, out, h, {{"x", &x, false}}, "x[..., :C]");
  return g;
}

void host_kernel(const detail::RowwiseParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.dtype, kOp, [&](auto tag) {
    using T = decltype(tag);
    if (p.in[2].data)
      detail::rowwise_host<T>(p, detail::BiasGlu<T>{});
    else
      detail::rowwise_host<T>(p, detail::Glu<T>{});
  });
}
DFUSE_REGISTER_ENTRY(host, "bias_glu", &host_kernel);

}  // namespace

bool can_use_bias_glu(const TensorView& x, const TensorView* bias, const TensorView& out, std::string* why) {
  return check(x, bias, out).answer(why);
}

void bias_glu(const TensorView& x, const TensorView* bias, const TensorView& out, Stream stream) {
  check(x, bias, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.bias_glu");
  const TensorView h = half(x, 0), g = half(x, 1);
  detail::RowwiseParams p;
  if (bias) {
    const TensorView bias_h = half(*bias, 0), bias_g = half(*bias, 1);
    p = detail::rowwise_params(h, {&h, &g, &bias_h, &bias_g}, out);
  } else {
    p = detail::rowwise_params(h, {&h, &g}, out);
  }
  entry.get<detail::BiasGluEntry>(x.device())(p, stream);
}

}  // namespace dfuse
