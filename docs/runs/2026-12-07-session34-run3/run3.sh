#!/usr/bin/env bash
# Session 34 run 3: runs 1 and 2 in the one call the session's device time still allows (LIMIT_S, 480 s or more).
# The two patches touch disjoint ops and are applied together as one build ("both"):
# - ../2026-12-07-session34-run1/rope_rotate_half_flat_large.patch (prediction there: H100 Wan 2.1 ~572 -> ~537 us,
#   FLUX.1 unchanged; H200 unchanged within 1%);
# - ../2026-12-07-session34-run2/qk_rmsnorm_rope_grid.patch (prediction there: the qk_rmsnorm rows 5-8% faster at
#   FLUX.1, Wan 2.1 within 1%).
# On an H200 first torch_bench of every op on the tree (the acceptance table of #3 and #4; its rows of the five ops
# are the tree's side of the comparison); on an H100 torch_bench of the five ops on the tree. Then the patches built,
# benched, pytest rope and rmsnorm against torch eager chains, memcheck over their cases, dfuse bench rope_rotate_half;
# reversed without a rebuild (nothing runs after them).
set -u
LIMIT_S=${LIMIT_S:-480}
T=/tmp/h
source scripts/variant_bench.sh
R1=docs/runs/2026-12-07-session34-run1
R2=docs/runs/2026-12-07-session34-run2
OPS="rope_rotate_half qk_head_layernorm qk_rmsnorm qk_rmsnorm_native qk_rmsnorm_storage_dtype"
build_tree
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bench_all
  TREE=$T/torch_bench.json
else
  bench tree $OPS
  TREE=$T/tb_tree.json
fi
snapshot
py() {  # py NAME SECONDS MODULE [pytest args]: pytest of test_MODULE_torch.py with the patches
  local name=$1 s=$2 m=$3
  shift 3
  DFUSE_REQUIRE_CUDA=1 timeout "$s" python3 -m pytest "python/tests/test_${m}_torch.py" -q -p no:cacheprovider "$@" \
    >"$T/pytest_${m}_$name.log" 2>&1
  echo "pytest $m $name rc $? at ${SECONDS}s: $(tail -1 "$T/pytest_${m}_$name.log")"
}
memcheck() {  # memcheck NAME MODULE -k EXPR
  local name=$1 m=$2
  shift 2
  DFUSE_REQUIRE_CUDA=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest \
    "python/tests/test_${m}_torch.py" -q -p no:cacheprovider "$@" >"$T/memcheck_${m}_$name.log" 2>&1
  echo "memcheck $m $name rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY" "$T/memcheck_${m}_$name.log" | tail -1)"
}
if git apply $R1/rope_rotate_half_flat_large.patch && git apply $R2/qk_rmsnorm_rope_grid.patch && build both &&
  bench both $OPS; then
  snapshot
  python3 bench/compare_runs.py tree=$TREE both=$T/tb_both.json | grep -E "rope_rotate_half|qk_"
  py both 90 rope -k "rotate_half"
  py both 90 rmsnorm -k "qk"
  snapshot
  memcheck both rope -k "rotate_half and bfloat16 and (hunyuan_video or 18000)"
  memcheck both rmsnorm -k "qk and bfloat16 and not wan"
  snapshot
  (($(left) > 40)) && timeout 30 build-gpu/dfuse bench --op rope_rotate_half >"$T/dfuse_bench_both.txt" 2>&1
fi
git apply -R $R2/qk_rmsnorm_rope_grid.patch
git apply -R $R1/rope_rotate_half_flat_large.patch
grep -h "copy bandwidth" $T/t*.txt
python3 bench/compare_runs.py tree=$TREE both=$T/tb_both.json
snapshot
contract_summary $T/t*_*.txt
nvidia-smi --query-gpu=name --format=csv,noheader
