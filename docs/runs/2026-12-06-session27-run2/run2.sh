#!/usr/bin/env bash
# Session 27 run 2: for when the device time left allows one call, not run 1 + session 26 run 2. On an H200, the
# acceptance check of the tree in one call: build; torch_bench of every op (each beside its eager chain and
# torch.compile of the chain, the copy measured in the same run, every output checked against eager at model
# shapes); then pytest of every module against torch eager chains (diffusers from the carried .whl/) in the time
# left. memcheck, racecheck, dfuse verify and dfuse bench of these sources ran on an H100 (session 25 run 1).
# On an H100, run 1's H100 branch. LIMIT_S: the seconds the call may run (what the device time left allows); under
# 450 the H200 branch benches only the rows whose kernels changed since their last H200 numbers (sessions 23-24's
# LayerNorm rows) and rope_rotate_half, under 300 only the two rows issue-bound there in session 22; on an H100
# under 400 (too short for run 1's variant builds) the build and pytest of the layernorm module (session 26's host
# change on a GPU).
set -u
LIMIT_S=${LIMIT_S:-590}
T=/tmp/a
mkdir -p $T
source scripts/variant_bench.sh
snapshot() { tar czf $OUT/a.tgz -C /tmp a; }
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  ((LIMIT_S >= 400)) && exec bash docs/runs/2026-12-06-session27-run1/run1.sh
  build_tree
  DFUSE_REQUIRE_CUDA=1 timeout $((LIMIT_S - SECONDS - 10)) python3 -m pytest python/tests/test_layernorm_torch.py \
    -q -rfEs -p no:cacheprovider >$T/pytest_layernorm.log 2>&1
  echo "pytest layernorm rc $? at ${SECONDS}s: $(tail -1 $T/pytest_layernorm.log)"
  snapshot
  exit
fi
build_tree
OPS=()
if ((LIMIT_S < 300)); then
  OPS=(--ops qk_head_layernorm "norm_scale_shift layer_norm affine")
elif ((LIMIT_S < 450)); then
  OPS=(--ops qk_head_layernorm "norm_scale_shift layer_norm affine" "norm_scale_shift layer_norm"
  layernorm_modulate layernorm_folded_modulate scale_residual_norm_scale_shift fp32_layernorm_bf16 rope_rotate_half)
fi
timeout $((LIMIT_S - SECONDS - 15)) python3 bench/torch_bench.py --json $T/torch_bench.json "${OPS[@]}" \
  >$T/torch_bench.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
snapshot
if ((LIMIT_S - SECONDS > 60)); then  # pytest only where a minute or more is left
  DFUSE_CHECK_SKIP=ctest_host,ctest_gpu,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
    DFUSE_CHECK_BUDGET_S=$((LIMIT_S - SECONDS - 10)) scripts/gpu_check.sh $T/check >$T/check.txt 2>&1
  echo "gpu_check (pytest) rc $? at ${SECONDS}s"
  cp build-gpu/logs/pytest_*.log $T/ 2>/dev/null
  snapshot
fi
nvidia-smi --query-gpu=name --format=csv,noheader
grep -c "meets its contract against eager: True, fused kernel ran: True" $T/torch_bench.txt
grep "meets its contract" $T/torch_bench.txt | grep -v "True, fused kernel ran: True" | head
grep -h " passed\| failed\| error" $T/pytest_*.log 2>/dev/null | head -30
python3 bench/compare_runs.py h200=$T/torch_bench.json | tail -75
