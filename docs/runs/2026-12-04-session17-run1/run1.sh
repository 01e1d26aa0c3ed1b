#!/usr/bin/env bash
# Session 17 run 1: rope_rotate_half walking groups of up to 8 heads per item with the unit's cos/sin held
# (variant A, the tree: 80 registers, 3 blocks per SM; B: bound4_kernel.cu.txt, __launch_bounds__(256, 4):
# 64 registers with 12-76 bytes of spills) against the committed two-head kernel (head_kernel.cu.txt), all
# measured in this run; then ncu sections of the rope kernels short of #4's targets beside torch.compile's.
set -u
R=docs/runs/2026-12-04-session17-run1
mkdir -p /tmp/r1
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,torch_bench,dfuse_verify \
DFUSE_SANITIZER_FILTER='*Rope*' DFUSE_PYTEST_MODULES="$P/test_rope_torch.py" \
DFUSE_BENCH_OPS=rope_rotate_half DFUSE_CHECK_BUDGET_S=330 scripts/gpu_check.sh /tmp/r1 >/tmp/r1/check.txt 2>&1
echo "gpu_check rc $?"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
bench() {  # $1: label
  timeout 60 python3 bench/torch_bench.py --json /tmp/r1/tb_$1.json --ops rope_rotate_half >/tmp/r1/tb_$1.txt 2>&1
  timeout 60 build-gpu/dfuse bench --op rope_rotate_half --json /tmp/r1/db_$1.json >/tmp/r1/db_$1.txt 2>&1
  echo "bench $1 rc $?"
}
bench A
cp src/ops/rope/rope_rotate_half.cu /tmp/r1/variant_A.cu
swap() {  # $1: label, $2: kernel source
  cp $2 src/ops/rope/rope_rotate_half.cu
  timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >/tmp/r1/build_$1.log 2>&1; echo "build $1 rc $?"
}
swap B $R/bound4_kernel.cu.txt
timeout 90 python3 -m pytest -q -x $P/test_rope_torch.py -k rotate_half >/tmp/r1/pytest_B.log 2>&1; echo "pytest B rc $?"
bench B
swap HEAD $R/head_kernel.cu.txt
bench HEAD
cp /tmp/r1/variant_A.cu src/ops/rope/rope_rotate_half.cu
timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >/tmp/r1/build_A_again.log 2>&1
timeout 200 ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats \
  --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats \
  --section MemoryWorkloadAnalysis --log-file /tmp/r1/ncu_sections.txt \
  python3 bench/kernel_profile.py --calls 1 --ops rope_rotate_half interleaved_rope_fp64 ltx2_qknorm_split_rope \
  --shapes Wan2.1-14B SANA-Video-480p LTX-2 >/tmp/r1/ncu.log 2>&1; echo "ncu rc $?"
cp build-gpu/logs/*.log /tmp/r1/ 2>/dev/null
for f in /tmp/r1/*; do [[ -f $f && $(stat -c %s "$f") -gt 100000 ]] && gzip "$f"; done
tar czf $OUT/r1.tgz -C /tmp r1
tail -17 /tmp/r1/summary.md
grep -h "passed\|failed\|error" /tmp/r1/pytest_*.log | tail -4
grep -h "ERROR SUMMARY" /tmp/r1/memcheck.log /tmp/r1/racecheck.log | tail -2
grep -hE "meets its contract" /tmp/r1/tb_*.txt | sort | uniq -c
for f in A B HEAD; do echo "== $f"; grep -hE "^\| [a-z_].* \| (dfuse|compile) \|" /tmp/r1/tb_$f.txt | awk -F'|' '{print $3,$4,$5,$7,$11}'; done
python3 - <<'PY'
import json
r = {k: json.load(open(f'/tmp/r1/db_{k}.json'))['results'] for k in ('A', 'B', 'HEAD')}
for a, b, h in zip(r['A'], r['B'], r['HEAD']):
    print(f"{a['case'][:44]:44s} A {a['fused_us']:7.1f} ({a['fused_percent_of_copy']:4.1f}%) B {b['fused_us']:7.1f} HEAD {h['fused_us']:7.1f}")
PY
