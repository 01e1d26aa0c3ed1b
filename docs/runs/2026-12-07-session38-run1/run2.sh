#!/usr/bin/env bash
# Session 38 run 2 (any card; carry nothing). qk_rows_fewer_instructions.patch cuts instructions from the half-warp
# RMSNorm statistics and the QK-norm + RoPE head-group kernel, bit for bit the same arithmetic (a reviewer session
# read each claim; host tests of the first two added):
#  - torch_rms_norm_rstd: sum / n for n a power of two as sum * (1 / n) (the same correctly rounded quotient): one
#    FMUL where nvcc emitted FCHK + five FFMA + a slow-path branch per head;
#  - torch_rms_norm_warps_total: F.rms_norm's (w0 + w2) + (w1 + w3) without the absent warps' +0 terms (a sum of
#    squares is never -0): two FADD per head at D = 128;
#  - half_warp_rms_norm_inv takes the chain from the RmsNormElement (compile time) instead of reading it per head;
#  - half_warp_chunk_sum: butterfly (xor) exchanges, so that every lane computes lane 0's sum (swapped operands
#    of a commutative IEEE add): no SHFL.IDX broadcast per head;
#  - rotate-half at D = 128: lanes 0..7 negate their sin once per item instead of selecting -partner per element
#    (-a * s == a * -s bit for bit): eight FSEL per head;
#  - the head-group step specialized on round_norm (was a runtime flag: a register move per element after the
#    predicated rounding);
#  - an item's token and group by UintDivider (multiply-high) instead of two 32-bit divisions per item;
#  - the half-warp head kernels of qk_rmsnorm (all chains) and qk_head_layernorm split each row's index by RowSplit
#    (common/rows.h: the same two divisions by multiply-high): their per-step index prologue 148 -> 92 instructions
#    (four heads; qk_rmsnorm bf16 D = 128), 80 / 64 registers as before, no spills.
# SASS here (FLUX.1's instance: bf16 x, fp32 tables, F.rms_norm with weight, rounded before the RoPE): a head's
# straight-line path from its first square to its store 156-165 -> 114-120 instructions (-27%); registers 80 -> 80,
# no spills in any instance; the kernel's code grows ~1.8x (a step per rounding).
# Why: session 36/38's ncu at FLUX.1 (H100): the kernel latency-bound at 37.5% occupancy, one issue per 1.8 cycles,
# two thirds of the cycles between a warp's instructions outside its load waits; session 27's 20% instruction cut
# in qk_head_layernorm gave 10% at FLUX.1.
# Prediction: fused_qknorm_rope / fused_inplace / flux2_strided FLUX.1 5-10% faster on the H100 (48.6 -> 44-46 us),
# flux2_qkv_epilogue 2-6%, qk_rmsnorm rows 3-6% (statistics and row split), qk_head_layernorm 1-4% (row split),
# Wan 2.1 rows 0-3% (nearer the copy already).
# The H200 acceptance table is a separate call (session 38's device time ran out before either ran).
set -u
LIMIT_S=${LIMIT_S:-560}
HERE=docs/runs/2026-12-07-session38-run1
OPS=(fused_qknorm_rope fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue qk_rmsnorm
  qk_rmsnorm_native qk_head_layernorm)
T=/tmp/s38
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s38.tgz
build_tree
bench tree "${OPS[@]}"
snapshot
SWAP_PYTEST="qknorm_rope_forms flux2_rope rmsnorm layernorm joint_qkv norm_fp32 scale_residual_norm" \
  swap_patch $HERE/qk_rows_fewer_instructions.patch fewer_instructions "${OPS[@]}"
python3 bench/compare_runs.py tree=$T/tb_tree.json fewer_instructions=$T/tb_fewer_instructions.json |
  grep "qknorm_rope\|qkv_epilogue\|qk_rmsnorm\|qk_head_layernorm"
grep -h "copy bandwidth" $T/tb_*.txt 2>/dev/null
contract_summary $T/tb_*.txt 2>/dev/null
