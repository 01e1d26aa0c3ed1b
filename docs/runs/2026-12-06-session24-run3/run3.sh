#!/usr/bin/env bash
# Session 24 run 3: launch-shape variants measured beside the tree (8046269), each rebuilt in this call:
#  "c6" / "c610": with_layer_norm_cached with 6 (and 10) cached chunks per thread besides 4, 8, 12: FLUX.1's 3072
#    takes 6 (scale_residual_norm_cached bf16: 88 -> 64 registers, five -> eight blocks per SM), Wan's 5120 10;
#  "u4": the table split with four vectors per thread (half the blocks); "t128": with 128-thread blocks.
set -u
R=docs/runs/2026-12-06-session24-run3
T=/tmp/r3
mkdir -p $T
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_BUDGET_S=200 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
build() { timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_$1.log 2>&1; echo "build $1 rc $? at ${SECONDS}s"; }
bench() {  # bench NAME OPS...
  local name=$1; shift
  timeout 100 python3 bench/torch_bench.py --json $T/tb_$name.json --ops "$@" >$T/tb_$name.txt 2>&1
  echo "torch_bench $name rc $? at ${SECONDS}s"
}
LN=(scale_residual_norm_scale_shift layernorm_modulate "norm_scale_shift layer_norm affine" fp32_layernorm_bf16)
TS=(temb_table_slices ltx2_ada_values)
bench tree "${LN[@]}" "${TS[@]}"
swap() {  # swap FILE VARIANT.txt NAME OPS...: build and bench the variant, then restore FILE
  local f=$1 v=$2 name=$3; shift 3
  cp $f /tmp/keep && cp $R/$v $f && build $name && bench $name "$@"
  cp /tmp/keep $f
}
swap src/cuda/layer_norm_stats.cuh layer_norm_stats_c6.cuh.txt c6 "${LN[@]}"
swap src/cuda/layer_norm_stats.cuh layer_norm_stats_c610.cuh.txt c610 scale_residual_norm_scale_shift layernorm_modulate
swap src/cuda/table_split.cuh table_split_u4.cuh.txt u4 "${TS[@]}"
swap src/cuda/table_split.cuh table_split_t128.cuh.txt t128 "${TS[@]}"
touch src/cuda/layer_norm_stats.cuh src/cuda/table_split.cuh
tar czf $OUT/r3.tgz -C /tmp r3
nvidia-smi --query-gpu=name --format=csv,noheader
grep -h "mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head
python3 bench/compare_runs.py tree=$T/tb_tree.json c6=$T/tb_c6.json c610=$T/tb_c610.json u4=$T/tb_u4.json t128=$T/tb_t128.json
