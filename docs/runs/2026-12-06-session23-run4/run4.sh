#!/usr/bin/env bash
# Session 23 run 4: the final tree checked: GPU ctest (small shapes), pytest of the LayerNorm, fp32-norm,
# scale-residual-norm and adaLN-value modules, memcheck and racecheck over their GPU tests, torch_bench of the
# LayerNorm and adaLN-value ops.
set -u
T=/tmp/r4
mkdir -p $T
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,dfuse_verify,dfuse_bench \
DFUSE_SANITIZER_FILTER='*LayernormGpu*:*NormFp32Gpu*:*AdalnValues*' \
DFUSE_PYTEST_MODULES="$P/test_layernorm_torch.py $P/test_norm_fp32_torch.py $P/test_scale_residual_norm_torch.py $P/test_adaln_values_torch.py" \
DFUSE_TORCH_BENCH_OPS="qk_head_layernorm layernorm_modulate fp32_layernorm_bf16 temb_table_slices" \
DFUSE_CHECK_BUDGET_S=270 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so timeout 40 python3 bench/torch_bench.py --json $T/tb_nss.json \
  --ops "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" >$T/tb_nss.txt 2>&1
echo "torch_bench nss rc $? at ${SECONDS}s"
tar czf $OUT/r4.tgz -C /tmp r4
nvidia-smi --query-gpu=name --format=csv,noheader
tail -14 $T/summary.md
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck*.log $T/racecheck*.log | sort | uniq -c
grep -h "passed\|failed" $T/pytest_*.log | sort | uniq
grep -h "mismatch\|FAIL\|Error" $T/torch_bench.log $T/tb_nss.txt | sort | uniq -c | head
python3 bench/compare_runs.py tree=$T/torch_bench.json
python3 bench/compare_runs.py tree=$T/tb_nss.json
