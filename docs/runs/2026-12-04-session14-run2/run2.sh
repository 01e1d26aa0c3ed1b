#!/usr/bin/env bash
# Session 14 run 2: HEAD's sources (the working tree holds helpers' unfinished edits), the new torch_bench entries.
set -u
rm -rf src tests && tar xzf exp/head_src.tgz
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
  DFUSE_CHECK_BUDGET_S=200 scripts/gpu_check.sh /tmp/r2 >/tmp/r2_check.txt 2>&1
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
timeout 200 python3 bench/torch_bench.py --json /tmp/r2/tb_rope.json --ops rope_rotate_half rope_interleaved_pairs \
  fused_qknorm_rope fused_inplace_qknorm_rope qwen_qkv_epilogue hunyuan_qkv_rope_pack flux2_qkv_epilogue \
  flux2_strided_qknorm_rope ltx2_qknorm_split_rope ltx25_decoder_rope helios_qk_rope interleaved_rope_fp64 \
  >/tmp/r2/tb_rope.txt 2>&1; echo "rope rc $?"
timeout 280 python3 bench/torch_bench.py --json /tmp/r2/tb_norm.json --ops layernorm_modulate layernorm_folded_modulate \
  rmsnorm_scale_shift rmsnorm_scale rmsnorm_tanh_residual rmsnorm_tanh_residual_fp32 rmsnorm_decomposed_scale_shift \
  "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" "norm_scale_shift rms_norm" \
  "norm_scale_shift rms_norm weight" rmsnorm_modulate_fp32 scale_residual_norm_scale_shift fp32_layernorm_bf16 \
  qk_head_layernorm qk_rmsnorm qk_rmsnorm_native qk_rmsnorm_storage_dtype temb_table_slices ltx2_ada_values \
  scaled_residual_bf16 >/tmp/r2/tb_norm.txt 2>&1; echo "norm rc $?"
cp /tmp/r2_check.txt /tmp/r2/
tar czf $OUT/r2.tgz -C /tmp r2
grep -E "meets its contract|Error|error" /tmp/r2/tb_rope.txt /tmp/r2/tb_norm.txt | head -60
