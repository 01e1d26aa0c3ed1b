#!/usr/bin/env bash
# Session 17 run 2: rope_rotate_half with two kernels (the tree): groups of 8 heads holding the unit's cos/sin
# over four pairs where the input is large, else groups of 2 with every load of an item issued together (64
# registers); tails load all their heads before storing. Checked (GPU ctest with two new head-group cases,
# pytest rope with the new cases, memcheck and racecheck) and benched against the committed kernel
# (head_kernel.cu.txt) in the same run. Then interleaved_rope_fp64 with rows grouped by 2 instead of 4
# (kGroupRows; fewer registers, more warps for its latency-bound loop): pytest and benches.
set -u
R=docs/runs/2026-12-04-session17-run2
mkdir -p /tmp/r2
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,torch_bench,dfuse_verify \
DFUSE_SANITIZER_FILTER='*Rope*' DFUSE_PYTEST_MODULES="$P/test_rope_torch.py" \
DFUSE_BENCH_OPS=rope_rotate_half,interleaved_rope_fp64 DFUSE_CHECK_BUDGET_S=330 \
  scripts/gpu_check.sh /tmp/r2 >/tmp/r2/check.txt 2>&1
echo "gpu_check rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
bench() {  # $1: label, $2: op
  timeout 60 python3 bench/torch_bench.py --json /tmp/r2/tb_$1.json --ops $2 >/tmp/r2/tb_$1.txt 2>&1
  timeout 60 build-gpu/dfuse bench --op $2 --json /tmp/r2/db_$1.json >/tmp/r2/db_$1.txt 2>&1
  echo "bench $1 rc $?"
}
rebuild() { timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >/tmp/r2/build_$1.log 2>&1; echo "build $1 rc $?"; }
bench G rope_rotate_half
bench I4 interleaved_rope_fp64
cp src/ops/rope/rope_rotate_half.cu /tmp/r2/variant_G.cu
cp $R/head_kernel.cu.txt src/ops/rope/rope_rotate_half.cu; rebuild HEAD
bench HEAD rope_rotate_half
cp /tmp/r2/variant_G.cu src/ops/rope/rope_rotate_half.cu
cp src/ops/rope/rope_row_groups.cuh /tmp/r2/row_groups.cuh
sed -i 's/constexpr int kGroupRows = 4;/constexpr int kGroupRows = 2;/' src/ops/rope/rope_row_groups.cuh
grep -n "kGroupRows = " src/ops/rope/rope_row_groups.cuh; rebuild I2
timeout 90 python3 -m pytest -q -x $P/test_rope_torch.py -k interleaved_rope_fp64 >/tmp/r2/pytest_I2.log 2>&1; echo "pytest I2 rc $?"
bench I2 interleaved_rope_fp64
cp /tmp/r2/row_groups.cuh src/ops/rope/rope_row_groups.cuh
cp build-gpu/logs/*.log /tmp/r2/ 2>/dev/null
for f in /tmp/r2/*; do [[ -f $f && $(stat -c %s "$f") -gt 100000 ]] && gzip "$f"; done
tar czf $OUT/r2.tgz -C /tmp r2
tail -17 /tmp/r2/summary.md
grep -h "passed\|failed\|error" /tmp/r2/pytest_*.log | tail -4
grep -h "ERROR SUMMARY" /tmp/r2/memcheck.log /tmp/r2/racecheck.log | tail -2
grep -hE "meets its contract" /tmp/r2/tb_*.txt | sort | uniq -c
for f in G HEAD I4 I2; do echo "== $f"; grep -hE "^\| [a-z_].* \| (dfuse|compile) \|" /tmp/r2/tb_$f.txt | awk -F'|' '{print $3,$4,$5,$7,$11}'; done
python3 - <<'PY'
import json
def load(k): return json.load(open(f'/tmp/r2/db_{k}.json'))['results']
for a, b, an, bn in (('G', 'HEAD', 'G', 'HEAD'), ('I4', 'I2', 'rows4', 'rows2')):
    for x, y in zip(load(a), load(b)):
        print(f"{x['case'][:44]:44s} {an} {x['fused_us']:7.1f} ({x['fused_percent_of_copy']:4.1f}%) {bn} {y['fused_us']:7.1f} ({y['fused_percent_of_copy']:4.1f}%)")
PY
