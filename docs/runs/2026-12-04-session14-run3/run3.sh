#!/usr/bin/env bash
# Session 14 run 3: the quarter-warp QK-norm + RoPE kernel, LTX-2 split RoPE row order, qk_rmsnorm storage chain
# vectorized, table split and scaled residual flat, rope_rotate_half and interleaved_rope_fp64 by head groups;
# then the head-group choices {8, 4} (without 2) rebuilt and the QK-norm + RoPE ops benched.
set -u
P=python/tests
OPS=fused_inplace_qknorm_rope,flux2_qkv_epilogue,flux2_strided_qknorm_rope,ltx2_qknorm_split_rope,qk_rmsnorm_storage_dtype,qk_rmsnorm,temb_table_slices,ltx2_ada_values,scaled_residual_bf16,rope_rotate_half,interleaved_rope_fp64,qwen_qkv_epilogue
DFUSE_CHECK_SKIP=python_deps,ctest_host \
DFUSE_SANITIZER_FILTER='*RopeGpu*:*Flux2Rope*:*LtxRope*:*JointQkv*:*RmsNorm*:*AdalnValues*:*HeliosRope*' \
DFUSE_PYTEST_MODULES="$P/test_rope_torch.py $P/test_qknorm_rope_forms_torch.py $P/test_flux2_rope_torch.py $P/test_paired_rope_torch.py $P/test_joint_qkv_torch.py $P/test_rmsnorm_torch.py $P/test_adaln_values_torch.py" \
DFUSE_BENCH_OPS=$OPS \
DFUSE_TORCH_BENCH_OPS="fused_qknorm_rope fused_inplace_qknorm_rope flux2_qkv_epilogue flux2_strided_qknorm_rope ltx2_qknorm_split_rope qk_rmsnorm qk_rmsnorm_native qk_rmsnorm_storage_dtype temb_table_slices ltx2_ada_values scaled_residual_bf16 rope_rotate_half interleaved_rope_fp64 qwen_qkv_epilogue" \
DFUSE_CHECK_BUDGET_S=440 scripts/gpu_check.sh /tmp/r3 > /tmp/r3_check.txt 2>&1
cp build-gpu/logs/*.log /tmp/r3/ 2>/dev/null
tail -22 /tmp/r3/summary.md
sed -i 's/kGroupHeadChoices\[\] = {8, 4, 2}/kGroupHeadChoices[] = {8, 4}/' src/ops/rope/head_groups.h
grep -n "kGroupHeadChoices\[\] =" src/ops/rope/head_groups.h
timeout 90 cmake --build build-gpu --target dfuse_cuda -j16 > /tmp/r3/variant_build.log 2>&1 && \
for op in fused_inplace_qknorm_rope flux2_qkv_epilogue flux2_strided_qknorm_rope; do
  timeout 40 build-gpu/dfuse bench --op $op --json /tmp/r3/variant84_$op.json > /tmp/r3/variant84_$op.txt 2>&1
done
tar czf $OUT/r3.tgz -C /tmp r3
