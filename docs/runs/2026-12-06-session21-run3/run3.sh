#!/usr/bin/env bash
# Session 21 run 3: two variants beside the tree (18299ed) in one call, each op's torch_bench in the same call:
#  V: qk_head_layernorm's half-warp kernel with four heads in flight per half-warp instead of two (K = 1; 64-70
#     registers, 3 blocks of 256 per SM: 64 bytes of loads in flight per thread, 48 KB per SM, against 32 and 32 KB)
#     and norm_fp32_layer_norm_cached (norm_scale_shift's LayerNorm) bounded to 10 blocks per SM (56 -> 48
#     registers; its aligned forms without spills). Checked: pytest layernorm and norm_fp32, memcheck over the
#     QkHead and NormFp32 GPU tests.
set -u
R=docs/runs/2026-12-06-session21-run3
T=/tmp/r3
mkdir -p $T
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,pytest,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_BUDGET_S=200 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
tb() {
  timeout 100 python3 bench/torch_bench.py --json $T/tb_$1.json \
    --ops qk_head_layernorm "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" >$T/tb_$1.txt 2>&1
  echo "torch_bench $1 rc $? at ${SECONDS}s"
}
tb tree
cp src/ops/norm/qk_head_layernorm.cu /tmp/qhl_tree.cu
cp src/cuda/norm_fp32_rows.cuh /tmp/nfr_tree.cuh
cp $R/qk_head_layernorm_rows4.cu.txt src/ops/norm/qk_head_layernorm.cu
cp $R/norm_fp32_rows_bound10.cuh.txt src/cuda/norm_fp32_rows.cuh
timeout 200 cmake --build build-gpu --target dfuse_cuda dfuse_gpu_tests -j16 >$T/build_V.log 2>&1
echo "build V rc $? at ${SECONDS}s"
tb V
P=python/tests
DFUSE_REQUIRE_CUDA=1 timeout 90 python3 -m pytest $P/test_layernorm_torch.py $P/test_norm_fp32_torch.py -q \
  -p no:cacheprovider >$T/pytest_V.log 2>&1
echo "pytest V: $(tail -1 $T/pytest_V.log) at ${SECONDS}s"
DFUSE_GPU_TEST_SMALL=1 timeout 120 compute-sanitizer --error-exitcode 1 --tool memcheck build-gpu/dfuse_gpu_tests \
  '--gtest_filter=*QkHead*:*NormFp32*' >$T/memcheck_V.log 2>&1
echo "memcheck V rc $? at ${SECONDS}s"
cp /tmp/qhl_tree.cu src/ops/norm/qk_head_layernorm.cu
cp /tmp/nfr_tree.cuh src/cuda/norm_fp32_rows.cuh
tar czf $OUT/r3.tgz -C /tmp r3
grep -h "ERROR SUMMARY" $T/memcheck_V.log
grep -h "meets its contract" $T/tb_*.txt | sort | uniq -c
python3 - <<'PY'
import json
T = '/tmp/r3'
def tb(n):
    try:
        return {(r['op'], r['shape'], r['impl']): r for r in json.load(open(f'{T}/tb_{n}.json'))['results']}
    except Exception as e:
        print(n, 'missing', e); return {}
runs = {'tree': tb('tree'), 'V': tb('V')}
for k, r in runs['tree'].items():
    if r['impl'] != 'dfuse': continue
    line = f"{k[0][:34]} {k[1][:10]}:"
    for name, run in runs.items():
        d, c = run.get(k), run.get((k[0], k[1], 'compile'))
        if d and c:
            line += f" | {name} {d['median_us']:.1f} ({d['pct_copy_bw']:.1f}%) c {c['median_us']:.1f} {c['median_us']/d['median_us']:.3f}x"
    print(line)
PY
