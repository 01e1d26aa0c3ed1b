// torch.ops.dfuse, data-movement family (a fragment of the library torch_ops.cpp defines):
//   usp_merge_heads(x)                               x.permute(2, 1, 0, 3, 4).contiguous()
//   joint_qkv_cat(img_q, img_k, img_v, txt_q, txt_k, txt_v)
//                                                    torch.cat([img_*, txt_*], dim=1) for q, k, v
//   pack_qkv_destination_major(q, k, v, world)       torch.stack([torch.cat([q[:, wL:(w+1)L],
//                                                    k[...], v[...]], dim=-1) for w in range(world)])
// These ops copy values and compute none, so the kernels are bitwise identical to the chains by
// construction: they run without the first-sight Gate. Inputs the kernels do not accept
// (dfuse::can_use_<op>) run the aten chain, which also raises the chain's own errors.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <tuple>
#include <vector>

#include "dfuse/core/error.h"
#include "dfuse/ops/data_movement.h"
#include "tensor_views.h"

namespace {

using dfuse::TensorView;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_kernel;
using dfuse::torch_binding::stream_of;
using dfuse::torch_binding::view_of;

// Input views, or nullopt when any tensor has no TensorView.
std::optional<std::vector<TensorView>> input_views(std::initializer_list<const at::Tensor*> tensors) {
  std::vector<TensorView> views;
  for (const at::Tensor* t : tensors) {
    auto v = input_view(*t);
    if (!v) return std::nullopt;
    views.push_back(*v);
  }
  return views;
}

// ---- usp_merge_heads -------------------------------------------------------------------------

// A custom op must return fresh memory: contiguous() would hand back x itself when the permuted
// view happens to be contiguous already.
at::Tensor usp_merge_heads_chain(const at::Tensor& x) {
  const at::Tensor permuted = x.permute({2, 1, 0, 3, 4});
  return permuted.is_contiguous() ? permuted.clone() : permuted.contiguous();
}

at::Tensor usp_merge_heads(const at::Tensor& x) {
  const auto in = input_views({&x});
  if (!in || x.dim() != 5) return usp_merge_heads_chain(x);
  const c10::OptionalDeviceGuard device_guard(x.device());
  at::Tensor out = at::empty({x.size(2), x.size(1), x.size(0), x.size(3), x.size(4)}, x.options());
  const TensorView out_view = *view_of(out, out.data_ptr());
  if (!dfuse::can_use_usp_merge_heads((*in)[0], out_view)) return usp_merge_heads_chain(x);
  run_kernel("usp_merge_heads", [&] { dfuse::usp_merge_heads((*in)[0], out_view, stream_of(x)); });
  return out;
}

at::Tensor usp_merge_heads_meta(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 5, "usp_merge_heads: x must be [W, S, B, h, D]");
  const auto s = x.sym_sizes();
  return at::empty_symint({s[2], s[1], s[0], s[3], s[4]}, x.options());
}

// ---- joint_qkv_cat ---------------------------------------------------------------------------

using Qkv = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Qkv joint_qkv_cat_chain(const at::Tensor& img_q, const at::Tensor& img_k, const at::Tensor& img_v,
                        const at::Tensor& txt_q, const at::Tensor& txt_k, const at::Tensor& txt_v) {
  return {at::cat({img_q, txt_q}, 1), at::cat({img_k, txt_k}, 1), at::cat({img_v, txt_v}, 1)};
}

Qkv joint_qkv_cat(const at::Tensor& img_q, const at::Tensor& img_k, const at::Tensor& img_v,
                  const at::Tensor& txt_q, const at::Tensor& txt_k, const at::Tensor& txt_v) {
  const auto in = input_views({&img_q, &img_k, &img_v, &txt_q, &txt_k, &txt_v});
  if (!in || img_q.dim() != 4 || txt_q.dim() != 4)
    return joint_qkv_cat_chain(img_q, img_k, img_v, txt_q, txt_k, txt_v);
  const c10::OptionalDeviceGuard device_guard(img_q.device());
  const std::vector<int64_t> sizes = {img_q.size(0), img_q.size(1) + txt_q.size(1), img_q.size(2),
                                      img_q.size(3)};
  const auto options = img_q.options();
  Qkv out = {at::empty(sizes, options), at::empty(sizes, options), at::empty(sizes, options)};
  auto& [q, k, v] = out;
  const dfuse::QkvViews img{(*in)[0], (*in)[1], (*in)[2]}, txt{(*in)[3], (*in)[4], (*in)[5]};
  const dfuse::QkvViews out_views{*view_of(q, q.data_ptr()), *view_of(k, k.data_ptr()),
                                  *view_of(v, v.data_ptr())};
  if (!dfuse::can_use_joint_qkv_cat(img, txt, out_views))
    return joint_qkv_cat_chain(img_q, img_k, img_v, txt_q, txt_k, txt_v);
  run_kernel("joint_qkv_cat", [&] { dfuse::joint_qkv_cat(img, txt, out_views, stream_of(img_q)); });
  return out;
}

Qkv joint_qkv_cat_meta(const at::Tensor& img_q, const at::Tensor& img_k, const at::Tensor& img_v,
                       const at::Tensor& txt_q, const at::Tensor& txt_k, const at::Tensor& txt_v) {
  const auto cat_meta = [](const at::Tensor& img, const at::Tensor& txt) {
    TORCH_CHECK(img.dim() == 4 && txt.dim() == 4, "joint_qkv_cat: inputs must be [B, S, H, D]");
    std::vector<c10::SymInt> sizes(img.sym_sizes().begin(), img.sym_sizes().end());
    sizes[1] = sizes[1] + txt.sym_size(1);
    return at::empty_symint(sizes, img.options().dtype(at::result_type(img, txt)));
  };
  return {cat_meta(img_q, txt_q), cat_meta(img_k, txt_k), cat_meta(img_v, txt_v)};
}

// ---- pack_qkv_destination_major --------------------------------------------------------------

at::Tensor pack_qkv_chain(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t world) {
  TORCH_CHECK(q.dim() == 3 && world > 0 && q.size(1) % world == 0,
              "pack_qkv_destination_major: q must be [rows, G, hs] with G divisible by world = ", world);
  const int64_t local = q.size(1) / world;
  std::vector<at::Tensor> shards;
  for (int64_t w = 0; w < world; ++w)
    shards.push_back(at::cat({q.narrow(1, w * local, local), k.narrow(1, w * local, local),
                              v.narrow(1, w * local, local)},
                             -1));
  return at::stack(shards);
}

at::Tensor pack_qkv_destination_major(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      int64_t world) {
  const auto in = input_views({&q, &k, &v});
  if (!in || q.dim() != 3 || world < 1 || q.size(1) % world != 0) return pack_qkv_chain(q, k, v, world);
  const c10::OptionalDeviceGuard device_guard(q.device());
  at::Tensor out = at::empty({world, q.size(0), q.size(1) / world, 3 * q.size(2)}, q.options());
  const TensorView out_view = *view_of(out, out.data_ptr());
  if (!dfuse::can_use_pack_qkv_destination_major((*in)[0], (*in)[1], (*in)[2], out_view))
    return pack_qkv_chain(q, k, v, world);
  run_kernel("pack_qkv_destination_major", [&] {
    dfuse::pack_qkv_destination_major((*in)[0], (*in)[1], (*in)[2], out_view, stream_of(q));
  });
  return out;
}

at::Tensor pack_qkv_destination_major_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           int64_t world) {
  TORCH_CHECK(q.dim() == 3 && world > 0, "pack_qkv_destination_major: q must be [rows, G, hs], world > 0");
  const auto dtype = at::promote_types(at::promote_types(q.scalar_type(), k.scalar_type()), v.scalar_type());
  return at::empty_symint({c10::SymInt(world), q.sym_size(0), q.sym_size(1) / world, q.sym_size(2) * 3},
                          q.options().dtype(dtype));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("usp_merge_heads(Tensor x) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("joint_qkv_cat(Tensor img_q, Tensor img_k, Tensor img_v, "
        "Tensor txt_q, Tensor txt_k, Tensor txt_v) -> (Tensor, Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("pack_qkv_destination_major(Tensor q, Tensor k, Tensor v, int world) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) {
  m.impl("usp_merge_heads", &usp_merge_heads);
  m.impl("joint_qkv_cat", &joint_qkv_cat);
  m.impl("pack_qkv_destination_major", &pack_qkv_destination_major);
}

TORCH_LIBRARY_IMPL(dfuse, CPU, m) {
  m.impl("usp_merge_heads", &usp_merge_heads);
  m.impl("joint_qkv_cat", &joint_qkv_cat);
  m.impl("pack_qkv_destination_major", &pack_qkv_destination_major);
}

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("usp_merge_heads", &usp_merge_heads_meta);
  m.impl("joint_qkv_cat", &joint_qkv_cat_meta);
  m.impl("pack_qkv_destination_major", &pack_qkv_destination_major_meta);
}
