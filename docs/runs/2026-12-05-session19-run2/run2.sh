#!/usr/bin/env bash
# Session 19 run 2: the QK-norm + RoPE head-group kernel with q/k loaded L2 evict-first when the outputs fit in
# L2 (qknorm_rope_rows_evict_first.cu.txt) beside the tree's kernel, torch_bench of the ops on that kernel at
# their model shapes, both builds in this call (bitwise checks by torch_bench's contract column).
set -u
R=docs/runs/2026-12-05-session19-run2
T=/tmp/r2
mkdir -p $T
OPS="fused_qknorm_rope fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue"
DFUSE_CHECK_SKIP=python_deps,ctest_host,memcheck,racecheck,dfuse_bench \
DFUSE_TORCH_BENCH_OPS="$OPS" DFUSE_CHECK_BUDGET_S=300 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $?"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
K=src/ops/rope/qknorm_rope_rows.cu
cp $K /tmp/qk_tree.cu
cp $R/qknorm_rope_rows_evict_first.cu.txt $K
timeout 150 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_EF.log 2>&1; echo "build EF rc $?"
timeout 150 python3 bench/torch_bench.py --host-calls 100 --json $T/tb_EF.json --ops $OPS >$T/tb_EF.txt 2>&1
cp /tmp/qk_tree.cu $K
for f in $T/*; do [[ -f $f && $(stat -c %s "$f") -gt 100000 ]] && gzip "$f"; done
tar czf $OUT/r2.tgz -C /tmp r2
tail -8 $T/summary.md
grep -h "meets its contract" $T/*.txt $T/torch_bench.log 2>/dev/null | sort | uniq -c
python3 - <<'PY'
import json
T = '/tmp/r2'
def tb(n):
    return {(r['op'], r['shape'], r['impl']): r for r in json.load(open(f'{T}/{n}.json'))['results']}
a, b = tb('torch_bench'), tb('tb_EF')
for k, r in a.items():
    if r['impl'] != 'dfuse': continue
    e = b.get(k); c = a[(k[0], k[1], 'compile')]
    print(f"{k[0][:28]:28s} {k[1]:13s} tree {r['median_us']:7.1f} ({r['pct_copy_bw']:5.1f}%) EF {e['median_us']:7.1f} ({e['pct_copy_bw']:5.1f}%) compile {c['median_us']:7.1f}")
PY
