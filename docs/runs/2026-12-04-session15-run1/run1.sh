#!/usr/bin/env bash
# Session 15 run 1: the tree of c51494a. Checks the Python-only move of the model chains into
# python/tests/rope_chains.py (pytest paired_rope, rope, joint_qkv; torch_bench of the RoPE ops that use them),
# takes this run's baselines for the norm ops short of #3's targets and profiles their kernels (ncu, first launch).
set -u
mkdir -p /tmp/r1
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_PYTEST_MODULES="$P/test_paired_rope_torch.py $P/test_rope_torch.py $P/test_joint_qkv_torch.py" \
DFUSE_PROFILE_BENCH_OPS="fp32_layernorm_bf16 norm_scale_shift rmsnorm_tanh_residual rmsnorm_decomposed_scale_shift rmsnorm_modulate_fp32 qk_head_layernorm rmsnorm_scale" \
DFUSE_PROFILE_BENCH_COUNT=1 DFUSE_CHECK_BUDGET_S=330 scripts/gpu_check.sh /tmp/r1 >/tmp/r1_check.txt 2>&1
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 150 python3 bench/torch_bench.py --json /tmp/r1/tb.json --ops ltx2_qknorm_split_rope ltx25_decoder_rope \
  helios_qk_rope interleaved_rope_fp64 qwen_qkv_epilogue hunyuan_qkv_rope_pack fp32_layernorm_bf16 rmsnorm_scale \
  rmsnorm_tanh_residual rmsnorm_tanh_residual_fp32 rmsnorm_decomposed_scale_shift rmsnorm_modulate_fp32 \
  "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" qk_head_layernorm >/tmp/r1/tb.txt 2>&1
echo "torch_bench rc $?"
cp /tmp/r1_check.txt /tmp/r1/; cp build-gpu/logs/*.log /tmp/r1/ 2>/dev/null
tar czf $OUT/r1.tgz -C /tmp r1
tail -22 /tmp/r1/summary.md
grep -E "meets its contract|Error|error|FAIL" /tmp/r1/tb.txt | head -40
