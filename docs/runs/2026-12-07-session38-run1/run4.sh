#!/usr/bin/env bash
# Session 38 run 4 (any card; carry nothing; after run2.sh, if the patch won): qk_rows_fewer_instructions.patch
# applied and checked as a tree change is. Build; memcheck over the tests of the kernels it changes (the QK-norm +
# RoPE head-group kernel's forms, flux2's strided rows and epilogue, the half-warp qk_rmsnorm and qk_head_layernorm
# kernels) at their odd and model shapes; pytest against torch eager of every module whose kernels the patch
# touches (the half-warp statistics, F.rms_norm's mean, the row split). On an H200 first torch_bench of every op
# (the acceptance table of #3 and #4 with the patch). Expectation: every test passes, memcheck 0 errors; nothing in
# the patch touches shared memory, so racecheck is not run.
set -u
LIMIT_S=${LIMIT_S:-560}
T=/tmp/s38r4
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s38r4.tgz
git apply docs/runs/2026-12-07-session38-run1/qk_rows_fewer_instructions.patch && echo "patch applied"
build_tree
[[ $card == *H200* ]] && bench_all && snapshot
DFUSE_REQUIRE_CUDA=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest \
  python/tests/test_qknorm_rope_forms_torch.py python/tests/test_flux2_rope_torch.py \
  python/tests/test_rmsnorm_torch.py python/tests/test_layernorm_torch.py -q -p no:cacheprovider \
  -k "(out_of_place or pack_kv or storage_dtype_math or strided or epilogue or qk_packed or qk_shapes) and not torch.float16" \
  >"$T/memcheck.log" 2>&1
echo "memcheck rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY" "$T/memcheck.log" | tail -1); $(tail -1 "$T/memcheck.log")"
snapshot
pytest_while_time qknorm_rope_forms flux2_rope rmsnorm layernorm joint_qkv norm_fp32 scale_residual_norm rope
[[ -f $T/torch_bench.txt ]] && grep -h "copy bandwidth" $T/torch_bench.txt && contract_summary $T/torch_bench.txt
