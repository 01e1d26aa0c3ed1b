#!/usr/bin/env bash
# Session 22 run 2: the tree checked (GPU ctest on small shapes; pytest of the QK-norm, RoPE and joint-QKV modules;
# memcheck and racecheck over their GPU tests; torch_bench), then HEAD's rope_launch.cuh rebuilt beside it
# ("grid_head": a grid of parts x resident blocks, the parts of a launch running one after another) and
# benchmarked in the same call. The tree: run 1's four 16-bit heads in flight as packs, the D = 128 QK-norm + RoPE
# kernel at three blocks per SM, the joint-QKV kernels back at two heads, and each part's grid at resident / parts.
set -u
R=docs/runs/2026-12-06-session22-run2
T=/tmp/r2
mkdir -p $T
OPS="qk_head_layernorm qk_rmsnorm qk_rmsnorm_native fused_qknorm_rope fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue qwen_qkv_epilogue hunyuan_qkv_rope_pack"
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,dfuse_verify,dfuse_bench \
DFUSE_SANITIZER_FILTER='*QkRmsNorm*:*QkHead*:*QkNormRope*:*Flux2Rope*:*JointQkv*' \
DFUSE_PYTEST_MODULES="$P/test_rmsnorm_torch.py $P/test_layernorm_torch.py $P/test_rope_torch.py $P/test_qknorm_rope_forms_torch.py $P/test_flux2_rope_torch.py $P/test_joint_qkv_torch.py" \
DFUSE_TORCH_BENCH_OPS="$OPS" DFUSE_CHECK_BUDGET_S=420 \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
cp src/ops/rope/rope_launch.cuh /tmp/rope_launch_tree.cuh
cp $R/rope_launch.cuh.head.txt src/ops/rope/rope_launch.cuh
timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_grid_head.log 2>&1
echo "build grid_head rc $? at ${SECONDS}s"
DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so timeout 120 python3 bench/torch_bench.py \
  --json $T/tb_grid_head.json --ops $OPS >$T/tb_grid_head.txt 2>&1
echo "torch_bench grid_head rc $? at ${SECONDS}s"
cp /tmp/rope_launch_tree.cuh src/ops/rope/rope_launch.cuh
tar czf $OUT/r2.tgz -C /tmp r2
tail -18 $T/summary.md
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck*.log $T/racecheck*.log | sort | uniq -c
grep -h "passed\|failed" $T/pytest*.log | tail -8
grep -h "meets its contract\|mismatch\|FAIL\|Error" $T/torch_bench.log $T/tb_grid_head.txt | sort | uniq -c | head -20
python3 bench/compare_runs.py tree=$T/torch_bench.json grid_head=$T/tb_grid_head.json
