// diffusion.temb_table_slices — replaces Wan's
//   shift, scale, gate, c_shift, c_scale, c_gate = (scale_shift_table + temb.float()).chunk(6, dim=1)
// (Wan 2.1 / 2.2 A14B: table [1, 6, D], temb [B, 6, D]) and its per-token form
//   (scale_shift_table.unsqueeze(0) + temb.float()).chunk(6, dim=2)
// (Wan 2.2 TI2V: temb [B, S, 6, D]), followed by the .contiguous() / .squeeze(2) the block
// applies to each slice. Eager runs two kernels (the float copy of temb, the add) into one
// [B, (S,) 6, D] fp32 tensor and hands out six strided slices; this op writes the six slices
// as six dense fp32 tensors in one pass.
//
// Contract: bit-exact. temb.float() is exact (bf16/f16 -> f32 widening), and the add is one f32
// rounding: out_k = fl32(table[k] + float(temb[k])) (reference/pytorch-eager-arithmetic.md §3;
// type promotion of a float32 table with a float32 tensor). The table is float32.
#pragma once

#include "common/arith.h"
#include "common/table_split.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

template <typename Val>
struct TembTableAdd {
  DFUSE_HD float operator()(float table, Val temb) const { return add_rn(table, Storage<Val>::load(temb)); }
};

using TembTableSlicesEntry = void (*)(const TableSplitParams& p, Stream stream);

}  // namespace dfuse::detail
