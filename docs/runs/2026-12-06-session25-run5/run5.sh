#!/usr/bin/env bash
# Session 25 run 5 (H100): rope_rotate_half's kernels bounded to four blocks of 256 per SM ("b4": the 8-head
# fp32-opmath kernel 74 -> 64 registers with 48 bytes spilled; the two-head kernel already at 64). Run 4's ncu at
# Wan 2.1 put the tree's kernel at 37% warps active against torch.compile's 67%, DRAM 85% against 88%.
# Prediction: Wan 2.1 ~583 -> ~565 us, FLUX.1 unchanged. Bitwise checks by torch_bench's contract column only
# (the device time left); pytest of the rope module before any such change is kept.
set -u
R=docs/runs/2026-12-06-session25-run5
T=/tmp/r5
mkdir -p $T
source scripts/variant_bench.sh
build_tree
bench tree rope_rotate_half
swap src/ops/rope/rope_rotate_half.cu $R/rope_rotate_half_b4.cu.txt b4 rope_rotate_half
tar czf $OUT/r5.tgz -C /tmp r5
nvidia-smi --query-gpu=name --format=csv,noheader
grep -h "mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head
python3 bench/compare_runs.py tree=$T/tb_tree.json b4=$T/tb_b4.json
