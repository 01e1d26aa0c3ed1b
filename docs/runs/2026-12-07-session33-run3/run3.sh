#!/usr/bin/env bash
# Session 33 run 3: with the session's last ~330 s of device time, the H200 rows of #3 / #4 not measured there
# since the staged-row alignment (d5f9bb6): gpu_check's build, then torch_bench of the QK-norm + RoPE head-group ops,
# the RMSNorm rows whose staging changed and the two table ops, as many as LIMIT_S allows. On any other GPU it
# stops at once (an H100's rows were measured in run 2), leaving the time for another try.
set -u
LIMIT_S=${LIMIT_S:-220}
nvidia-smi --query-gpu=name --format=csv,noheader
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || exit 3
T=/tmp/h200
source scripts/variant_bench.sh
build_tree
timeout $(($(left) - 10)) python3 bench/torch_bench.py --json "$T/tb_h200.json" --ops fused_qknorm_rope \
  fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue rmsnorm_scale \
  rmsnorm_decomposed_scale_shift rmsnorm_modulate_fp32 temb_table_slices ltx2_ada_values >"$T/tb_h200.txt" 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
snapshot
contract_summary $T/tb_h200.txt
grep -h "copy bandwidth" $T/tb_h200.txt
grep "dfuse |" $T/tb_h200.txt | awk -F'|' '{print $2,$3,$5,$7,$10}'
