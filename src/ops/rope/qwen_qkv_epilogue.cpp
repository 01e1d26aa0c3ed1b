// diffusion.qwen_qkv_epilogue: guards, parameters, and the host entry (the joint-QKV host kernel).
#include "ops/rope/qwen_qkv_epilogue.h"

#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/rope.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "qwen_qkv_epilogue";

detail::GuardList check(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& img_freqs,
                        const TensorView& txt_freqs, const TensorView& joint_q, const TensorView& joint_k,
                        const TensorView& joint_v) {
  detail::GuardList g(kOp);
  detail::check_joint_qkv(g, txt, "txt", img, "img", eps, joint_q, joint_k, joint_v, {&img_freqs, &txt_freqs});
  if (!g.ok()) return g;
  detail::check_joint_qkv_table(g, "img_freqs", img_freqs, img.q.size(1), img.q, "img");
  detail::check_joint_qkv_table(g, "txt_freqs", txt_freqs, txt.q.size(1), txt.q, "txt");
  return g;
}

DFUSE_REGISTER_ENTRY(host, "qwen_qkv_epilogue", &detail::joint_qkv_host);

}  // namespace

bool can_use_qwen_qkv_epilogue(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& img_freqs,
                               const TensorView& txt_freqs, const TensorView& joint_q, const TensorView& joint_k,
                               const TensorView& joint_v, std::string* why) {
  return check(img, txt, eps, img_freqs, txt_freqs, joint_q, joint_k, joint_v).answer(why);
}

void qwen_qkv_epilogue(const QkvStream& img, const QkvStream& txt, double eps, const TensorView& img_freqs,
                       const TensorView& txt_freqs, const TensorView& joint_q, const TensorView& joint_k,
                       const TensorView& joint_v, Stream stream) {
  check(img, txt, eps, img_freqs, txt_freqs, joint_q, joint_k, joint_v).throw_if_failed();
  // Joint order [txt, img] (torch.cat([txt_query, img_query], dim=1)).
  detail::JointQkvParams p = detail::joint_qkv_params(img, eps);
  const int64_t txt_tokens = txt.q.size(1);
  detail::add_joint_qkv_stream(p, txt, detail::PairRotation::complex_mul, &txt_freqs, nullptr, 0, joint_q, joint_k,
                               joint_v);
  detail::add_joint_qkv_stream(p, img, detail::PairRotation::complex_mul, &img_freqs, nullptr, txt_tokens, joint_q,
                               joint_k, joint_v);
  static detail::OpEntry entry("diffusion.qwen_qkv_epilogue");
  entry.get<detail::JointQkvEntry>(img.q.device())(p, stream);
}

}  // namespace dfuse
