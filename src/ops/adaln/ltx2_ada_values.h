// diffusion.ltx2_ada_values — replaces LTX-2's adaLN value split (ltx_core's
// BasicAVTransformerBlock.get_ada_values with indices = slice(None), n = table rows: 6, or 9 in
// blocks with cross-attention adaLN):
//   ada_values = (scale_shift_table.unsqueeze(0).unsqueeze(0).to(dtype=timestep.dtype)
//                 + timestep.reshape(B, T, n, D)).unbind(dim=2)
// Eager runs the cast and the add into one [B, T, n, D] tensor and hands out n strided slices
// [B, T, D] (strides [T*n*D, n*D, 1]); this op writes the n slices as n dense tensors in one pass.
// diffusers' LTX2 form `(scale_shift_table[None, None] + temb.reshape(B, T, n, D)).unbind(2)` is
// the same chain when table and temb share a dtype (the cast is then the identity).
//
// Contract: bit-exact in bf16, f16 and f32 (the timestep's dtype, which the outputs take):
//   out_k = T(float(T(table[k])) + float(timestep[k]))
// The cast rounds the table to T once (RNE), the add computes in float and rounds once
// (reference/pytorch-eager-arithmetic.md §3).
#pragma once

#include "common/arith.h"
#include "common/table_split.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

template <typename Tab, typename Val>
struct Ltx2AdaValue {
  DFUSE_HD Val operator()(Tab table, Val timestep) const {
    using S = Storage<Val>;
    const float cast_table = S::round(Storage<Tab>::load(table));
    return S::store(add_rn(cast_table, S::load(timestep)));
  }
};

using Ltx2AdaValuesEntry = void (*)(const TableSplitParams& p, Stream stream);

}  // namespace dfuse::detail
