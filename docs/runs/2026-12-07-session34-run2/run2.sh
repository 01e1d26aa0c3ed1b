#!/usr/bin/env bash
# Session 34 run 2. qk_rmsnorm_rope_grid.patch: the vectorized qk_rmsnorm kernel (qk_rmsnorm, qk_rmsnorm_native,
# qk_rmsnorm_storage_dtype) launched by rope_launch.cuh's launch_rope_kernel as qk_head_layernorm's vectorized
# kernel is: q's blocks (y = 0) and k's (y = 1) each up to the resident count (was: half of it each), and the
# occupancy asked of the runtime once per kernel and device (was: every launch). The kernel is unchanged.
# Why: on the H100 (session 33) qk_head_layernorm, the same half-warp row layout with more arithmetic, ran FLUX.1 in
# 44.1 us and the qk_rmsnorm rows in 48.3-50.2 us; on the H200 (session 21 run 2) qk_head_layernorm given the split
# grid (resident / 2 per part) went 40.8 -> 43.1 us at FLUX.1. Prediction: the qk_rmsnorm rows 5-8% faster at
# FLUX.1 (toward qk_head_layernorm's time on the H100), Wan 2.1 within 1%; unchanged if the body is the difference.
# Either card: build (kept if the machine is warm); the four ops on the tree; the patch built, benched, pytest
# rmsnorm against torch eager chains, memcheck over its qk cases; reversed.
set -u
LIMIT_S=${LIMIT_S:-300}
HERE=docs/runs/2026-12-07-session34-run2
T=/tmp/g
source scripts/variant_bench.sh
build_tree
OPS="qk_head_layernorm qk_rmsnorm qk_rmsnorm_native qk_rmsnorm_storage_dtype"
bench tree $OPS
snapshot
qk_memcheck() {
  DFUSE_REQUIRE_CUDA=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest \
    python/tests/test_rmsnorm_torch.py -q -p no:cacheprovider -k "qk" >"$T/memcheck_$1.log" 2>&1
  echo "memcheck $1 rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY" "$T/memcheck_$1.log" | tail -1)"
}
SWAP_PYTEST=rmsnorm SWAP_WITH_PATCH=qk_memcheck swap_patch $HERE/qk_rmsnorm_rope_grid.patch grid $OPS
grep -h "copy bandwidth" $T/tb_*.txt
python3 bench/compare_runs.py tree=$T/tb_tree.json grid=$T/tb_grid.json
snapshot
contract_summary $T/tb_*.txt
nvidia-smi --query-gpu=name --format=csv,noheader
