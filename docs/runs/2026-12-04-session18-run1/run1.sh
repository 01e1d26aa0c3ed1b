#!/usr/bin/env bash
# Session 18 run 1: rope_rotate_half's 8-head kernel with its pair loop kept rolled (`#pragma unroll 1`, the
# tree: 72-82 registers, the unit's table vectors loaded once before the loop, as in run 1's variant A) against
# the committed kernel (G_kernel.cu.txt: four pairs unrolled, table loads split by the scheduler) and run 1's
# variant A (../2026-12-04-session17-run1/variant_A.cu.txt), all in this run; the tree checked (GPU ctest, pytest
# rope, memcheck, racecheck). Then interleaved_rope_fp64 with __launch_bounds__(256, 4) (80 -> 64 registers,
# 64-byte spill; interleaved_bound4.cu.txt) against the committed kernel.
set -u
R=docs/runs/2026-12-04-session18-run1
mkdir -p /tmp/r1
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,torch_bench,dfuse_verify \
DFUSE_SANITIZER_FILTER='*Rope*' DFUSE_PYTEST_MODULES="$P/test_rope_torch.py" \
DFUSE_BENCH_OPS=rope_rotate_half,interleaved_rope_fp64 DFUSE_CHECK_BUDGET_S=330 \
  scripts/gpu_check.sh /tmp/r1 >/tmp/r1/check.txt 2>&1
echo "gpu_check rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
bench() {  # $1: label, $2: op
  timeout 60 python3 bench/torch_bench.py --json /tmp/r1/tb_$1.json --ops $2 >/tmp/r1/tb_$1.txt 2>&1
  timeout 60 build-gpu/dfuse bench --op $2 --json /tmp/r1/db_$1.json >/tmp/r1/db_$1.txt 2>&1
  echo "bench $1 rc $?"
}
rebuild() { timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >/tmp/r1/build_$1.log 2>&1; echo "build $1 rc $?"; }
K=src/ops/rope/rope_rotate_half.cu
bench H1 rope_rotate_half
bench I4 interleaved_rope_fp64
cp $K /tmp/r1/variant_H1.cu
cp $R/G_kernel.cu.txt $K; rebuild G
bench G rope_rotate_half
cp docs/runs/2026-12-04-session17-run1/variant_A.cu.txt $K; rebuild A
bench A rope_rotate_half
cp /tmp/r1/variant_H1.cu $K
I=src/ops/rope/interleaved_rope_fp64.cu
cp $I /tmp/r1/interleaved_tree.cu
cp $R/interleaved_bound4.cu.txt $I; rebuild B4
timeout 90 python3 -m pytest -q -x $P/test_rope_torch.py -k interleaved_rope_fp64 >/tmp/r1/pytest_B4.log 2>&1; echo "pytest B4 rc $?"
bench B4 interleaved_rope_fp64
cp /tmp/r1/interleaved_tree.cu $I
rm -f /tmp/r1/variant_H1.cu /tmp/r1/interleaved_tree.cu
cp build-gpu/logs/*.log /tmp/r1/ 2>/dev/null
for f in /tmp/r1/*; do [[ -f $f && $(stat -c %s "$f") -gt 100000 ]] && gzip "$f"; done
tar czf $OUT/r1.tgz -C /tmp r1
tail -17 /tmp/r1/summary.md
grep -h "passed\|failed\|error" /tmp/r1/pytest_*.log | tail -4
grep -h "ERROR SUMMARY" /tmp/r1/memcheck.log /tmp/r1/racecheck.log | tail -2
grep -hE "meets its contract" /tmp/r1/tb_*.txt | sort | uniq -c
for f in H1 G A I4 B4; do echo "== $f"; grep -hE "^\| [a-z_].* \| (dfuse|compile) \|" /tmp/r1/tb_$f.txt | awk -F'|' '{print $3,$4,$5,$7,$11}'; done
python3 - <<'PY'
import json
def load(k): return json.load(open(f'/tmp/r1/db_{k}.json'))['results']
for a, others in (('H1', ('G', 'A')), ('I4', ('B4',))):
    rows = [load(a)] + [load(o) for o in others]
    for xs in zip(*rows):
        print(f"{xs[0]['case'][:44]:44s} " + " ".join(f"{n} {x['fused_us']:7.1f} ({x['fused_percent_of_copy']:4.1f}%)" for n, x in zip((a,) + others, xs)))
PY
