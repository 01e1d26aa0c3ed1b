// torch.ops.dfuse, data-movement family (a fragment of the library torch_ops.cpp defines):
//   usp_merge_heads(x)                               x.permute(2, 1, 0, 3, 4).contiguous()
//   joint_qkv_cat(img_q, img_k, img_v, txt_q, txt_k, txt_v)
//                                                    torch.cat([img_*, txt_*], dim=1) for q, k, v
//   pack_qkv_destination_major(q, k, v, world)       torch.stack([torch.cat([q[:, wL:(w+1)L],
//                                                    k[...], v[...]], dim=-1) for w in range(world)])
//   varlen_pack_qkv(q, k, v, indices)                x.reshape(B * S, H, D).index_select(0, indices)
//   varlen_pack_segmented_qkv(pq, pk, pv, mq, mk, mv, indices)
//                                                    the same on torch.cat([prefix, main], dim=1)
//   varlen_scatter_to_padded(x, inv_indices, batch, seq)
//                                                    zeros(B * S, H, D) with row r = x[inv_indices[r]]
//                                                    where inv_indices[r] >= 0, viewed [B, S, H, D]
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

// ---- varlen packing ---------------------------------------------------------------------------

Qkv varlen_pack_chain(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& indices) {
  const auto pack = [&](const at::Tensor& x) {
    TORCH_CHECK(x.dim() == 4, "varlen_pack_qkv: q, k, v must be [B, S, H, D]");
    return x.reshape({x.size(0) * x.size(1), x.size(2), x.size(3)}).index_select(0, indices);
  };
  return {pack(q), pack(k), pack(v)};
}

// Three [n, H, D] outputs like x's, for the kernel path.
Qkv packed_outputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t n) {
  const auto like = [n](const at::Tensor& x) { return at::empty({n, x.size(2), x.size(3)}, x.options()); };
  return {like(q), like(k), like(v)};
}

dfuse::QkvViews qkv_views(Qkv& t) {
  auto& [q, k, v] = t;
  return {*view_of(q, q.data_ptr()), *view_of(k, k.data_ptr()), *view_of(v, v.data_ptr())};
}

Qkv varlen_pack_qkv(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& indices) {
  const auto in = input_views({&q, &k, &v, &indices});
  if (!in || q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || indices.dim() != 1)
    return varlen_pack_chain(q, k, v, indices);
  const c10::OptionalDeviceGuard device_guard(q.device());
  Qkv out = packed_outputs(q, k, v, indices.size(0));
  const dfuse::QkvViews x{(*in)[0], (*in)[1], (*in)[2]}, out_views = qkv_views(out);
  if (!dfuse::can_use_varlen_pack_qkv(x, (*in)[3], out_views)) return varlen_pack_chain(q, k, v, indices);
  run_kernel("varlen_pack_qkv", [&] { dfuse::varlen_pack_qkv(x, (*in)[3], out_views, stream_of(q)); });
  return out;
}

Qkv varlen_pack_segmented_qkv(const at::Tensor& prefix_q, const at::Tensor& prefix_k, const at::Tensor& prefix_v,
                              const at::Tensor& main_q, const at::Tensor& main_k, const at::Tensor& main_v,
                              const at::Tensor& indices) {
  const auto chain = [&] {
    return varlen_pack_chain(at::cat({prefix_q, main_q}, 1), at::cat({prefix_k, main_k}, 1),
                             at::cat({prefix_v, main_v}, 1), indices);
  };
  const auto in = input_views({&prefix_q, &prefix_k, &prefix_v, &main_q, &main_k, &main_v, &indices});
  if (!in || main_q.dim() != 4 || main_k.dim() != 4 || main_v.dim() != 4 || indices.dim() != 1) return chain();
  const c10::OptionalDeviceGuard device_guard(main_q.device());
  Qkv out = packed_outputs(main_q, main_k, main_v, indices.size(0));
  const dfuse::QkvViews prefix{(*in)[0], (*in)[1], (*in)[2]}, main{(*in)[3], (*in)[4], (*in)[5]};
  const dfuse::QkvViews out_views = qkv_views(out);
  if (!dfuse::can_use_varlen_pack_segmented_qkv(prefix, main, (*in)[6], out_views)) return chain();
  run_kernel("varlen_pack_segmented_qkv", [&] {
    dfuse::varlen_pack_segmented_qkv(prefix, main, (*in)[6], out_views, stream_of(main_q));
  });
  return out;
}

Qkv varlen_pack_meta(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& indices) {
  const auto like = [&](const at::Tensor& x) {
    TORCH_CHECK(x.dim() == 4 && indices.dim() == 1, "varlen pack: q, k, v must be [B, S, H, D], indices [n]");
    return at::empty_symint({indices.sym_size(0), x.sym_size(2), x.sym_size(3)}, x.options());
  };
  return {like(q), like(k), like(v)};
}

Qkv varlen_pack_segmented_meta(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor& main_q,
                               const at::Tensor& main_k, const at::Tensor& main_v, const at::Tensor& indices) {
  return varlen_pack_meta(main_q, main_k, main_v, indices);
}

// Without a host sync (no nonzero()), so that the chain also runs inside CUDA graph capture.
at::Tensor varlen_scatter_chain(const at::Tensor& x, const at::Tensor& inv_indices, int64_t batch, int64_t seq) {
  TORCH_CHECK(x.dim() == 3 && inv_indices.dim() == 1 && inv_indices.size(0) == batch * seq,
              "varlen_scatter_to_padded: x must be [n, H, D] and inv_indices [batch * seq]");
  if (x.size(0) == 0) return at::zeros({batch, seq, x.size(1), x.size(2)}, x.options());
  const at::Tensor valid = inv_indices.ge(0).view({-1, 1, 1});
  const at::Tensor gathered = x.index_select(0, inv_indices.clamp_min(0));
  return gathered.masked_fill(valid.logical_not(), 0).view({batch, seq, x.size(1), x.size(2)});
}

at::Tensor varlen_scatter_to_padded(const at::Tensor& x, const at::Tensor& inv_indices, int64_t batch,
                                   int64_t seq) {
  const auto in = input_views({&x, &inv_indices});
  if (!in || x.dim() != 3 || batch < 0 || seq < 0) return varlen_scatter_chain(x, inv_indices, batch, seq);
  const c10::OptionalDeviceGuard device_guard(x.device());
  at::Tensor out = at::empty({batch, seq, x.size(1), x.size(2)}, x.options());
  const TensorView out_view = *view_of(out, out.data_ptr());
  if (!dfuse::can_use_varlen_scatter_to_padded((*in)[0], (*in)[1], out_view))
    return varlen_scatter_chain(x, inv_indices, batch, seq);
  run_kernel("varlen_scatter_to_padded",
             [&] { dfuse::varlen_scatter_to_padded((*in)[0], (*in)[1], out_view, stream_of(x)); });
  return out;
}

at::Tensor varlen_scatter_meta(const at::Tensor& x, const at::Tensor&, int64_t batch, int64_t seq) {
  TORCH_CHECK(x.dim() == 3, "varlen_scatter_to_padded: x must be [n, H, D]");
  return at::empty_symint({c10::SymInt(batch), c10::SymInt(seq), x.sym_size(1), x.sym_size(2)}, x.options());
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("usp_merge_heads(Tensor x) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def("joint_qkv_cat(Tensor img_q, Tensor img_k, Tensor img_v, "
        "Tensor txt_q, Tensor txt_k, Tensor txt_v) -> (Tensor, Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("pack_qkv_destination_major(Tensor q, Tensor k, Tensor v, int world) -> Tensor",
        {at::Tag::pt2_compliant_tag});
  m.def("varlen_pack_qkv(Tensor q, Tensor k, Tensor v, Tensor indices) -> (Tensor, Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("varlen_pack_segmented_qkv(Tensor prefix_q, Tensor prefix_k, Tensor prefix_v, Tensor main_q, "
        "Tensor main_k, Tensor main_v, Tensor indices) -> (Tensor, Tensor, Tensor)",
        {at::Tag::pt2_compliant_tag});
  m.def("varlen_scatter_to_padded(Tensor x, Tensor inv_indices, int batch, int seq) -> Tensor",
        {at::Tag::pt2_compliant_tag});
}

namespace {
// The same kernels serve CUDA and CPU tensors: the dfuse op picks its backend by device.
void register_device_impls(torch::Library& m) {
  m.impl("usp_merge_heads", &usp_merge_heads);
  m.impl("joint_qkv_cat", &joint_qkv_cat);
  m.impl("pack_qkv_destination_major", &pack_qkv_destination_major);
  m.impl("varlen_pack_qkv", &varlen_pack_qkv);
  m.impl("varlen_pack_segmented_qkv", &varlen_pack_segmented_qkv);
  m.impl("varlen_scatter_to_padded", &varlen_scatter_to_padded);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_device_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_device_impls(m); }

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("usp_merge_heads", &usp_merge_heads_meta);
  m.impl("joint_qkv_cat", &joint_qkv_cat_meta);
  m.impl("pack_qkv_destination_major", &pack_qkv_destination_major_meta);
  m.impl("varlen_pack_qkv", &varlen_pack_meta);
  m.impl("varlen_pack_segmented_qkv", &varlen_pack_segmented_meta);
  m.impl("varlen_scatter_to_padded", &varlen_scatter_meta);
}
