#!/usr/bin/env bash
# Session 20 run 2: the tree after run 1's kept variants (the table split by consecutive parts, the fp32-norm rows'
# decomposed mean by the whole block): the GPU tests on small shapes, pytest of the modules on the changed kernels,
# memcheck and racecheck over their GPU tests, dfuse bench and torch_bench of their ops.
set -u
T=/tmp/r2
mkdir -p $T
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,dfuse_verify \
DFUSE_PYTEST_MODULES="$P/test_rmsnorm_torch.py $P/test_adaln_values_torch.py $P/test_norm_fp32_torch.py" \
DFUSE_SANITIZER_FILTER='*RmsNorm*:*AdalnValues*:*NormFp32*' \
DFUSE_BENCH_OPS=rmsnorm_scale,rmsnorm_decomposed_scale_shift,temb_table_slices,ltx2_ada_values,rmsnorm_modulate_fp32,rmsnorm_tanh_residual_fp32 \
DFUSE_TORCH_BENCH_OPS="rmsnorm_decomposed_scale_shift temb_table_slices ltx2_ada_values rmsnorm_modulate_fp32 rmsnorm_tanh_residual_fp32 modulate_scale_shift" \
DFUSE_CHECK_BUDGET_S=420 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $?"
cp build-gpu/logs/*.log $T/ 2>/dev/null
tar czf $OUT/r2.tgz -C /tmp r2
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck.log $T/racecheck.log
grep -h "passed\|failed" $T/pytest.log | tail -3
grep -h "meets its contract" $T/torch_bench.log | grep -vc "True, fused kernel ran: True"
python3 - <<'PY'
import json
r = {(x['op'], x['shape'], x['impl']): x for x in json.load(open('/tmp/r2/torch_bench.json'))['results']}
for (op, shape, impl), d in r.items():
    c = r.get((op, shape, 'compile'))
    if impl == 'dfuse' and c:
        print(f"{op} {shape}: dfuse {d['median_us']:.1f} ({d['pct_copy_bw']:.1f}%) compile {c['median_us']:.1f} -> {c['median_us'] / d['median_us']:.3f}x")
PY
cat $T/summary.md
