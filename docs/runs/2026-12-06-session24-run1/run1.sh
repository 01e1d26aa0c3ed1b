#!/usr/bin/env bash
# Session 24 run 1: the tree with session 23's block_fold_all_rows.patch applied ("fold": welford_block_fold also
# for the LayerNorm rows that are not held in registers: rows over 6144, the fp32-norm staged rows,
# scale_residual_norm_scale_shift) checked (pytest of the LayerNorm, fp32-norm and scale-residual-norm modules,
# memcheck and racecheck over their GPU tests) and benchmarked beside HEAD's six files ("base", base/*.txt), each
# rebuilt in the same call. On an H200 also session 22's files ("s22", ../2026-12-06-session23-run2/head/*.txt over
# base): the H200 before/after of session 23's two changes.
set -u
R=docs/runs/2026-12-06-session24-run1
T=/tmp/r1
mkdir -p $T
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_SANITIZER_FILTER='*LayernormGpu*:*NormFp32Gpu*:*ResidualNormGpu*' \
DFUSE_PYTEST_MODULES="$P/test_layernorm_torch.py $P/test_norm_fp32_torch.py $P/test_scale_residual_norm_torch.py" \
DFUSE_CHECK_BUDGET_S=240 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
build() { timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_$1.log 2>&1; echo "build $1 rc $? at ${SECONDS}s"; }
bench() {  # bench NAME OPS...
  local name=$1; shift
  timeout 100 python3 bench/torch_bench.py --json $T/tb_$name.json --ops "$@" >$T/tb_$name.txt 2>&1
  echo "torch_bench $name rc $? at ${SECONDS}s"
}
NORM=(scale_residual_norm_scale_shift "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine"
      layernorm_modulate fp32_layernorm_bf16 qk_head_layernorm rmsnorm_modulate_fp32)
bench fold "${NORM[@]}" temb_table_slices ltx2_ada_values
FILES="src/cuda/layer_norm_modulate_rows.cuh src/cuda/layer_norm_stats.cuh src/cuda/norm_fp32_rows.cuh
       src/eager/layer_norm.cu src/ops/norm/fp32_layernorm_bf16.cu src/ops/norm/scale_residual_norm_scale_shift.cu"
mkdir -p /tmp/tree && for f in $FILES; do cp $f /tmp/tree/; done
for f in $FILES; do cp $R/base/$(basename $f).txt $f; done
build base
bench base "${NORM[@]}"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader)
if [[ $GPU == *H200* ]]; then
  H=docs/runs/2026-12-06-session23-run2/head
  S22="src/common/layer_norm_stats.h src/cuda/layer_norm_stats.cuh src/cuda/layer_norm_modulate_rows.cuh
       src/cuda/norm_fp32_rows.cuh src/cuda/table_split.cuh src/ops/norm/fp32_layernorm_bf16.cu src/ops/norm/qk_head_layernorm.cu"
  mkdir -p /tmp/base && for f in $S22; do cp $f /tmp/base/; done
  for f in $S22; do cp $H/$(basename $f).txt $f; done
  build s22
  bench s22 qk_head_layernorm "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" layernorm_modulate
  for f in $S22; do cp /tmp/base/$(basename $f) $f; done
fi
for f in $FILES; do cp /tmp/tree/$(basename $f) $f; done
tar czf $OUT/r1.tgz -C /tmp r1
echo "$GPU"
tail -12 $T/summary.md
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck*.log $T/racecheck*.log | sort | uniq -c
grep -h "passed\|failed" $T/pytest_*.log | sort | uniq
grep -h "mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head
python3 bench/compare_runs.py base=$T/tb_base.json fold=$T/tb_fold.json
[ -f $T/tb_s22.json ] && python3 bench/compare_runs.py s22=$T/tb_s22.json fold=$T/tb_fold.json
