// dfuse ops, adaLN modulation and gating family.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts
// (and, given `why`, says which guard failed), and <op>(...) re-checks and throws
// dfuse::Unsupported naming the failed guard. The backend is chosen by the device of the
// tensors: host tensors run the host backend, CUDA tensors the CUDA backend (loaded on first
// use). Outputs are caller-owned; `out` may alias `x` (in place) only where stated.
#pragma once

#include <span>
#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

// diffusion.modulate_scale_shift: out = x * (1 + scale) + shift, rounded to the storage dtype
// after each of the three eager ops (bit-exact in bf16, f16 and f32).
//   x:      [..., D], rank 1..4, last dim contiguous, any outer strides
//   scale:  broadcastable to x (right-aligned), last dim contiguous or size 1 broadcast;
//           per batch [B,1,D], per token [B,S,D], per frame [B,F,1,D] against x [B,F,HW,D],
//           strided chunk(6) slices
//   shift:  same rules as scale
//   out:    x's shape, last dim contiguous; may be x itself
// All operands share one dtype (bf16, f16, f32) and one device.
bool can_use_modulate_scale_shift(const TensorView& x, const TensorView& scale, const TensorView& shift,
                                  const TensorView& out, std::string* why = nullptr);
void modulate_scale_shift(const TensorView& x, const TensorView& scale, const TensorView& shift,
                          const TensorView& out, Stream stream = {});

// diffusion.residual_gate_add: out = residual + gate * update, two roundings to the storage
// dtype (the mul, then the add), bit-exact in bf16, f16 and f32.
//   residual: [..., D], rank 1..4, last dim contiguous
//   update:   same shape as residual, last dim contiguous
//   gate:     broadcastable to residual: per batch [B,1,D], per token [B,S,1], or full
//   out:      residual's shape, last dim contiguous; may be residual itself
bool can_use_residual_gate_add(const TensorView& residual, const TensorView& gate, const TensorView& update,
                               const TensorView& out, std::string* why = nullptr);
void residual_gate_add(const TensorView& residual, const TensorView& gate, const TensorView& update,
                       const TensorView& out, Stream stream = {});

// ---- adaLN values: the modulation tensors themselves ----------------------------------------

// diffusion.temb_table_slices: Wan's `(scale_shift_table + temb.float()).chunk(6, dim)` as six
// dense fp32 tensors, bit-exact: out[k] = table[k] + float(temb[.., k, :]) (one f32 rounding).
//   table: fp32 [6, D], [1, 6, D] or [1, 1, 6, D], last dim contiguous
//   temb:  [B, 6, D] (Wan 2.1, Wan 2.2 A14B) or [B, S, 6, D] (Wan 2.2 TI2V, per token); bf16,
//          f16 or f32; last dim contiguous, any outer strides
//   out:   six fp32 tensors, each contiguous, of the chunk's shape: [B, 1, D] or [B, S, 1, D], each fewer
//          than 2^31 elements
bool can_use_temb_table_slices(const TensorView& table, const TensorView& temb, std::span<const TensorView> out,
                               std::string* why = nullptr);
void temb_table_slices(const TensorView& table, const TensorView& temb, std::span<const TensorView> out,
                       Stream stream = {});

// diffusion.ltx2_ada_values: LTX-2's `(table[None, None].to(timestep.dtype) + timestep.reshape(B,
// T, n, D)).unbind(2)` as n dense tensors, bit-exact: out[k] = T(float(T(table[k])) + float(v)).
//   table:    [n, D], n = 1..9 (9 with cross-attention adaLN); bf16, f16 or f32; last dim contiguous
//   timestep: [B, T, n * D]; bf16, f16 or f32; last dim contiguous, any outer strides
//   out:      n tensors [B, T, D] of timestep's dtype, each contiguous, each fewer than 2^31 elements
bool can_use_ltx2_ada_values(const TensorView& table, const TensorView& timestep, std::span<const TensorView> out,
                             std::string* why = nullptr);
void ltx2_ada_values(const TensorView& table, const TensorView& timestep, std::span<const TensorView> out,
                     Stream stream = {});

// diffusion.scaled_residual_bf16 (the spec's try_fused_scaled_residual_bf16): LingBot World's
// `(x.float() + y * gate).type_as(x)` with bf16 x, y and an fp32 gate, bit-exact:
// out = bf16(float(x) + float(y) * gate), both ops rounded to fp32.
//   residual: bf16 [..., D], rank 1..4, last dim contiguous
//   update:   bf16, residual's shape, last dim contiguous
//   gate:     fp32, broadcastable to residual: per frame [B, F, 1, D] against [B, F, HW, D], per
//             batch, per token, one value per row [.., 1], strided chunk slices
//   out:      bf16, residual's shape, last dim contiguous; may be residual itself
bool can_use_scaled_residual_bf16(const TensorView& residual, const TensorView& update, const TensorView& gate,
                                  const TensorView& out, std::string* why = nullptr);
void scaled_residual_bf16(const TensorView& residual, const TensorView& update, const TensorView& gate,
                          const TensorView& out, Stream stream = {});

// diffusion.timestep_embedding: diffusers' get_timestep_embedding(timesteps, embedding_dim,
// flip_sin_to_cos, downscale_freq_shift, scale, max_period), close: within
// 2^-20 * max(1, |scale * t|) of torch's fp32 chain per element (see
// src/ops/adaln/timestep_embedding.h).
//   timesteps: [N], f32, bf16, f16 or int64, any stride
//   out:       fp32 [N, embedding_dim], last dim contiguous
struct TimestepEmbeddingOptions {
  bool flip_sin_to_cos = false;
  double downscale_freq_shift = 1.0;
  double scale = 1.0;
  double max_period = 10000.0;
};
bool can_use_timestep_embedding(const TensorView& timesteps, const TensorView& out,
                                const TimestepEmbeddingOptions& options = {}, std::string* why = nullptr);
void timestep_embedding(const TensorView& timesteps, const TensorView& out,
                        const TimestepEmbeddingOptions& options = {}, Stream stream = {});

}  // namespace dfuse
