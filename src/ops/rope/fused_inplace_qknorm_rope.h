// diffusion.fused_inplace_qknorm_rope (exact form) — replaces the split QK-norm + RoPE chain: an
// RMSNorm kernel per q and k (F.rms_norm or diffusers' decomposed RMSNorm, ops/norm's arithmetic:
// common/rms_norm_arith.h) whose output is rounded to the storage dtype, then the rotate-half RoPE
// chain (ops/rope/rope_rotate_half.h) on the rounded values, written back in place. Contract:
// bit-exact against that chain (dfuse/ops/rope.h). Per head: the row's statistic in the chain's
// reduction order, every element normalized and rounded to T, then rotated from the rounded values
// (the tail beyond R keeps the normalized value). The rows, guards and kernels are the QK-norm +
// RoPE rows (ops/rope/qknorm_rope_rows.h) with pairing rotate_half and round_norm; q and k are the
// two parts of one launch (CUDA entry: ops/rope/qknorm_rope_rows.cu).
// Its other forms, on the same rows: fused_qknorm_rope (out of place, exact), fused_qknorm_rope_pack_kv
// (q in place; rotated k and a copy of v into a packed [..., 2, H, D] buffer; exact), and
// fused_inplace_qknorm_rope_one_rounding (round_norm off: the normalized value stays fp32 into the
// fp32-opmath RoPE, one rounding per element; close, bound in dfuse/ops/rope.h).
#pragma once

#include "ops/rope/qknorm_rope_rows.h"
