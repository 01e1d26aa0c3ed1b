#!/usr/bin/env bash
# Session 15 run 2: rows held in registers for the LayerNorm statistics of fp32_layernorm_bf16 and
# norm_scale_shift (the vectorized block's chunks, as layernorm_modulate), and for the RMSNorm rows of the
# decomposed and storage-dtype means (rmsnorm_scale, rmsnorm_tanh_residual, rmsnorm_decomposed_scale_shift:
# one 32-bit word per Reduce.cuh vector and thread). Tests, sanitizers, verify, both benchmarks.
set -u
mkdir -p /tmp/r2
P=python/tests
OPS=fp32_layernorm_bf16,norm_scale_shift,layernorm_modulate,layernorm_folded_modulate,rmsnorm_scale,rmsnorm_tanh_residual,rmsnorm_decomposed_scale_shift,rmsnorm_scale_shift,rmsnorm_modulate_fp32
DFUSE_CHECK_SKIP=python_deps,ctest_host,torch_bench \
DFUSE_SANITIZER_FILTER='*RmsNorm*:*NormFp32*:*Layernorm*' \
DFUSE_PYTEST_MODULES="$P/test_layernorm_torch.py $P/test_norm_fp32_torch.py $P/test_rmsnorm_torch.py" \
DFUSE_BENCH_OPS=$OPS DFUSE_CHECK_BUDGET_S=330 scripts/gpu_check.sh /tmp/r2 >/tmp/r2_check.txt 2>&1
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 170 python3 bench/torch_bench.py --json /tmp/r2/tb.json --ops fp32_layernorm_bf16 layernorm_modulate \
  rmsnorm_scale rmsnorm_tanh_residual rmsnorm_decomposed_scale_shift rmsnorm_scale_shift rmsnorm_modulate_fp32 \
  "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" >/tmp/r2/tb.txt 2>&1
echo "torch_bench rc $?"
cp /tmp/r2_check.txt /tmp/r2/; cp build-gpu/logs/*.log /tmp/r2/ 2>/dev/null
tar czf $OUT/r2.tgz -C /tmp r2
tail -22 /tmp/r2/summary.md
grep -h "passed\|failed" /tmp/r2/pytest_*.log | tail -5
grep -E "meets its contract" /tmp/r2/tb.txt | grep -v "True, fused kernel ran: True" | head
grep -E "^\| [a-z_].* \| dfuse \|" /tmp/r2/tb.txt | awk -F'|' '{print $2,$3,$5,$7,$8,$11}'
