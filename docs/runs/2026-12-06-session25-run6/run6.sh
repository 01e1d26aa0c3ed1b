#!/usr/bin/env bash
# Session 25 run 6: the card decides. On an H200: torch_bench of the ops whose kernels sessions 23-24 changed (the
# LayerNorm rows; not yet measured there) and modulate_scale_shift. On an H100: run 5 (rope_rotate_half
# bounded to four blocks per SM beside the tree).
set -u
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash docs/runs/2026-12-06-session25-run5/run5.sh
fi
T=/tmp/r6
mkdir -p $T
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_BUDGET_S=150 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check (build) rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 120 python3 bench/torch_bench.py --json $T/torch_bench.json --ops modulate_scale_shift layernorm_modulate \
  layernorm_folded_modulate "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" \
  scale_residual_norm_scale_shift fp32_layernorm_bf16 qk_head_layernorm >$T/torch_bench.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
tar czf $OUT/r6.tgz -C /tmp r6
nvidia-smi --query-gpu=name --format=csv,noheader
grep -c "meets its contract against eager: True, fused kernel ran: True" $T/torch_bench.txt
grep "meets its contract" $T/torch_bench.txt | grep -v "True, fused kernel ran: True" | head
python3 bench/compare_runs.py h200=$T/torch_bench.json
