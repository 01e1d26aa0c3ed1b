#!/usr/bin/env bash
# Session 16 run 3: rope_rotate_half with two heads of a token per item when the tables do not vary over the heads
# (cos/sin vectors loaded once for both). Checks, torch_bench beside compile, then the committed kernel (HEAD)
# rebuilt and benched in the same run. head_kernel.cu.txt was `git show 077f873:src/ops/rope/rope_rotate_half.cu`
# (removed after the run); changed_kernel.cu is the kernel committed with this run.
set -u
mkdir -p /tmp/r3
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,torch_bench,dfuse_verify \
DFUSE_SANITIZER_FILTER='*Rope*' DFUSE_PYTEST_MODULES="$P/test_rope_torch.py" \
DFUSE_BENCH_OPS=rope_rotate_half DFUSE_CHECK_BUDGET_S=300 scripts/gpu_check.sh /tmp/r3 >/tmp/r3_check.txt 2>&1
echo "gpu_check rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 60 python3 bench/torch_bench.py --json /tmp/r3/tb.json --ops rope_rotate_half >/tmp/r3/tb.txt 2>&1
echo "torch_bench rc $?"
cp src/ops/rope/rope_rotate_half.cu /tmp/r3/changed_kernel.cu
cp docs/runs/2026-12-04-session16-run3/head_kernel.cu.txt src/ops/rope/rope_rotate_half.cu
timeout 100 cmake --build build-gpu --target dfuse_cuda -j16 >/tmp/r3/head_build.log 2>&1 && \
timeout 60 python3 bench/torch_bench.py --json /tmp/r3/tb_head.json --ops rope_rotate_half >/tmp/r3/tb_head.txt 2>&1
echo "head variant rc $?"
cp /tmp/r3/changed_kernel.cu src/ops/rope/rope_rotate_half.cu
cp /tmp/r3_check.txt /tmp/r3/; cp build-gpu/logs/*.log /tmp/r3/ 2>/dev/null
tar czf $OUT/r3.tgz -C /tmp r3
tail -14 /tmp/r3/summary.md
grep -h "passed\|failed\|error" /tmp/r3/pytest_*.log | tail -5
grep -h "ERROR SUMMARY" /tmp/r3/memcheck.log /tmp/r3/racecheck.log | tail -2
grep -hE "meets its contract" /tmp/r3/tb.txt /tmp/r3/tb_head.txt | head
for f in tb tb_head; do echo "== $f"; grep -hE "^\| [a-z_].* \| (dfuse|compile) \|" /tmp/r3/$f.txt | awk -F'|' '{print $2,$3,$4,$5,$7,$8,$11}'; done
