// diffusion.qkv_projection_into — replaces Qwen-Image's added Q/K/V projections and the joint
// concatenation: `q, k, v = add_q_proj(txt), add_k_proj(txt), add_v_proj(txt)` (three GEMMs) and
// later `torch.cat([txt_q, img_q], dim=1)` (and for k, v). One GEMM of the concatenated [3D, D]
// weight writes straight into the text rows of the joint [B, S_txt + S_img, 3D] QKV buffer (the
// image stream's projection likewise into its rows). Contract: close, tier extra-high (bound in
// dfuse/ops/gemm.h). Guards, dispatch; kernels are the family's (ops/gemm/linear.h).
#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/gemm.h"
#include "ops/gemm/linear.h"

namespace dfuse {

namespace {

detail::GuardList check(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out) {
  detail::GuardList g("qkv_projection_into");
  detail::check_linear(g, x, weight, bias, out);
  return g;
}

DFUSE_REGISTER_ENTRY(host, "qkv_projection_into", &detail::linear_host_entry);

}  // namespace

bool can_use_qkv_projection_into(const TensorView& x, const TensorView& weight, const TensorView* bias,
                                 const TensorView& out, std::string* why) {
  return check(x, weight, bias, out).answer(why);
}

void qkv_projection_into(const TensorView& x, const TensorView& weight, const TensorView* bias, const TensorView& out,
                         Stream stream) {
  check(x, weight, bias, out).throw_if_failed();
  if (out.numel() == 0) return;
  static detail::OpEntry entry("diffusion.qkv_projection_into");
  entry.get<detail::LinearEntry>(x.device())(
      detail::linear_params(x, weight, bias, out, detail::LinearEpilogue::bias), stream);
}

}  // namespace dfuse
