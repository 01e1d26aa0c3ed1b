#!/usr/bin/env bash
# Session 13 run 4: the tree (strided copy by dim count, fp32_layernorm_bf16 affine chunks) checked and benched,
# then kGroupHeads 4 rebuilt and the QK-norm + RoPE ops benched again.
set -o pipefail
O=/tmp/r4; mkdir -p $O
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host \
DFUSE_SANITIZER_FILTER='*DataMovement*:*JointQkv*:*Layernorm*' \
DFUSE_PYTEST_MODULES="$P/test_data_movement_torch.py $P/test_joint_qkv_torch.py $P/test_layernorm_torch.py" \
DFUSE_BENCH_OPS=pack_qkv_destination_major,usp_merge_heads,joint_qkv_cat,fp32_layernorm_bf16,fused_inplace_qknorm_rope,flux2_strided_qknorm_rope,flux2_qkv_epilogue \
DFUSE_TORCH_BENCH_OPS="fp32_layernorm_bf16" DFUSE_CHECK_BUDGET_S=330 \
  scripts/gpu_check.sh $O > $O/console.txt 2>&1
echo "gpu_check rc $?"
(cd $O && tar czf $OUT/run4.tgz .)
cat $O/summary.md
sed -i 's/constexpr int kGroupHeads = 8;/constexpr int kGroupHeads = 4;/' src/ops/rope/qknorm_rope_rows.cu
cmake --build build-gpu --target dfuse_cuda -j16 > $O/variant_build.txt 2>&1 || echo "variant build failed"
for op in fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue; do
  build-gpu/dfuse bench --op $op --json $O/exp_groupheads4_$op.json > $O/exp_groupheads4_$op.txt 2>&1
done
git checkout src/ops/rope/qknorm_rope_rows.cu
(cd $O && tar czf $OUT/run4_variant.tgz exp_groupheads4_* variant_build.txt)
for op in fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue; do tail -12 $O/exp_groupheads4_$op.txt; done
