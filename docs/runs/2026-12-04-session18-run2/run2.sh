#!/usr/bin/env bash
# Session 18 run 2: the tree's rope_rotate_half, whose 8-head kernel keeps the pairs' loop rolled for fp32 opmath
# (run 1's H1) and unrolled for the storage dtype (the committed G); cuobjdump here showed each kernel's SASS
# identical to the one it was taken from. Checked (GPU ctest, pytest rope with the odd-head-group case now in
# both maths, memcheck, racecheck) and benched (dfuse bench, torch_bench beside torch.compile).
set -u
mkdir -p /tmp/r2
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,dfuse_verify DFUSE_TORCH_BENCH_OPS="rope_rotate_half interleaved_rope_fp64" \
DFUSE_SANITIZER_FILTER='*Rope*' DFUSE_PYTEST_MODULES="$P/test_rope_torch.py" \
DFUSE_BENCH_OPS=rope_rotate_half DFUSE_CHECK_BUDGET_S=400 \
  scripts/gpu_check.sh /tmp/r2 >/tmp/r2/check.txt 2>&1
echo "gpu_check rc $?"
cp build-gpu/logs/*.log /tmp/r2/ 2>/dev/null
for f in /tmp/r2/*; do [[ -f $f && $(stat -c %s "$f") -gt 100000 ]] && gzip "$f"; done
tar czf $OUT/r2.tgz -C /tmp r2
tail -17 /tmp/r2/summary.md
grep -h "passed\|failed\|error" /tmp/r2/pytest*.log | tail -3
grep -h "ERROR SUMMARY" /tmp/r2/memcheck.log /tmp/r2/racecheck.log | tail -2
grep -hE "meets its contract" /tmp/r2/*.txt /tmp/r2/*.log 2>/dev/null | sort | uniq -c
grep -hE "^\| [a-z_].* \| (dfuse|compile) \|" /tmp/r2/*.txt /tmp/r2/*.log 2>/dev/null | awk -F'|' '{print $2,$3,$4,$5,$7,$11}'
grep -h "rope_rotate_half " /tmp/r2/dfuse_bench.log | awk '{print $2,$3,$4,$5,$6,$11,$12}' | head -14
