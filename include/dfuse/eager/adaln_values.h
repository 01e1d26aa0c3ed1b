// dfuse eager chains of the adaLN value ops (dfuse/ops/adaln.h), composed from the eager replicas
// exactly as model code writes them, every intermediate materialized (scratch from `ws`), on the
// operands' device. The slices of the multi-output chains are then copied into the caller's
// outputs, as the model's `.contiguous()` (or a consumer's copy) would.
#pragma once

#include <span>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/eager/chains.h"

namespace dfuse::eager {

// (scale_shift_table + temb.float()).chunk(6, dim=-2), chunk k copied into out[k]: table fp32
// broadcastable to temb ([1, 6, D] against [B, 6, D], [1, 1, 6, D] against [B, S, 6, D]).
void temb_table_slices_chain(const TensorView& table, const TensorView& temb, std::span<const TensorView> out,
                             Workspace& ws, Stream stream = {});

// (table[None, None].to(timestep.dtype) + timestep.reshape(B, T, n, D)).unbind(2), value k copied
// into out[k]: table [n, D], timestep [B, T, n * D] with a contiguous last dim.
void ltx2_ada_values_chain(const TensorView& table, const TensorView& timestep, std::span<const TensorView> out,
                           Workspace& ws, Stream stream = {});

// (x.float() + update * gate).type_as(x): x, update bf16, gate fp32 broadcastable to x.
void scaled_residual_bf16_chain(const TensorView& x, const TensorView& update, const TensorView& gate,
                                const TensorView& out, Workspace& ws, Stream stream = {});

}  // namespace dfuse::eager
