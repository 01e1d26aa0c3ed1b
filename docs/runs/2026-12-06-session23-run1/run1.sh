#!/usr/bin/env bash
# Session 23 run 1: the tree checked and benchmarked beside variants rebuilt in the same call.
# The tree: qk_head_layernorm's half-warp Welford fold split over the lanes and its variance division by 128 K
# as a multiplication; the vectorized LayerNorm block reduction (cached rows of norm_scale_shift, layernorm_modulate,
# fp32_layernorm_bf16) combining with host-computed constants where every thread folds the same count (n % 512 == 0);
# table_split_kernel at eight blocks of 256 per SM, one vector per thread where two would spill.
# Checks: GPU ctest (small shapes), pytest of the LayerNorm, fp32-norm, scale-residual-norm and adaLN-value modules,
# memcheck and racecheck over their GPU tests, torch_bench. Variants: "bound3" (qk_head_layernorm's K = 1 kernel at
# three blocks per SM: no spill) and "head" (HEAD's seven files, head/*.txt).
set -u
R=docs/runs/2026-12-06-session23-run1
T=/tmp/r1
mkdir -p $T
OPS=(qk_head_layernorm "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" layernorm_modulate
     layernorm_folded_modulate fp32_layernorm_bf16 temb_table_slices ltx2_ada_values)
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_SANITIZER_FILTER='*LayernormGpu*:*NormFp32Gpu*:*AdalnValues*' \
DFUSE_PYTEST_MODULES="$P/test_layernorm_torch.py $P/test_norm_fp32_torch.py $P/test_scale_residual_norm_torch.py $P/test_adaln_values_torch.py" \
DFUSE_CHECK_BUDGET_S=270 \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
bench() {  # bench NAME: rebuild, torch_bench of the ops
  timeout 150 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_$1.log 2>&1
  echo "build $1 rc $? at ${SECONDS}s"
  timeout 90 python3 bench/torch_bench.py --json $T/tb_$1.json --ops "${OPS[@]}" >$T/tb_$1.txt 2>&1
  echo "torch_bench $1 rc $? at ${SECONDS}s"
}
FILES="src/common/layer_norm_stats.h src/cuda/layer_norm_stats.cuh src/cuda/layer_norm_modulate_rows.cuh src/cuda/norm_fp32_rows.cuh src/cuda/table_split.cuh src/ops/norm/fp32_layernorm_bf16.cu src/ops/norm/qk_head_layernorm.cu"
mkdir -p /tmp/tree && for f in $FILES; do cp $f /tmp/tree/; done
bench tree
cp $R/qk_head_layernorm_bound3.cu.txt src/ops/norm/qk_head_layernorm.cu
timeout 60 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_bound3.log 2>&1
timeout 30 python3 bench/torch_bench.py --json $T/tb_bound3.json --ops qk_head_layernorm >$T/tb_bound3.txt 2>&1
echo "torch_bench bound3 rc $? at ${SECONDS}s"
for f in $FILES; do cp $R/head/$(basename $f).txt $f; done
bench head
for f in $FILES; do cp /tmp/tree/$(basename $f) $f; done
tar czf $OUT/r1.tgz -C /tmp r1
tail -12 $T/summary.md
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck*.log $T/racecheck*.log | sort | uniq -c
grep -h "passed\|failed" $T/pytest_*.log | sort | uniq
grep -h "mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head -20
python3 bench/compare_runs.py head=$T/tb_head.json tree=$T/tb_tree.json
python3 bench/compare_runs.py head=$T/tb_head.json bound3=$T/tb_bound3.json
