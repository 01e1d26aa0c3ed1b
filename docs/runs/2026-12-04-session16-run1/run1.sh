#!/usr/bin/env bash
# Session 16 run 1: re-verify bed2b59 (qk_head_layernorm's half-warp kernel with compile-time affine presence),
# whose session 15 run 5 logs were lost: GPU ctest, the LayerNorm torch tests, memcheck on the LayerNorm and
# fp32-norm suites, and the LayerNorm torch_bench rows side by side with eager, torch.compile and a copy.
set -u
mkdir -p /tmp/r1
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,racecheck,torch_bench \
DFUSE_SANITIZER_FILTER='*Layernorm*:*NormFp32*' \
DFUSE_PYTEST_MODULES="$P/test_layernorm_torch.py $P/test_norm_fp32_torch.py" \
DFUSE_BENCH_OPS=qk_head_layernorm,fp32_layernorm_bf16,norm_scale_shift DFUSE_CHECK_BUDGET_S=330 \
  scripts/gpu_check.sh /tmp/r1 >/tmp/r1_check.txt 2>&1
echo "gpu_check rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 150 python3 bench/torch_bench.py --json /tmp/r1/tb.json --ops qk_head_layernorm fp32_layernorm_bf16 \
  "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" >/tmp/r1/tb.txt 2>&1
echo "torch_bench rc $?"
cp /tmp/r1_check.txt /tmp/r1/; cp build-gpu/logs/*.log /tmp/r1/ 2>/dev/null
tar czf $OUT/r1.tgz -C /tmp r1
tail -16 /tmp/r1/summary.md
grep -h "passed\|failed" /tmp/r1/pytest_*.log | tail -5
grep -hE "meets its contract" /tmp/r1/tb.txt | grep -v "True, fused kernel ran: True" | head
grep -hE "^\| [a-z_].* \| (dfuse|compile) \|" /tmp/r1/tb.txt | awk -F'|' '{print $2,$3,$4,$5,$7,$8,$11}'
