#!/usr/bin/env bash
# Session 21 run 2: the tree (RMSNorm rows one per block at 12 blocks per SM where no operand is cached; the
# fp32-norm rows one per block, staged by asynchronous copies) checked, and benchmarked beside 1acdeb1's two
# headers (run 1's "base", docs/runs/2026-12-06-session21-run1/*.txt) in the same call:
# GPU ctest (small shapes), pytest rmsnorm / norm_fp32 / scale_residual_norm, memcheck and racecheck over the
# RmsNorm and NormFp32 GPU tests, torch_bench and dfuse bench of the RMSNorm and fp32-norm ops.
set -u
R1=docs/runs/2026-12-06-session21-run1
T=/tmp/r2
mkdir -p $T
OPS="rmsnorm_scale rmsnorm_scale_shift rmsnorm_decomposed_scale_shift rmsnorm_tanh_residual rmsnorm_modulate_fp32 rmsnorm_tanh_residual_fp32"
DB_OPS="rmsnorm_scale rmsnorm_scale_shift rmsnorm_decomposed_scale_shift rmsnorm_tanh_residual rmsnorm_modulate_fp32 rmsnorm_tanh_residual_fp32 norm_scale_shift"
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,dfuse_verify DFUSE_SANITIZER_FILTER='*RmsNorm*:*NormFp32*' \
DFUSE_PYTEST_MODULES="$P/test_rmsnorm_torch.py $P/test_norm_fp32_torch.py $P/test_scale_residual_norm_torch.py" \
DFUSE_BENCH_OPS=${DB_OPS// /,} DFUSE_TORCH_BENCH_OPS="$OPS" DFUSE_CHECK_BUDGET_S=400 \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
cp src/cuda/rms_norm_rows.cuh /tmp/rms_tree.cuh
cp src/cuda/norm_fp32_rows.cuh /tmp/fp32_tree.cuh
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
cp $R1/rms_norm_rows_persistent.cuh.txt src/cuda/rms_norm_rows.cuh
cp $R1/norm_fp32_rows_persistent.cuh.txt src/cuda/norm_fp32_rows.cuh
timeout 150 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_base.log 2>&1
echo "build base rc $? at ${SECONDS}s"
for op in $DB_OPS; do
  timeout 40 build-gpu/dfuse bench --op $op --json $T/db_base_$op.json >$T/db_base_$op.txt 2>&1
done
timeout 100 python3 bench/torch_bench.py --json $T/tb_base.json --ops $OPS >$T/tb_base.txt 2>&1
cp /tmp/rms_tree.cuh src/cuda/rms_norm_rows.cuh
cp /tmp/fp32_tree.cuh src/cuda/norm_fp32_rows.cuh
echo "total ${SECONDS}s"
tar czf $OUT/r2.tgz -C /tmp r2
tail -18 $T/summary.md
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck*.log $T/racecheck*.log | sort | uniq -c
tail -1 $T/pytest.log
grep -h "meets its contract\|mismatch\|FAIL" $T/torch_bench.log $T/tb_base.txt | sort | uniq -c | head
python3 - <<'PY'
import json, glob, os
T = '/tmp/r2'
def tb(n):
    try:
        return {(r['op'], r['shape'], r['impl']): r for r in json.load(open(f'{T}/{n}.json'))['results']}
    except Exception as e:
        print(n, 'missing', e); return {}
runs = {'tree': tb('torch_bench'), 'base': tb('tb_base')}
for k, r in runs['tree'].items():
    if r['impl'] != 'dfuse': continue
    line = f"{k[0][:26]} {k[1][:8]}:"
    for name, run in runs.items():
        d, c = run.get(k), run.get((k[0], k[1], 'compile'))
        if d and c:
            line += f" | {name} {d['median_us']:.1f} ({d['pct_copy_bw']:.1f}%) c {c['median_us']:.1f} {c['median_us']/d['median_us']:.3f}x"
    print(line)
for f in sorted(glob.glob(f'{T}/dfuse_bench_*.json')):
    op = os.path.basename(f)[len('dfuse_bench_'):-5]
    base = json.load(open(f))['results']
    g = f'{T}/db_base_{op}.json'
    if not os.path.exists(g): continue
    for p, q in zip(base, json.load(open(g))['results']):
        print(f"{op[:16]} {p['case'][:34]:34s} tree {p['fused_us']:7.1f} ({p['fused_percent_of_copy']:4.1f}%) base {q['fused_us']:7.1f}")
PY
