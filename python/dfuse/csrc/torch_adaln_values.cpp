// torch.ops.dfuse, adaLN value ops (a fragment of the library torch_ops.cpp defines):
//   temb_table_slices(table, temb) -> Tensor[6]
//       (scale_shift_table + temb.float()).chunk(6, dim=-2)    Wan 2.1 / 2.2 (dim 1 or 2)
//   ltx2_ada_values(table, timestep) -> Tensor[n]
//       (table[None, None].to(timestep.dtype) + timestep.reshape(B, T, n, -1)).unbind(2)    LTX-2
//   scaled_residual_bf16(x, update, gate) -> Tensor
//       (x.float() + update * gate).type_as(x)                  LingBot World, fp32 gate
//   timestep_embedding(timesteps, embedding_dim, flip_sin_to_cos=False, downscale_freq_shift=1,
//                      scale=1, max_period=10000) -> Tensor     diffusers' get_timestep_embedding
// The multi-output ops return their slices as separate dense tensors (the eager chain's are strided
// views of one tensor), with the chain's values, shapes and dtype. The three bit-exact ops go through
// the first-sight Gate, every output compared bitwise with the chain's; timestep_embedding has a
// close contract, which a bitwise Gate cannot check, so it runs the kernel directly
// (python/tests/test_adaln_values_torch.py measures it against the chain). Inputs a kernel refuses
// run the chain.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <span>
#include <vector>

#include "dfuse/ops/adaln.h"
#include "dfuse/policy/gate.h"
#include "gate_runner.h"
#include "tensor_views.h"

namespace {

using dfuse::TensorView;
using dfuse::torch_binding::copy_results;
using dfuse::torch_binding::input_view;
using dfuse::torch_binding::run_gated;
using dfuse::torch_binding::run_kernel;
using dfuse::torch_binding::stream_of;
using dfuse::torch_binding::view_of;

constexpr int64_t kTembParts = 6;

// ---- the eager chains, as model code writes them ------------------------------------------------

std::vector<at::Tensor> temb_table_slices_chain(const at::Tensor& table, const at::Tensor& temb) {
  return at::add(table, temb.to(at::kFloat)).chunk(kTembParts, -2);
}

std::vector<at::Tensor> ltx2_ada_values_chain(const at::Tensor& table, const at::Tensor& timestep) {
  const int64_t n = table.size(0);
  const at::Tensor cast = table.unsqueeze(0).unsqueeze(0).to(timestep.device(), timestep.scalar_type());
  return at::add(cast, timestep.reshape({timestep.size(0), timestep.size(1), n, -1})).unbind(2);
}

at::Tensor scaled_residual_chain(const at::Tensor& x, const at::Tensor& update, const at::Tensor& gate) {
  return at::add(x.to(at::kFloat), at::mul(update, gate)).to(x.scalar_type());
}

at::Tensor timestep_embedding_chain(const at::Tensor& timesteps, int64_t dim, bool flip, double shift, double scale,
                                    double max_period) {
  const int64_t half = dim / 2;
  at::Tensor exponent =
      at::mul(at::arange(0, half, timesteps.options().dtype(at::kFloat)), at::Scalar(-std::log(max_period)));
  exponent = at::div(exponent, at::Scalar(double(half) - shift));
  at::Tensor emb = at::mul(timesteps.unsqueeze(1).to(at::kFloat), at::exp(exponent).unsqueeze(0));
  emb = at::mul(emb, at::Scalar(scale));
  emb = at::cat({at::sin(emb), at::cos(emb)}, -1);
  if (flip) emb = at::cat({emb.narrow(1, half, half), emb.narrow(1, 0, half)}, -1);
  if (dim % 2 == 1) emb = at::constant_pad_nd(emb, {0, 1, 0, 0});
  return emb;
}

// `n` new dense tensors of `sizes`, and their views.
std::vector<at::Tensor> new_parts(int64_t n, at::IntArrayRef sizes, const at::TensorOptions& options) {
  std::vector<at::Tensor> parts;
  for (int64_t k = 0; k < n; ++k) parts.push_back(at::empty(sizes, options));
  return parts;
}

std::vector<TensorView> views_of(const std::vector<at::Tensor>& parts) {
  std::vector<TensorView> views;
  for (const at::Tensor& part : parts) views.push_back(*view_of(part, part.mutable_data_ptr()));
  return views;
}

// ---- the ops ---------------------------------------------------------------------------------------

// The shape of each chunk of the chain's result (table + temb with its dim -2 of 6 cut to 1).
at::DimVector temb_part_shape(const at::Tensor& table, const at::Tensor& temb) {
  at::DimVector shape = at::infer_size_dimvector(table.sizes(), temb.sizes());
  TORCH_CHECK(shape.size() >= 2 && shape[shape.size() - 2] == kTembParts,
              "dfuse temb_table_slices: (table + temb) must have 6 rows in dim -2, got ", at::IntArrayRef(shape));
  shape[shape.size() - 2] = 1;
  return shape;
}

std::vector<at::Tensor> temb_table_slices(const at::Tensor& table, const at::Tensor& temb) {
  const c10::OptionalDeviceGuard device_guard(temb.device());
  const at::DimVector part_shape = temb_part_shape(table, temb);
  const auto vtable = input_view(table), vtemb = input_view(temb);
  if (!vtable || !vtemb || table.device() != temb.device()) return temb_table_slices_chain(table, temb);
  std::vector<at::Tensor> out = new_parts(kTembParts, part_shape, temb.options().dtype(at::kFloat));
  const std::vector<TensorView> vout = views_of(out);
  if (!dfuse::can_use_temb_table_slices(*vtable, *vtemb, vout)) return temb_table_slices_chain(table, temb);
  dfuse::Signature sig("diffusion.temb_table_slices");
  sig.add(*vtable).add(*vtemb);
  for (const TensorView& v : vout) sig.add(v);
  run_gated(
      "temb_table_slices", sig, out, [&](dfuse::Stream s) { dfuse::temb_table_slices(*vtable, *vtemb, vout, s); },
      [&](std::span<at::Tensor> dst) { copy_results(dst, temb_table_slices_chain(table, temb)); });
  return out;
}

std::vector<at::Tensor> temb_table_slices_meta(const at::Tensor& table, const at::Tensor& temb) {
  return new_parts(kTembParts, temb_part_shape(table, temb), temb.options().dtype(at::kFloat));
}

void check_ltx2_shapes(const at::Tensor& table, const at::Tensor& timestep) {
  TORCH_CHECK(table.dim() == 2 && timestep.dim() == 3,
              "dfuse ltx2_ada_values: table must be [n, D] and timestep [B, T, n * D], got ", table.sizes(), " and ",
              timestep.sizes());
  TORCH_CHECK(timestep.size(2) == table.size(0) * table.size(1), "dfuse ltx2_ada_values: timestep's last dim ",
              timestep.size(2), " is not n * D for table ", table.sizes());
}

std::vector<at::Tensor> ltx2_ada_values(const at::Tensor& table, const at::Tensor& timestep) {
  const c10::OptionalDeviceGuard device_guard(timestep.device());
  check_ltx2_shapes(table, timestep);
  const auto vtable = input_view(table), vtimestep = input_view(timestep);
  if (!vtable || !vtimestep || table.device() != timestep.device()) return ltx2_ada_values_chain(table, timestep);
  std::vector<at::Tensor> out =
      new_parts(table.size(0), {timestep.size(0), timestep.size(1), table.size(1)}, timestep.options());
  const std::vector<TensorView> vout = views_of(out);
  if (!dfuse::can_use_ltx2_ada_values(*vtable, *vtimestep, vout)) return ltx2_ada_values_chain(table, timestep);
  dfuse::Signature sig("diffusion.ltx2_ada_values");
  sig.add(*vtable).add(*vtimestep);
  for (const TensorView& v : vout) sig.add(v);
  run_gated(
      "ltx2_ada_values", sig, out, [&](dfuse::Stream s) { dfuse::ltx2_ada_values(*vtable, *vtimestep, vout, s); },
      [&](std::span<at::Tensor> dst) { copy_results(dst, ltx2_ada_values_chain(table, timestep)); });
  return out;
}

std::vector<at::Tensor> ltx2_ada_values_meta(const at::Tensor& table, const at::Tensor& timestep) {
  check_ltx2_shapes(table, timestep);
  return new_parts(table.size(0), {timestep.size(0), timestep.size(1), table.size(1)}, timestep.options());
}

at::Tensor scaled_residual_bf16(const at::Tensor& x, const at::Tensor& update, const at::Tensor& gate) {
  const c10::OptionalDeviceGuard device_guard(x.device());
  const auto vx = input_view(x), vupdate = input_view(update), vgate = input_view(gate);
  if (!vx || !vupdate || !vgate || update.device() != x.device() || gate.device() != x.device())
    return scaled_residual_chain(x, update, gate);
  at::Tensor out =
      at::empty(at::infer_size_dimvector(at::infer_size_dimvector(x.sizes(), update.sizes()), gate.sizes()),
                x.options().memory_format(at::MemoryFormat::Contiguous));
  const auto vout = view_of(out, out.mutable_data_ptr());
  if (!vout || !dfuse::can_use_scaled_residual_bf16(*vx, *vupdate, *vgate, *vout))
    return scaled_residual_chain(x, update, gate);
  dfuse::Signature sig("diffusion.scaled_residual_bf16");
  sig.add(*vx).add(*vupdate).add(*vgate).add(*vout);
  run_gated(
      "scaled_residual_bf16", sig, std::span<at::Tensor>(&out, 1),
      [&](dfuse::Stream s) { dfuse::scaled_residual_bf16(*vx, *vupdate, *vgate, *vout, s); },
      [&](std::span<at::Tensor> dst) { dst[0].copy_(scaled_residual_chain(x, update, gate)); });
  return out;
}

at::Tensor scaled_residual_bf16_meta(const at::Tensor& x, const at::Tensor& update, const at::Tensor& gate) {
  return at::empty_symint(
      at::infer_size_symdimvector(at::infer_size_symdimvector(x.sym_sizes(), update.sym_sizes()), gate.sym_sizes()),
      x.options());
}

at::Tensor timestep_embedding(const at::Tensor& timesteps, int64_t embedding_dim, bool flip_sin_to_cos,
                              double downscale_freq_shift, double scale, double max_period) {
  const c10::OptionalDeviceGuard device_guard(timesteps.device());
  TORCH_CHECK(timesteps.dim() == 1, "dfuse timestep_embedding: timesteps must be 1-D, got ", timesteps.sizes());
  const dfuse::TimestepEmbeddingOptions options{.flip_sin_to_cos = flip_sin_to_cos,
                                                .downscale_freq_shift = downscale_freq_shift,
                                                .scale = scale,
                                                .max_period = max_period};
  at::Tensor out = at::empty({timesteps.size(0), embedding_dim}, timesteps.options().dtype(at::kFloat));
  const auto vt = input_view(timesteps);
  const auto vout = view_of(out, out.mutable_data_ptr());
  if (!vt || !vout || !dfuse::can_use_timestep_embedding(*vt, *vout, options))
    return timestep_embedding_chain(timesteps, embedding_dim, flip_sin_to_cos, downscale_freq_shift, scale, max_period);
  run_kernel("timestep_embedding", [&] { dfuse::timestep_embedding(*vt, *vout, options, stream_of(timesteps)); });
  return out;
}

at::Tensor timestep_embedding_meta(const at::Tensor& timesteps, int64_t embedding_dim, bool, double, double, double) {
  TORCH_CHECK(timesteps.dim() == 1, "dfuse timestep_embedding: timesteps must be 1-D, got ", timesteps.sizes());
  return at::empty_symint({timesteps.sym_size(0), c10::SymInt(embedding_dim)}, timesteps.options().dtype(at::kFloat));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(dfuse, m) {
  m.def("temb_table_slices(Tensor table, Tensor temb) -> Tensor[]", {at::Tag::pt2_compliant_tag});
  m.def("ltx2_ada_values(Tensor table, Tensor timestep) -> Tensor[]", {at::Tag::pt2_compliant_tag});
  m.def("scaled_residual_bf16(Tensor x, Tensor update, Tensor gate) -> Tensor", {at::Tag::pt2_compliant_tag});
  m.def(
      "timestep_embedding(Tensor timesteps, int embedding_dim, bool flip_sin_to_cos=False, "
      "float downscale_freq_shift=1, float scale=1, float max_period=10000) -> Tensor",
      {at::Tag::pt2_compliant_tag});
}

namespace {
// The same kernels serve CUDA and CPU tensors: the dfuse op picks its backend by device.
void register_adaln_values_impls(torch::Library& m) {
  m.impl("temb_table_slices", &temb_table_slices);
  m.impl("ltx2_ada_values", &ltx2_ada_values);
  m.impl("scaled_residual_bf16", &scaled_residual_bf16);
  m.impl("timestep_embedding", &timestep_embedding);
}
}  // namespace

TORCH_LIBRARY_IMPL(dfuse, CUDA, m) { register_adaln_values_impls(m); }
TORCH_LIBRARY_IMPL(dfuse, CPU, m) { register_adaln_values_impls(m); }

TORCH_LIBRARY_IMPL(dfuse, Meta, m) {
  m.impl("temb_table_slices", &temb_table_slices_meta);
  m.impl("ltx2_ada_values", &ltx2_ada_values_meta);
  m.impl("scaled_residual_bf16", &scaled_residual_bf16_meta);
  m.impl("timestep_embedding", &timestep_embedding_meta);
}
