#!/usr/bin/env bash
# Session 16 run 2: norm_scale_shift's cached LayerNorm kernel made persistent (grid = resident blocks, each keeps
# its weight and bias chunks in registers across the rows it normalizes). Checks and the same torch_bench rows.
set -u
mkdir -p /tmp/r2
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,racecheck,torch_bench,dfuse_verify \
DFUSE_SANITIZER_FILTER='*NormFp32*' DFUSE_PYTEST_MODULES="$P/test_norm_fp32_torch.py" \
DFUSE_BENCH_OPS=norm_scale_shift DFUSE_CHECK_BUDGET_S=300 scripts/gpu_check.sh /tmp/r2 >/tmp/r2_check.txt 2>&1
echo "gpu_check rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 100 python3 bench/torch_bench.py --json /tmp/r2/tb.json --ops "norm_scale_shift layer_norm" \
  "norm_scale_shift layer_norm affine" >/tmp/r2/tb.txt 2>&1
echo "torch_bench rc $?"
cp /tmp/r2_check.txt /tmp/r2/; cp build-gpu/logs/*.log /tmp/r2/ 2>/dev/null
tar czf $OUT/r2.tgz -C /tmp r2
tail -14 /tmp/r2/summary.md
grep -h "passed\|failed\|error" /tmp/r2/pytest_*.log | tail -5
grep -h "ERROR SUMMARY" /tmp/r2/memcheck.log | tail -1
grep -hE "meets its contract" /tmp/r2/tb.txt | head
grep -hE "^\| [a-z_].* \| (dfuse|compile) \|" /tmp/r2/tb.txt | awk -F'|' '{print $2,$3,$4,$5,$7,$8,$11}'
grep -h "error" /tmp/r2/build*.log | head -5
