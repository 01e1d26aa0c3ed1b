#!/usr/bin/env bash
# Session 39 run 1 (any card; carry nothing). Session 38's qk_rows_fewer_instructions.patch measured on an H100
# this session (00:36 UTC): qk_rmsnorm FLUX.1 -2.6%, qk_rmsnorm_native -2.2%, flux2_qkv_epilogue -2.9%,
# flux2_strided -1.8%, but fused_qknorm_rope FLUX.1 +3.3% and fused_inplace +2.4% (slower). This run measures a
# subset, qk_rows_statistics_and_round_step.patch: the half-warp statistics (compile-time power-of-two mean,
# warps' total without absent warps, butterfly chunk sum, chain at compile time), the RowSplit of qk_rmsnorm's and
# qk_head_layernorm's row index, and the head-group step specialized on round_norm; without the patch's UintDivider
# item split and partner-signed sin in the head-group kernel. Unlike the full patch, the power-of-two mean is a
# compile-time-n overload (runtime n keeps the division: the full patch's runtime test made
# scale_residual_norm_cached<float, 12> spill 16 bytes); ptxas spill list identical to the tree's (checked here).
# Prediction: qk_rmsnorm, qk_rmsnorm_native, qk_head_layernorm, flux2 rows keep the full patch's gains (2-3%);
# fused_qknorm_rope FLUX.1 between the tree and the full patch (48.4 .. 50.0 us) if the specialization's code size
# is what cost it, at the tree's time or better if the UintDivider / sin change was.
# Then memcheck over the changed kernels' tests, then pytest of every module whose kernels the patch touches.
set -u
LIMIT_S=${LIMIT_S:-560}
HERE=docs/runs/2026-12-08-session39-run1
OPS=(fused_qknorm_rope fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue qk_rmsnorm
  qk_rmsnorm_native qk_head_layernorm)
T=/tmp/s39
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s39.tgz
build_tree
bench tree "${OPS[@]}"
snapshot
git apply $HERE/qk_rows_statistics_and_round_step.patch && echo "patch applied" && build round_step &&
  bench round_step "${OPS[@]}"
snapshot
python3 bench/compare_runs.py tree=$T/tb_tree.json round_step=$T/tb_round_step.json |
  grep "qknorm_rope\|qkv_epilogue\|qk_rmsnorm\|qk_head_layernorm"
mc_limit=$(($(left) - 20)); ((mc_limit > 130)) && mc_limit=130
DFUSE_REQUIRE_CUDA=1 timeout $mc_limit compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest \
  python/tests/test_qknorm_rope_forms_torch.py python/tests/test_flux2_rope_torch.py \
  python/tests/test_rmsnorm_torch.py python/tests/test_layernorm_torch.py -q -p no:cacheprovider \
  -k "(out_of_place or pack_kv or storage_dtype_math or strided or epilogue or qk_packed or qk_shapes) and not torch.float16" \
  >"$T/memcheck.log" 2>&1
echo "memcheck rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY" "$T/memcheck.log" | tail -1); $(tail -1 "$T/memcheck.log")"
snapshot
pytest_while_time qknorm_rope_forms rmsnorm layernorm flux2_rope joint_qkv norm_fp32 scale_residual_norm
grep -h "copy bandwidth" $T/tb_*.txt 2>/dev/null
contract_summary $T/tb_*.txt 2>/dev/null
