// diffusion.gelu_tanh_cat: guards, dispatch, and the host kernel.
#include "ops/activation/gelu_tanh_cat.h"

#include <string>

#include "common/entries.h"
#include "common/guards.h"
#include "common/rowwise_guards.h"
#include "common/rowwise_host.h"
#include "dfuse/ops/activation.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "gelu_tanh_cat";

// attn as [B, S, Da]: its heads [B, S, H, D] merged as reshape(B, S, H * D) would order them.
int64_t attn_width(const TensorView& attn) { return attn.dim() == 4 ? attn.size(2) * attn.size(3) : attn.size(2); }

// out's columns [start, start + width) viewed with attn's shape.
TensorView attn_half(const TensorView& attn, const TensorView& out) {
  const TensorView half = out.narrow(2, 0, attn_width(attn));
  if (attn.dim() == 3) return half;
  const int64_t sizes[] = {attn.size(0), attn.size(1), attn.size(2), attn.size(3)};
  const int64_t strides[] = {half.stride(0), half.stride(1), attn.size(3), 1};
  return half.restrided(sizes, strides, 4);
}

detail::GuardList check(const TensorView& attn, const TensorView& mlp, const TensorView& out) {
  detail::GuardList g(kOp);
  detail::check_rowwise_input(g, "mlp", mlp);
  g.rank_between("mlp", mlp, 3, 3);
  g.dtype_in("attn", attn, {DType::bf16, DType::f16, DType::f32});
  g.same_dtype("attn", attn, mlp, "mlp");
  g.same_device("attn", attn, mlp, "mlp");
  g.rank_between("attn", attn, 3, 4);
  g.not_null("attn", attn);
  g.non_negative_strides("attn", attn);
  g.last_dim_contiguous("attn", attn);
  g.rank_between("out", out, 3, 3);
  if (!g.ok()) return g;
  if (attn.size(0) != mlp.size(0) || attn.size(1) != mlp.size(1))
    g.fail("shape", "attn " + detail::shape_str(attn) + " and mlp " + detail::shape_str(mlp) +
                        " must share their batch and token dims");
  const int64_t width = attn_width(attn) + mlp.size(2);
  if (g.ok() && (out.size(0) != mlp.size(0) || out.size(1) != mlp.size(1) || out.size(2) != width))
    g.fail("shape", "out must be [" + std::to_string(mlp.size(0)) + ", " + std::to_string(mlp.size(1)) + ", " +
                        std::to_string(width) + "], got " + detail::shape_str(out));
  g.same_dtype("out", out, mlp, "mlp");
  g.same_device("out", out, mlp, "mlp");
  if (g.ok() && !out.is_contiguous())
    g.fail("out_layout", "out must be contiguous, got strides " + detail::strides_str(out));
  g.no_partial_overlap("out", out, "attn", attn, false);
  g.no_partial_overlap("out", out, "mlp", mlp, false);
  return g;
}

void host_entry(const detail::StridedCopyParams& attn, const detail::RowwiseParams& gelu, Stream stream) {
  detail::strided_copy_host(attn, stream);
  detail::rowwise_host_entry<detail::GeluTanh>(gelu, stream);
}

DFUSE_REGISTER_ENTRY(host, "gelu_tanh_cat", &host_entry);

}  // namespace

bool can_use_gelu_tanh_cat(const TensorView& attn, const TensorView& mlp, const TensorView& out, std::string* why) {
  return check(attn, mlp, out).answer(why);
}

void gelu_tanh_cat(const TensorView& attn, const TensorView& mlp, const TensorView& out, Stream stream) {
  check(attn, mlp, out).throw_if_failed();
  const TensorView gelu_half = out.narrow(2, attn_width(attn), mlp.size(2));
  static detail::OpEntry entry("diffusion.gelu_tanh_cat");
  entry.get<detail::GeluTanhCatEntry>(mlp.device())(detail::strided_copy_params({{attn, attn_half(attn, out)}}),
                                                     detail::rowwise_params(mlp, {&mlp}, gelu_half), stream);
}

}  // namespace dfuse
