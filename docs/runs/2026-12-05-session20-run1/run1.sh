#!/usr/bin/env bash
# Session 20 run 1, beside the tree's kernels in one call (torch_bench and dfuse bench each time):
#  A. rmsnorm_scale's RMSNorm rows kernel bounded to 8 blocks of 128 threads per SM (64 registers, no spills) where
#     the epilogue has one operand (rms_norm_rows_bounded.cuh.txt), and the table-split kernel (temb_table_slices,
#     ltx2_ada_values) with the parts of a run of rows in consecutive blocks (table_split_parts_interleaved.cuh.txt:
#     a 1-D grid, part = block % parts; the tree's 2-D grid walks every row of part 0, then of part 1, ..., reading
#     the values part by part at a stride of parts x cols, where torch.compile's flat kernel reads them in order);
#     and the fp32-norm rows (rmsnorm_modulate_fp32, rmsnorm_tanh_residual_fp32) with the decomposed mean by the
#     whole block (block_mean_sum_by_chains; norm_fp32_rows_mean_by_chains.cuh.txt), last measured against the
#     one-warp mean in session 12 before the chains' 32-bit loop;
#  B. A's table split with four vectors per thread instead of two (skipped if the call has run 420 s).
# Each variant checked: pytest of the modules it changes, memcheck (and racecheck where shared memory is used)
# over its GPU tests.
set -u
R=docs/runs/2026-12-05-session20-run1
T=/tmp/r1
mkdir -p $T
OPS="rmsnorm_scale temb_table_slices ltx2_ada_values rmsnorm_modulate_fp32 rmsnorm_tanh_residual_fp32"
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,pytest,dfuse_verify \
DFUSE_BENCH_OPS=${OPS// /,} DFUSE_TORCH_BENCH_OPS="$OPS" DFUSE_CHECK_BUDGET_S=210 \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $?"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
cp src/cuda/rms_norm_rows.cuh /tmp/rms_norm_rows_tree.cuh
cp src/cuda/table_split.cuh /tmp/table_split_tree.cuh
cp src/cuda/norm_fp32_rows.cuh /tmp/norm_fp32_rows_tree.cuh
S="env DFUSE_GPU_TEST_SMALL=1 compute-sanitizer --error-exitcode 1"
P=python/tests
variant() {  # name, ops, pytest modules, gtest filter, sanitizer tools
  local V=$1 ops=$2 mods=$3 filter=$4 tools=$5
  timeout 150 cmake --build build-gpu --target dfuse_cuda dfuse_gpu_tests -j16 >$T/build_$V.log 2>&1
  echo "build $V rc $?"
  for op in $ops; do
    timeout 40 build-gpu/dfuse bench --op $op --json $T/db_${V}_$op.json >$T/db_${V}_$op.txt 2>&1
  done
  timeout 90 python3 bench/torch_bench.py --host-calls 100 --iters 60 --json $T/tb_$V.json --ops $ops >$T/tb_$V.txt 2>&1
  DFUSE_REQUIRE_CUDA=1 timeout 90 python3 -m pytest $mods -q -p no:cacheprovider >$T/pytest_$V.log 2>&1
  for tool in $tools; do
    timeout 130 $S --tool $tool build-gpu/dfuse_gpu_tests "--gtest_filter=$filter" >$T/${tool}_$V.log 2>&1 &
  done
  wait
  echo "$V: $(tail -1 $T/pytest_$V.log)"
}
cp $R/rms_norm_rows_bounded.cuh.txt src/cuda/rms_norm_rows.cuh
cp $R/table_split_parts_interleaved.cuh.txt src/cuda/table_split.cuh
cp $R/norm_fp32_rows_mean_by_chains.cuh.txt src/cuda/norm_fp32_rows.cuh
variant A "$OPS" "$P/test_rmsnorm_torch.py $P/test_adaln_values_torch.py $P/test_norm_fp32_torch.py" \
  '*RmsNorm*:*AdalnValues*:*NormFp32*' "memcheck racecheck"
cp $R/table_split_parts_interleaved_unroll4.cuh.txt src/cuda/table_split.cuh
if ((SECONDS < 420)); then
  variant B "temb_table_slices ltx2_ada_values" "$P/test_adaln_values_torch.py" '*AdalnValues*' memcheck
else
  echo "B skipped at ${SECONDS}s"
fi
cp /tmp/rms_norm_rows_tree.cuh src/cuda/rms_norm_rows.cuh
cp /tmp/table_split_tree.cuh src/cuda/table_split.cuh
cp /tmp/norm_fp32_rows_tree.cuh src/cuda/norm_fp32_rows.cuh
echo "total ${SECONDS}s"
tar czf $OUT/r1.tgz -C /tmp r1
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck_*.log $T/racecheck_*.log
grep -h "meets its contract" $T/torch_bench.log $T/tb_*.txt
python3 - <<'PY'
import json, glob, os
T = '/tmp/r1'
def tb(n):
    try:
        return {(r['op'], r['shape'], r['impl']): r for r in json.load(open(f'{T}/{n}.json'))['results']}
    except Exception as e:
        print(n, 'missing', e); return {}
runs = {'tree': tb('torch_bench'), 'A': tb('tb_A'), 'B': tb('tb_B')}
for k, r in runs['tree'].items():
    if r['impl'] != 'dfuse': continue
    line = f"{k[0]} {k[1]}:"
    for name, run in runs.items():
        d, c = run.get(k), run.get((k[0], k[1], 'compile'))
        if d and c:
            line += f" | {name} {d['median_us']:.1f} ({d['pct_copy_bw']:.1f}%) c {c['median_us']:.1f}"
    print(line)
for f in sorted(glob.glob(f'{T}/dfuse_bench_*.json')):
    op = os.path.basename(f)[len('dfuse_bench_'):-5]
    base = json.load(open(f))['results']
    for name in ('A', 'B'):
        g = f'{T}/db_{name}_{op}.json'
        if not os.path.exists(g): continue
        for p, q in zip(base, json.load(open(g))['results']):
            print(f"{op} {p['case'][:34]:34s} tree {p['fused_us']:7.1f} ({p['fused_percent_of_copy']:4.1f}%) {name} {q['fused_us']:7.1f} ({q['fused_percent_of_copy']:4.1f}%)")
PY
