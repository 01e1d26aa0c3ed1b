#!/usr/bin/env bash
# Session 39 run 2 (prepared for the next session; any card, an H200 preferred; carry nothing): the checks of
# 804efa5 that run 1 had no time for. Build the tree; memcheck over the changed kernels' tests run 1 left out
# (the one-rounding QK-norm + RoPE form, qk_rmsnorm_storage_dtype, qk_rmsnorm's and qk_head_layernorm's other
# tests); racecheck over the block-per-row RMSNorm tests (block_torch_rms_norm_combine's sum is now
# torch_rms_norm_warps_total, same shared-memory accesses); pytest of test_rope_torch.py (the in-place exact form's
# bitwise tests); on an H200 then torch_bench of every op (the acceptance table of #3 and #4 at 7016b6a).
# Expectation: 0 errors, every test passes.
set -u
LIMIT_S=${LIMIT_S:-560}
T=/tmp/s39r2
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s39r2.tgz
build_tree
sanitize memcheck 120 "(one_rounding or storage or qk_wan or qk_separate or qk_native or qk_affine or qk_joint or qk_long) and not torch.float16" \
  qknorm_rope_forms rmsnorm layernorm
sanitize racecheck 90 "not qk and not torch.float16" rmsnorm
snapshot
pytest_while_time rope
[[ $card == *H200* ]] && bench_all && snapshot
[[ -f $T/torch_bench.txt ]] && grep -h "copy bandwidth" $T/torch_bench.txt && contract_summary $T/torch_bench.txt
