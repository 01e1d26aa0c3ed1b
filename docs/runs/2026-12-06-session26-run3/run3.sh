#!/usr/bin/env bash
# Session 26 run 3: rope_rotate_half's flat form (torch.compile's layout: one head's vector per thread, no grid
# stride, every table vector its own load), for 16-bit x with fp32 opmath above 2^20 elements, beside the tree:
# "flat8" 8 bytes of x per vector (30 registers, full occupancy), "flat16" 16 bytes (46 registers). Session 25
# run 4's ncu put the tree's 8-head kernel at 37% warps active (74 registers) against the Triton kernel's 67% at
# Wan 2.1 on the H100, the same bytes.
# Prediction: on an H100 flat8 at Wan 2.1 ~574 -> ~550 us (torch.compile 541), FLUX.1 within 1 us; on an H200 no
# better than the tree (its 8-head groups gained 427 -> 403 us there, session 17).
# Bitwise checks here by torch_bench's contract column (model shapes). Cut to what the device time left allows.
set -u
R=docs/runs/2026-12-06-session26-run3
T=/tmp/r3
mkdir -p $T
source scripts/variant_bench.sh
snapshot() { tar czf $OUT/r3.tgz -C /tmp r3; }  # after every step: a call cut short still returns what ran
build_tree
OPS=(rope_rotate_half)
# On an H200, the two rows that were issue-bound there (session 22), whose kernels sessions 23-24 changed.
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 &&
  OPS+=(qk_head_layernorm "norm_scale_shift layer_norm affine")
bench tree "${OPS[@]}"
snapshot
swap src/ops/rope/rope_rotate_half.cu $R/rope_rotate_half_flat8.cu.txt flat8 rope_rotate_half
snapshot
if ((SECONDS < 150)); then  # as long as the device time left allows
  swap src/ops/rope/rope_rotate_half.cu $R/rope_rotate_half_flat16.cu.txt flat16 rope_rotate_half
  snapshot
fi
nvidia-smi --query-gpu=name --format=csv,noheader
grep -h "meets its contract" $T/tb_*.txt | sed 's/^[^:]*: //' | sort | uniq -c
python3 bench/compare_runs.py tree=$T/tb_tree.json flat8=$T/tb_flat8.json flat16=$T/tb_flat16.json
