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
source scripts/variant_bench.sh
build_tree
cp build-gpu/logs/*.log $T/ 2>/dev/null
bench h200 modulate_scale_shift layernorm_modulate layernorm_folded_modulate "norm_scale_shift layer_norm" \
  "norm_scale_shift layer_norm affine" scale_residual_norm_scale_shift fp32_layernorm_bf16 qk_head_layernorm
tar czf $OUT/r6.tgz -C /tmp r6
nvidia-smi --query-gpu=name --format=csv,noheader
grep -c "meets its contract against eager: True, fused kernel ran: True" $T/tb_h200.txt
grep "meets its contract" $T/tb_h200.txt | grep -v "True, fused kernel ran: True" | head
python3 bench/compare_runs.py h200=$T/tb_h200.json
