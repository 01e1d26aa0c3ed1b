#!/usr/bin/env bash
# Session 14 run 4: the tree to commit (run 3's kernels but the QK-norm + RoPE rows and rope_rotate_half back to
# 97e7451's, head groups of 8 or 4; the power-of-two F.rms_norm division in the half-warp statistics; load_elements).
set -u
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host \
DFUSE_SANITIZER_FILTER='*RopeGpu*:*Flux2Rope*:*LtxRope*:*JointQkv*:*RmsNorm*:*AdalnValues*:*HeliosRope*' \
DFUSE_PYTEST_MODULES="$P/test_rope_torch.py $P/test_qknorm_rope_forms_torch.py $P/test_flux2_rope_torch.py $P/test_paired_rope_torch.py $P/test_joint_qkv_torch.py $P/test_rmsnorm_torch.py $P/test_adaln_values_torch.py $P/test_activation_torch.py" \
DFUSE_BENCH_OPS=fused_inplace_qknorm_rope,flux2_qkv_epilogue,flux2_strided_qknorm_rope,qk_rmsnorm,interleaved_rope_fp64,ltx25_decoder_rope,rope_rotate_half \
DFUSE_TORCH_BENCH_OPS="fused_qknorm_rope fused_inplace_qknorm_rope flux2_qkv_epilogue flux2_strided_qknorm_rope qk_rmsnorm rope_rotate_half interleaved_rope_fp64 ltx25_decoder_rope bias_silu" \
DFUSE_CHECK_BUDGET_S=330 scripts/gpu_check.sh /tmp/r4 > /tmp/r4_check.txt 2>&1
cp build-gpu/logs/*.log /tmp/r4/ 2>/dev/null
tar czf $OUT/r4.tgz -C /tmp r4
tail -20 /tmp/r4/summary.md
