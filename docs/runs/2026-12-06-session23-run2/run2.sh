#!/usr/bin/env bash
# Session 23 run 2: the tree of ad2be0b (run 1's changes, qk_head_layernorm at three blocks per SM) beside
# ea39805's seven files ("head", head/*.txt) and "vec8" (table_split_kernel with vectors of 16 bytes of the
# narrower of the values and the outputs: temb_table_slices' bf16 values in one 16-byte load, its fp32 outputs in
# two 16-byte stores, as torch.compile's kernel does), each rebuilt in the same call; torch_bench of the LayerNorm
# and adaLN-value ops per build, pytest of the adaLN-value module on vec8.
set -u
R=docs/runs/2026-12-06-session23-run2
T=/tmp/r2
mkdir -p $T
OPS=(qk_head_layernorm "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" layernorm_modulate
     layernorm_folded_modulate fp32_layernorm_bf16 temb_table_slices ltx2_ada_values)
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_BUDGET_S=200 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
build() { timeout 150 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_$1.log 2>&1; echo "build $1 rc $? at ${SECONDS}s"; }
bench() {  # bench NAME OPS...
  local name=$1; shift
  timeout 90 python3 bench/torch_bench.py --json $T/tb_$name.json --ops "$@" >$T/tb_$name.txt 2>&1
  echo "torch_bench $name rc $? at ${SECONDS}s"
}
bench tree "${OPS[@]}"
cp src/cuda/table_split.cuh /tmp/table_split_tree.cuh
cp $R/table_split_vec8.cuh.txt src/cuda/table_split.cuh
build vec8
timeout 60 python3 -m pytest -q python/tests/test_adaln_values_torch.py >$T/pytest_adaln_values_vec8.log 2>&1
echo "pytest vec8 rc $? at ${SECONDS}s"
bench vec8 temb_table_slices ltx2_ada_values
cp /tmp/table_split_tree.cuh src/cuda/table_split.cuh
build tree2
bench tree2 temb_table_slices ltx2_ada_values
FILES="src/common/layer_norm_stats.h src/cuda/layer_norm_stats.cuh src/cuda/layer_norm_modulate_rows.cuh src/cuda/norm_fp32_rows.cuh src/cuda/table_split.cuh src/ops/norm/fp32_layernorm_bf16.cu src/ops/norm/qk_head_layernorm.cu"
mkdir -p /tmp/tree && for f in $FILES; do cp $f /tmp/tree/; done
cp /tmp/table_split_tree.cuh /tmp/tree/table_split.cuh
for f in $FILES; do cp $R/head/$(basename $f).txt $f; done
build head
bench head "${OPS[@]}"
for f in $FILES; do cp /tmp/tree/$(basename $f) $f; done
tar czf $OUT/r2.tgz -C /tmp r2
nvidia-smi --query-gpu=name --format=csv,noheader
tail -3 $T/pytest_adaln_values_vec8.log
grep -h "mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head -20
python3 bench/compare_runs.py head=$T/tb_head.json tree=$T/tb_tree.json
python3 bench/compare_runs.py tree=$T/tb_tree2.json vec8=$T/tb_vec8.json
