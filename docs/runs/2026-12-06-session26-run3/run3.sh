#!/usr/bin/env bash
# Session 26 run 3: the card decides. On an H200: run 1's H200 branch (the acceptance check, part 1).
# On an H100: rope_rotate_half's flat form (torch.compile's layout: one head's vector per thread, no grid stride,
# every table vector its own load), for 16-bit x with fp32 opmath above 2^20 elements, beside the tree:
# "flat8" 8 bytes of x per vector (30 registers, full occupancy), "flat16" 16 bytes. Session 25 run 4's ncu put the
# tree's 8-head kernel at 37% warps active (74 registers) against the Triton kernel's 67% at Wan 2.1, the same bytes.
# Prediction: flat8 at Wan 2.1 ~574 -> ~550 us on the H100 (torch.compile 541); FLUX.1 within 1 us.
# Bitwise checks by torch_bench's contract column (model shapes).
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash docs/runs/2026-12-06-session26-run1/run1.sh
fi
R=docs/runs/2026-12-06-session26-run3
T=/tmp/r3
mkdir -p $T
source scripts/variant_bench.sh
build_tree
bench tree rope_rotate_half
swap src/ops/rope/rope_rotate_half.cu $R/rope_rotate_half_flat8.cu.txt flat8 rope_rotate_half
swap src/ops/rope/rope_rotate_half.cu $R/rope_rotate_half_flat16.cu.txt flat16 rope_rotate_half
bench tree2 rope_rotate_half
tar czf $OUT/r3.tgz -C /tmp r3
nvidia-smi --query-gpu=name --format=csv,noheader
grep -h "meets its contract" $T/tb_*.txt | sort | uniq -c | head
python3 bench/compare_runs.py tree=$T/tb_tree.json flat8=$T/tb_flat8.json flat16=$T/tb_flat16.json tree2=$T/tb_tree2.json
