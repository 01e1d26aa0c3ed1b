// diffusion.joint_qkv_cat — replaces `torch.cat([img, txt], dim=1)` for each of q, k and v (Joy
// Image Edit's joint attention; three cat kernels) with one launch. Contract: bitwise identical by
// construction (common/strided_copy.h copies each input into its token range of the output).
#include "common/entries.h"
#include "common/guards.h"
#include "common/strided_copy.h"
#include "dfuse/ops/data_movement.h"
#include "ops/data_movement/copy_guards.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "joint_qkv_cat";

detail::GuardList check(const QkvViews& img, const QkvViews& txt, const QkvViews& out) {
  detail::GuardList g(kOp);
  const TensorView& ref = img.q;
  detail::check_copy_input(g, "img.q", img.q, 4, ref, "img.q");
  detail::check_copy_input(g, "img.k", img.k, 4, ref, "img.q");
  detail::check_copy_input(g, "img.v", img.v, 4, ref, "img.q");
  detail::check_copy_input(g, "txt.q", txt.q, 4, ref, "img.q");
  detail::check_copy_input(g, "txt.k", txt.k, 4, ref, "img.q");
  detail::check_copy_input(g, "txt.v", txt.v, 4, ref, "img.q");
  g.same_shape("img.k", img.k, img.q, "img.q");
  g.same_shape("img.v", img.v, img.q, "img.q");
  g.same_shape("txt.k", txt.k, txt.q, "txt.q");
  g.same_shape("txt.v", txt.v, txt.q, "txt.q");
  if (txt.q.size(0) != ref.size(0) || txt.q.size(2) != ref.size(2) || txt.q.size(3) != ref.size(3))
    g.fail("shape", "txt.q " + detail::shape_str(txt.q) + " must match img.q " + detail::shape_str(ref) +
                        " in every dim but 1");
  const std::vector<int64_t> sizes = {ref.size(0), ref.size(1) + txt.q.size(1), ref.size(2), ref.size(3)};
  const std::initializer_list<detail::NamedView> inputs = {{"img.q", &img.q}, {"img.k", &img.k},
                                                           {"img.v", &img.v}, {"txt.q", &txt.q},
                                                           {"txt.k", &txt.k}, {"txt.v", &txt.v}};
  detail::check_qkv_outputs(g, out, sizes, ref, "img.q", inputs);
  return g;
}

DFUSE_REGISTER_ENTRY(host, "joint_qkv_cat", &detail::strided_copy_host);

}  // namespace

bool can_use_joint_qkv_cat(const QkvViews& img, const QkvViews& txt, const QkvViews& out, std::string* why) {
  return check(img, txt, out).answer(why);
}

void joint_qkv_cat(const QkvViews& img, const QkvViews& txt, const QkvViews& out, Stream stream) {
  check(img, txt, out).throw_if_failed();
  const int64_t si = img.q.size(1), st = txt.q.size(1);
  const TensorView image_q = out.q.narrow(1, 0, si), image_k = out.k.narrow(1, 0, si),
                   image_v = out.v.narrow(1, 0, si);
  const TensorView text_q = out.q.narrow(1, si, st), text_k = out.k.narrow(1, si, st),
                   text_v = out.v.narrow(1, si, st);
  static detail::OpEntry entry("diffusion.joint_qkv_cat");
  entry.get<detail::StridedCopyEntry>(img.q.device())(
      detail::strided_copy_params({{img.q, image_q}, {img.k, image_k}, {img.v, image_v},
                                   {txt.q, text_q}, {txt.k, text_k}, {txt.v, text_v}}),
      stream);
}

}  // namespace dfuse
