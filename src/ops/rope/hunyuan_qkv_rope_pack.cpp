// diffusion.hunyuan_qkv_rope_pack: guards, parameters, and the host entry (the joint-QKV host kernel).
#include "ops/rope/hunyuan_qkv_rope_pack.h"

#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/rope.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "hunyuan_qkv_rope_pack";

detail::GuardList check(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& cos,
                        const TensorView& sin, const TensorView& joint_q, const TensorView& joint_k,
                        const TensorView& joint_v) {
  detail::GuardList g(kOp);
  detail::check_joint_qkv(g, img, "img", txt, "txt", eps, joint_q, joint_k, joint_v, {&cos, &sin});
  if (!g.ok()) return g;
  detail::check_joint_qkv_table(g, "cos", cos, img.q.size(1), img.q, "img");
  detail::check_joint_qkv_table(g, "sin", sin, img.q.size(1), img.q, "img");
  return g;
}

DFUSE_REGISTER_ENTRY(host, "hunyuan_qkv_rope_pack", &detail::joint_qkv_host);

}  // namespace

bool can_use_hunyuan_qkv_rope_pack(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& cos,
                                   const TensorView& sin, const TensorView& joint_q, const TensorView& joint_k,
                                   const TensorView& joint_v, std::string* why) {
  return check(img, txt, eps, cos, sin, joint_q, joint_k, joint_v).answer(why);
}

void hunyuan_qkv_rope_pack(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& cos,
                           const TensorView& sin, const TensorView& joint_q, const TensorView& joint_k,
                           const TensorView& joint_v, Stream stream) {
  check(img, txt, eps, cos, sin, joint_q, joint_k, joint_v).throw_if_failed();
  // Joint order [img, txt] (torch.cat([query, encoder_query], dim=1)); text heads are not rotated.
  detail::JointQkvParams p = detail::joint_qkv_params(img, eps);
  detail::add_joint_qkv_stream(p, img, detail::PairRotation::real_pairs, &cos, &sin, 0, joint_q, joint_k, joint_v);
  detail::add_joint_qkv_stream(p, txt, detail::PairRotation::none, nullptr, nullptr, img.q.size(1), joint_q, joint_k,
                               joint_v);
  static detail::OpEntry entry("diffusion.hunyuan_qkv_rope_pack");
  entry.get<detail::JointQkvEntry>(img.q.device())(p, stream);
}

}  // namespace dfuse
