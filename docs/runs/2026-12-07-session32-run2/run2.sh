#!/usr/bin/env bash
# Session 32 run 2 (for the machine run 1 leaves warm; builds from scratch on a fresh one). Three changes, each
# benched beside the tree in this call:
# 1. norm_fp32_cached_from_first.patch (session 31 run 1): norm_scale_shift's cached LayerNorm epilogue indexed from
#    per-thread pointers (SASS 69 -> 58 instructions per chunk with weight and bias). Prediction on an H200, where
#    the kernel with weight and bias was issue-bound (83.9% of copy at Wan 2.1, session 30): Wan 2.1 ~7% faster;
#    on an H100 no change (session 31 run 1 measured that).
# 2. table_split_wide_values.patch: temb_table_slices with 16-bit values reads 16 bytes of values per vector (8
#    elements; 2 x 16-byte table loads and stores of the fp32 outputs), where the tree's vectors are 16 bytes of
#    the fp32 outputs (8-byte value loads). Half the vectors, twice the bytes of each value load in flight.
#    Prediction: on the H200 (0.975x of torch.compile, whose kernel makes 16-byte value loads of 8 elements per
#    thread) 1-2% faster; on an H100 (0.99x) within 0.5%. ltx2_ada_values (all 16-bit, 8 elements already) is
#    unchanged by it (its SASS is identical).
# 3. staged_align16.patch (session 31 run 2): the RMSNorm / fp32-norm staged rows back at 16 bytes, the baseline
#    of the 128-byte alignment adopted in d5f9bb6 (on the H100: 3.3-3.9% faster at Wan 2.1). Prediction on the
#    H200: the tree 2-4% faster than the baseline at Wan 2.1 in rmsnorm_scale, rmsnorm_decomposed_scale_shift and
#    rmsnorm_modulate_fp32.
set -u
LIMIT_S=${LIMIT_S:-560}
HERE=docs/runs/2026-12-07-session32-run2
NSS=("norm_scale_shift layer_norm affine" "norm_scale_shift layer_norm")
RMS=(rmsnorm_scale rmsnorm_decomposed_scale_shift rmsnorm_scale_shift rmsnorm_tanh_residual rmsnorm_modulate_fp32)
T=/tmp/v
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/v.tgz
left() { echo $((LIMIT_S - SECONDS)); }
build_tree
bench tree "${NSS[@]}" temb_table_slices "${RMS[@]}"
snapshot
(($(left) > 120)) && swap_patch docs/runs/2026-12-07-session31-run1/norm_fp32_cached_from_first.patch from_first \
  "${NSS[@]}"
(($(left) > 100)) && swap_patch $HERE/table_split_wide_values.patch wide_values temb_table_slices
(($(left) > 190)) && swap_patch docs/runs/2026-12-07-session31-run2/staged_align16.patch align16 "${RMS[@]}"
snapshot
nvidia-smi --query-gpu=name --format=csv,noheader
contract_summary $T/tb_*.txt
grep -h "copy bandwidth" $T/tb_*.txt
python3 bench/compare_runs.py tree=$T/tb_tree.json from_first=$T/tb_from_first.json wide_values=$T/tb_wide_values.json \
  align16=$T/tb_align16.json
