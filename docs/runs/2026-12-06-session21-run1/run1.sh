#!/usr/bin/env bash
# Session 21 run 1: the RMSNorm rows (rmsnorm_scale, rmsnorm_scale_shift, rmsnorm_decomposed_scale_shift,
# rmsnorm_tanh_residual) with a row per 128-thread block instead of persistent blocks (BENCHMARKS session 20 / Next:
# more warps in flight), and the fp32-norm rows (rmsnorm_modulate_fp32, rmsnorm_tanh_residual_fp32,
# norm_scale_shift) staged by asynchronous copies. In one call, each rebuilt and benchmarked (torch_bench and
# dfuse bench):
#  tree: one-row RMSNorm kernels at 12 blocks per SM (40 registers), epilogue batch 2; fp32 rows by cp.async,
#        persistent;
#  base: 1acdeb1's two headers (persistent rows, staged ahead; fp32 rows staged one vector at a time);
#  A:    tree without the blocks-per-SM bound (56 registers, 9 blocks per SM);
#  C:    tree at 16 blocks per SM, epilogue batch 1 (32 registers), and the fp32 rows one per block too.
set -u
R=docs/runs/2026-12-06-session21-run1
T=/tmp/r1
mkdir -p $T
OPS="rmsnorm_scale rmsnorm_scale_shift rmsnorm_decomposed_scale_shift rmsnorm_tanh_residual rmsnorm_modulate_fp32 rmsnorm_tanh_residual_fp32 norm_scale_shift"
DB_OPS="rmsnorm_scale rmsnorm_tanh_residual rmsnorm_modulate_fp32"
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,pytest,dfuse_verify \
DFUSE_BENCH_OPS=${DB_OPS// /,} DFUSE_TORCH_BENCH_OPS="$OPS" DFUSE_CHECK_BUDGET_S=240 \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
cp src/cuda/rms_norm_rows.cuh /tmp/rms_tree.cuh
cp src/cuda/norm_fp32_rows.cuh /tmp/fp32_tree.cuh
variant() {  # name
  local V=$1
  timeout 150 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_$V.log 2>&1
  echo "build $V rc $? at ${SECONDS}s"
  for op in $DB_OPS; do
    timeout 40 build-gpu/dfuse bench --op $op --json $T/db_${V}_$op.json >$T/db_${V}_$op.txt 2>&1
  done
  timeout 100 python3 bench/torch_bench.py --host-calls 100 --iters 60 --json $T/tb_$V.json --ops $OPS >$T/tb_$V.txt 2>&1
  echo "$V done at ${SECONDS}s"
}
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
cp $R/rms_norm_rows_persistent.cuh.txt src/cuda/rms_norm_rows.cuh
cp $R/norm_fp32_rows_persistent.cuh.txt src/cuda/norm_fp32_rows.cuh
variant base
cp /tmp/rms_tree.cuh src/cuda/rms_norm_rows.cuh
cp /tmp/fp32_tree.cuh src/cuda/norm_fp32_rows.cuh
sed -i 's/kRmsNormRowBlocksPerSm = 12;/kRmsNormRowBlocksPerSm = 1;/' src/cuda/rms_norm_rows.cuh
variant A
cp /tmp/rms_tree.cuh src/cuda/rms_norm_rows.cuh
sed -i 's/kRmsNormRowBlocksPerSm = 12;/kRmsNormRowBlocksPerSm = 16;/; s/kRmsNormRowBatch = 2;/kRmsNormRowBatch = 1;/' \
  src/cuda/rms_norm_rows.cuh
sed -i 's/kNormFp32RowPerBlock = false;/kNormFp32RowPerBlock = true;/' src/cuda/norm_fp32_rows.cuh
if ((SECONDS < 500)); then variant C; else echo "C skipped at ${SECONDS}s"; fi
cp /tmp/rms_tree.cuh src/cuda/rms_norm_rows.cuh
cp /tmp/fp32_tree.cuh src/cuda/norm_fp32_rows.cuh
echo "total ${SECONDS}s"
tar czf $OUT/r1.tgz -C /tmp r1
grep -h "meets its contract\|mismatch\|FAIL" $T/torch_bench.log $T/tb_*.txt | sort | uniq -c | head
python3 - <<'PY'
import json, glob, os
T = '/tmp/r1'
def tb(n):
    try:
        return {(r['op'], r['shape'], r['impl']): r for r in json.load(open(f'{T}/{n}.json'))['results']}
    except Exception as e:
        print(n, 'missing', e); return {}
runs = {'tree': tb('torch_bench'), 'base': tb('tb_base'), 'A': tb('tb_A'), 'C': tb('tb_C')}
for k, r in runs['tree'].items():
    if r['impl'] != 'dfuse': continue
    line = f"{k[0][:22]} {k[1][:8]}:"
    for name, run in runs.items():
        d, c = run.get(k), run.get((k[0], k[1], 'compile'))
        if d and c:
            line += f" | {name} {d['median_us']:.1f} ({d['pct_copy_bw']:.0f}%) c{c['median_us']:.1f}"
    print(line)
for f in sorted(glob.glob(f'{T}/dfuse_bench_*.json')):
    op = os.path.basename(f)[len('dfuse_bench_'):-5]
    base = json.load(open(f))['results']
    others = {n: json.load(open(f'{T}/db_{n}_{op}.json'))['results'] for n in ('base', 'A', 'C')
              if os.path.exists(f'{T}/db_{n}_{op}.json')}
    for i, p in enumerate(base):
        line = f"{op[:14]} {p['case'][:30]:30s} tree {p['fused_us']:7.1f}"
        for n, rs in others.items():
            line += f" {n} {rs[i]['fused_us']:7.1f}"
        print(line)
PY
