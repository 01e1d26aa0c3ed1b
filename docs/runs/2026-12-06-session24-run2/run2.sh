#!/usr/bin/env bash
# Session 24 run 2: scale_residual_norm_scale_shift's vectorized rows up to 6144 elements with r held in registers
# (scale_residual_norm_cached; every load of the row issued before the first r), longer rows staged as before.
# Checks of the tree (pytest of the scale-residual-norm, LayerNorm, RMSNorm and fp32-norm modules; the
# ResidualNormGpu suite at model shapes; memcheck and racecheck over those GPU suites at small shapes), then
# torch_bench beside "cap8" (rows over 4096 staged: the Cached = 12 kernel's 142 registers, three blocks per SM,
# left out) and "base" (the kernel of run 1's tree: every row staged; base_*.txt), each rebuilt in this call.
set -u
R=docs/runs/2026-12-06-session24-run2
T=/tmp/r2
mkdir -p $T
P=python/tests
F=src/ops/norm/scale_residual_norm_scale_shift.cu
touch $F src/cuda/layer_norm_stats.cuh src/cuda/rms_norm_stats.cuh
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_SANITIZER_FILTER='*ResidualNormGpu*:*RmsNormGpu*:*LayernormGpu*:*NormFp32Gpu*' \
DFUSE_PYTEST_MODULES="$P/test_scale_residual_norm_torch.py $P/test_layernorm_torch.py $P/test_rmsnorm_torch.py $P/test_norm_fp32_torch.py" \
DFUSE_CHECK_BUDGET_S=300 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
DFUSE_GPU_TEST_SMALL=0 timeout 120 build-gpu/dfuse_gpu_tests --gtest_filter='*ResidualNormGpu*' >$T/gtest_residual_norm_full.log 2>&1
echo "ResidualNormGpu full shapes rc $? at ${SECONDS}s"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
build() { timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_$1.log 2>&1; echo "build $1 rc $? at ${SECONDS}s"; }
bench() {  # bench NAME OPS...
  local name=$1; shift
  timeout 100 python3 bench/torch_bench.py --json $T/tb_$name.json --ops "$@" >$T/tb_$name.txt 2>&1
  echo "torch_bench $name rc $? at ${SECONDS}s"
}
bench tree scale_residual_norm_scale_shift layernorm_modulate rmsnorm_scale_shift
cp $F /tmp/tree.cu
sed 's/if constexpr (Cached == 0)$/if constexpr (Cached == 0 || Cached == kLayerNormMaxCached)/' /tmp/tree.cu >$F
grep -c "Cached == kLayerNormMaxCached" $F
build cap8
bench cap8 scale_residual_norm_scale_shift
cp $R/base_scale_residual_norm_scale_shift.cu.txt $F
build base
bench base scale_residual_norm_scale_shift
cp /tmp/tree.cu $F
tar czf $OUT/r2.tgz -C /tmp r2
nvidia-smi --query-gpu=name --format=csv,noheader
tail -12 $T/summary.md
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck*.log $T/racecheck*.log | sort | uniq -c
grep -h "passed\|failed" $T/pytest_*.log | sort | uniq
tail -3 $T/gtest_residual_norm_full.log
grep -h "mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head
python3 bench/compare_runs.py base=$T/tb_base.json cap8=$T/tb_cap8.json tree=$T/tb_tree.json
