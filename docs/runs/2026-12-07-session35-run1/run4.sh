#!/usr/bin/env bash
# Session 35 run 4 (carry nothing), for the last ~300 s of device time: only on an H200 (any other card exits at
# once), the build and torch_bench of six ops whose kernels changed since their last H200 numbers or whose H200
# rows fell short of torch.compile: qk_rmsnorm (session 34's grid), rope_rotate_half (the flat form at Wan 2.1),
# the two QK-norm + RoPE rows (last on an H200 in session 22), temb_table_slices and ltx2_ada_values (0.975x /
# 0.955x there in session 22).
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $card"
[[ $card == *H200* ]] || exit 0
LIMIT_S=${LIMIT_S:-215}
T=/tmp/h200
source scripts/variant_bench.sh
build_tree
timeout $(($(left) - 10)) python3 bench/torch_bench.py --json $T/tb_h200.json --ops qk_rmsnorm rope_rotate_half \
  fused_qknorm_rope fused_inplace_qknorm_rope temb_table_slices ltx2_ada_values >$T/tb_h200.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
snapshot
grep -h "copy bandwidth" $T/tb_h200.txt
contract_summary $T/tb_h200.txt
