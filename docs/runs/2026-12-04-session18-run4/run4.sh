#!/usr/bin/env bash
# Session 18 run 4: rope_rotate_half with the rotary items and the tail's copies in two ranges (the tree), after
# run 3's rot_split.py showed partial rotary slower than full in both maths (warps holding both kinds of item ran
# both paths in turn). Checked (pytest rope, memcheck, racecheck over the Rope GPU tests) and benched (dfuse bench,
# rot_split.py) against the committed kernel (head_kernel.cu.txt) in this run.
set -u
R=docs/runs/2026-12-04-session18-run4
mkdir -p /tmp/r4
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,torch_bench,dfuse_verify \
DFUSE_SANITIZER_FILTER='*Rope*' DFUSE_PYTEST_MODULES="$P/test_rope_torch.py" \
DFUSE_BENCH_OPS=rope_rotate_half DFUSE_CHECK_BUDGET_S=300 \
  scripts/gpu_check.sh /tmp/r4 >/tmp/r4/check.txt 2>&1
echo "gpu_check rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 40 python3 docs/runs/2026-12-04-session18-run3/rot_split.py >/tmp/r4/rot_split_ranges.txt 2>&1
K=src/ops/rope/rope_rotate_half.cu
cp $K /tmp/r4_tree.cu
cp $R/head_kernel.cu.txt $K
timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >/tmp/r4/build_HEAD.log 2>&1; echo "build HEAD rc $?"
timeout 40 python3 docs/runs/2026-12-04-session18-run3/rot_split.py >/tmp/r4/rot_split_head.txt 2>&1
timeout 60 build-gpu/dfuse bench --op rope_rotate_half --json /tmp/r4/db_HEAD.json >/tmp/r4/db_HEAD.txt 2>&1
cp /tmp/r4_tree.cu $K
cp build-gpu/logs/*.log /tmp/r4/ 2>/dev/null
for f in /tmp/r4/*; do [[ -f $f && $(stat -c %s "$f") -gt 100000 ]] && gzip "$f"; done
tar czf $OUT/r4.tgz -C /tmp r4
tail -16 /tmp/r4/summary.md
grep -h "passed\|failed\|error" /tmp/r4/pytest*.log | tail -2
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" /tmp/r4/memcheck.log /tmp/r4/racecheck.log | sort | uniq -c
echo "== ranges"; cat /tmp/r4/rot_split_ranges.txt; echo "== HEAD"; cat /tmp/r4/rot_split_head.txt
python3 - <<'PY'
import json
a = json.load(open('/tmp/r4/dfuse_bench_rope_rotate_half.json'))['results']
b = json.load(open('/tmp/r4/db_HEAD.json'))['results']
for x, y in zip(a, b):
    print(f"{x['case'][:40]:40s} ranges {x['fused_us']:7.1f} ({x['fused_percent_of_copy']:4.1f}%) HEAD {y['fused_us']:7.1f} ({y['fused_percent_of_copy']:4.1f}%)")
PY
