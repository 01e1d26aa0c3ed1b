#!/usr/bin/env bash
# Session 19 run 3: the RMSNorm rows kernel bounded to 8 blocks of 128 threads per SM (64 registers) where the
# epilogue has one operand (rmsnorm_scale; no spills, ptxas), now that the packed pairs shortened the epilogue
# (rms_norm_rows_bounded.cuh.txt), beside the tree's kernel in this call: torch_bench and dfuse bench of
# rmsnorm_scale for both; the variant also checked (pytest rmsnorm, memcheck and racecheck over the RmsNorm
# GPU tests).
set -u
R=docs/runs/2026-12-05-session19-run3
T=/tmp/r3
mkdir -p $T
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,pytest,dfuse_verify \
DFUSE_BENCH_OPS=rmsnorm_scale DFUSE_TORCH_BENCH_OPS="rmsnorm_scale" DFUSE_CHECK_BUDGET_S=200 \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $?"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
K=src/cuda/rms_norm_rows.cuh
cp $K /tmp/rows_tree.cuh
cp $R/rms_norm_rows_bounded.cuh.txt $K
timeout 150 cmake --build build-gpu --target dfuse_cuda dfuse_gpu_tests -j16 >$T/build_B.log 2>&1; echo "build B rc $?"
timeout 60 build-gpu/dfuse bench --op rmsnorm_scale --json $T/db_B.json >$T/db_B.txt 2>&1
timeout 90 python3 bench/torch_bench.py --host-calls 100 --json $T/tb_B.json --ops rmsnorm_scale >$T/tb_B.txt 2>&1
DFUSE_REQUIRE_CUDA=1 timeout 90 python3 -m pytest python/tests/test_rmsnorm_torch.py -q -p no:cacheprovider >$T/pytest_B.log 2>&1
S="env DFUSE_GPU_TEST_SMALL=1 compute-sanitizer --error-exitcode 1"
timeout 120 $S --tool memcheck build-gpu/dfuse_gpu_tests '--gtest_filter=*RmsNorm*' >$T/memcheck_B.log 2>&1 &
timeout 120 $S --tool racecheck build-gpu/dfuse_gpu_tests '--gtest_filter=*RmsNorm*' >$T/racecheck_B.log 2>&1
wait
cp /tmp/rows_tree.cuh $K
tar czf $OUT/r3.tgz -C /tmp r3
tail -1 $T/pytest_B.log
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck_B.log $T/racecheck_B.log
grep -h "meets its contract" $T/torch_bench.log $T/tb_B.txt
python3 - <<'PY'
import json
T = '/tmp/r3'
def tb(n):
    return {(r['op'], r['shape'], r['impl']): r for r in json.load(open(f'{T}/{n}.json'))['results']}
a, b = tb('torch_bench'), tb('tb_B')
for k, r in a.items():
    if r['impl'] != 'dfuse': continue
    e = b.get(k); c = a[(k[0], k[1], 'compile')]; c2 = b[(k[0], k[1], 'compile')]
    print(f"{k[0]} {k[1]:11s} tree {r['median_us']:7.1f} ({r['pct_copy_bw']:5.1f}%) bounded {e['median_us']:7.1f} ({e['pct_copy_bw']:5.1f}%) compile {c['median_us']:7.1f} / {c2['median_us']:7.1f}")
x = json.load(open(f'{T}/dfuse_bench_rmsnorm_scale.json'))['results']; y = json.load(open(f'{T}/db_B.json'))['results']
for p, q in zip(x, y):
    print(f"{p['case'][:36]:36s} tree {p['fused_us']:7.1f} ({p['fused_percent_of_copy']:4.1f}%) bounded {q['fused_us']:7.1f} ({q['fused_percent_of_copy']:4.1f}%)")
PY
