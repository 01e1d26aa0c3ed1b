#!/usr/bin/env bash
# Session 16 run 4: run 3's head pairs with __launch_bounds__(256, 4) on the two-head kernel (68 -> 64 registers,
# 3 -> 4 blocks per SM; ptxas here: no spills for bf16/f16 with fp32 tables, 44 bytes for f16 storage-dtype).
# Checks, both benches, then the committed kernel (3872bce, head_kernel.cu.txt, removed after the run) rebuilt
# and benched in the same run; changed_kernel.cu is the variant.
set -u
mkdir -p /tmp/r4
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,racecheck,torch_bench,dfuse_verify \
DFUSE_SANITIZER_FILTER='*Rope*' DFUSE_PYTEST_MODULES="$P/test_rope_torch.py" \
DFUSE_BENCH_OPS=rope_rotate_half DFUSE_CHECK_BUDGET_S=300 scripts/gpu_check.sh /tmp/r4 >/tmp/r4_check.txt 2>&1
echo "gpu_check rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 60 python3 bench/torch_bench.py --json /tmp/r4/tb.json --ops rope_rotate_half >/tmp/r4/tb.txt 2>&1
echo "torch_bench rc $?"
cp src/ops/rope/rope_rotate_half.cu /tmp/r4/changed_kernel.cu
cp docs/runs/2026-12-04-session16-run4/head_kernel.cu.txt src/ops/rope/rope_rotate_half.cu
timeout 100 cmake --build build-gpu --target dfuse_cuda -j16 >/tmp/r4/head_build.log 2>&1 && \
timeout 60 python3 bench/torch_bench.py --json /tmp/r4/tb_head.json --ops rope_rotate_half >/tmp/r4/tb_head.txt 2>&1 && \
timeout 60 build-gpu/dfuse bench --op rope_rotate_half --json /tmp/r4/head_dfuse_bench.json >/tmp/r4/head_dfuse_bench.txt 2>&1
echo "head variant rc $?"
cp /tmp/r4/changed_kernel.cu src/ops/rope/rope_rotate_half.cu
cp /tmp/r4_check.txt /tmp/r4/; cp build-gpu/logs/*.log /tmp/r4/ 2>/dev/null
tar czf $OUT/r4.tgz -C /tmp r4
tail -14 /tmp/r4/summary.md
grep -h "passed\|failed\|error" /tmp/r4/pytest_*.log | tail -5
grep -h "ERROR SUMMARY" /tmp/r4/memcheck.log /tmp/r4/racecheck.log | tail -2
grep -hE "meets its contract" /tmp/r4/tb.txt /tmp/r4/tb_head.txt | head
for f in tb tb_head; do echo "== $f"; grep -hE "^\| [a-z_].* \| (dfuse|compile) \|" /tmp/r4/$f.txt | awk -F'|' '{print $2,$3,$4,$5,$7,$8,$11}'; done
python3 - <<'PY'
import json
a = json.load(open('/tmp/r4/dfuse_bench_rope_rotate_half.json'))['results']
b = json.load(open('/tmp/r4/head_dfuse_bench.json'))['results']
for x, y in zip(a, b):
    print(f"{x['case']:40s} variant {x['fused_us']:8.1f} us ({x['fused_percent_of_copy']:.1f}%)  committed {y['fused_us']:8.1f} us")
PY
