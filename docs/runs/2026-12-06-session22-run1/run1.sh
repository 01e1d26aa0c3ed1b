#!/usr/bin/env bash
# Session 22 run 1: the half-warp head kernels (qk_head_layernorm, qk_rmsnorm*, the QK-norm + RoPE head groups,
# the joint-QKV epilogues) holding four 16-bit heads in flight per half-warp as packs (64 bytes of loads per lane,
# was two heads as floats, 32 bytes), beside HEAD's files ("head") and the tree with the D = 128 QK-norm + RoPE
# and joint-QKV kernels bounded to three blocks per SM, no spills ("bound3"), each rebuilt in the same call.
# torch_bench of the changed ops per build, then of the unchanged ops whose last H200 numbers are old (tree only).
set -u
R=docs/runs/2026-12-06-session22-run1
T=/tmp/r1
mkdir -p $T
OPS="qk_head_layernorm qk_rmsnorm qk_rmsnorm_native fused_qknorm_rope fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue qwen_qkv_epilogue hunyuan_qkv_rope_pack"
FILES="src/cuda/rms_norm_stats.cuh src/ops/norm/qk_head_layernorm.cu src/ops/norm/qk_rmsnorm_native.cu src/ops/rope/joint_qkv_epilogue.cu src/ops/rope/qknorm_rope_rows.cu"
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,pytest,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_BUDGET_S=200 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
tb() {  # tb NAME OPS...
  local name=$1
  shift
  timeout 150 python3 bench/torch_bench.py --json $T/tb_$name.json --ops "$@" >$T/tb_$name.txt 2>&1
  echo "torch_bench $name rc $? at ${SECONDS}s"
}
rebuild() {
  timeout 150 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_$1.log 2>&1
  echo "build $1 rc $? at ${SECONDS}s"
}
mkdir -p /tmp/tree
for f in $FILES; do cp $f /tmp/tree/; done
tb tree $OPS
tb refresh "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" "norm_scale_shift rms_norm" \
  "norm_scale_shift rms_norm weight" temb_table_slices ltx2_ada_values scaled_residual_bf16 modulate_scale_shift
cp $R/qknorm_rope_rows_bound3.cu.txt src/ops/rope/qknorm_rope_rows.cu
cp $R/joint_qkv_epilogue_bound3.cu.txt src/ops/rope/joint_qkv_epilogue.cu
rebuild bound3
tb bound3 fused_qknorm_rope fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue qwen_qkv_epilogue hunyuan_qkv_rope_pack
for f in $FILES; do cp $R/$(basename $f).head.txt $f; done
rebuild head
tb head $OPS
for f in $FILES; do cp /tmp/tree/$(basename $f) $f; done
tar czf $OUT/r1.tgz -C /tmp r1
grep -h "copy bandwidth" $T/tb_*.txt
grep -h "meets its contract\|mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head
python3 bench/compare_runs.py tree=$T/tb_tree.json head=$T/tb_head.json bound3=$T/tb_bound3.json
python3 bench/compare_runs.py refresh=$T/tb_refresh.json
