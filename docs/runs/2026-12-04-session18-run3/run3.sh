#!/usr/bin/env bash
# Session 18 run 3: where the RoPE family and the elementwise ops stand on this tree: torch_bench (each torch op
# beside torch.compile of its model chain and a copy, contracts checked against eager), a call per family so a
# timeout loses one only (the norm kernels are unchanged since session 16's runs). First rot_split.py: where
# rope_rotate_half's storage-dtype rot 64 case spends its time.
set -u
mkdir -p /tmp/r3
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
  DFUSE_CHECK_BUDGET_S=200 scripts/gpu_check.sh /tmp/r3 >/tmp/r3/check.txt 2>&1
echo "build rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 60 python3 docs/runs/2026-12-04-session18-run3/rot_split.py >/tmp/r3/rot_split.txt 2>&1; echo "rot_split rc $?"
tb() {  # $1: label, $2: seconds, rest: ops
  local label=$1 limit=$2; shift 2
  timeout "$limit" python3 bench/torch_bench.py --json /tmp/r3/tb_$label.json --ops "$@" >/tmp/r3/tb_$label.txt 2>&1
  echo "torch_bench $label rc $?"
}
tb rope 150 rope_rotate_half rope_interleaved_pairs fused_qknorm_rope fused_inplace_qknorm_rope qwen_qkv_epilogue \
  hunyuan_qkv_rope_pack flux2_qkv_epilogue flux2_strided_qknorm_rope ltx2_qknorm_split_rope ltx25_decoder_rope \
  helios_qk_rope interleaved_rope_fp64
tb elementwise 90 modulate_scale_shift residual_gate_add silu_mul "silu_mul packed" bias_silu bias_glu gelu_tanh_cat \
  linear_gelu_tanh
tar czf $OUT/r3.tgz -C /tmp r3
cat /tmp/r3/rot_split.txt
grep -hE "meets its contract|within" /tmp/r3/tb_*.txt | grep -v "True, fused kernel ran: True" | head -20
grep -hcE "meets its contract" /tmp/r3/tb_*.txt
grep -hE "^\| [a-z_].* \| dfuse \|" /tmp/r3/tb_*.txt | awk -F'|' '{print $2,$3,$5,$7,$8,$11}'
