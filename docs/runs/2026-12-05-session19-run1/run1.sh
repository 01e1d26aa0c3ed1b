#!/usr/bin/env bash
# Session 19 run 1: the tree (session 18's uncommitted work: rope_rotate_half's rotary and tail items in two
# ranges, rmsnorm_tanh_residual's tanh(gate) kept in shared memory for a gate shared by a run of rows; this
# session's packed normalized pairs in the RMSNorm rows, rms_norm_element_pair) checked (pytest rope + rmsnorm,
# memcheck + racecheck over the Rope and RmsNorm GPU tests) and benched (dfuse bench, torch_bench, rot_split.py)
# against, rebuilt in the same call: HEAD's files (head/), the tree without the packed pairs
# (no_packed_rms_norm_rows.cuh.txt), and rope_rotate_half with x loaded L2 evict-first when the output fits in
# L2 (rope_evict_first.cu.txt).
set -u
R=docs/runs/2026-12-05-session19-run1
T=/tmp/r1
mkdir -p $T
P=python/tests
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,dfuse_verify \
DFUSE_SANITIZER_FILTER='*Rope*:*RmsNorm*' DFUSE_PYTEST_MODULES="$P/test_rope_torch.py $P/test_rmsnorm_torch.py" \
DFUSE_BENCH_OPS=rope_rotate_half,rmsnorm_tanh_residual,rmsnorm_scale DFUSE_CHECK_BUDGET_S=330 \
DFUSE_TORCH_BENCH_OPS="rope_rotate_half rmsnorm_tanh_residual rmsnorm_scale rmsnorm_decomposed_scale_shift" \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $?"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
TB="python3 bench/torch_bench.py --host-calls 100 --iters 60"
B="cmake --build build-gpu --target dfuse_cuda -j16"
timeout 40 python3 docs/runs/2026-12-04-session18-run3/rot_split.py >$T/rot_split_tree.txt 2>&1
FILES="src/cuda/rms_norm_rows.cuh src/ops/norm/rmsnorm_tanh_residual.cu src/ops/norm/rmsnorm_tanh_residual.h src/ops/rope/rope_rotate_half.cu src/ops/rope/rope_row_groups.cuh"
mkdir -p /tmp/tree; for f in $FILES; do cp $f /tmp/tree/; done
# 1. HEAD's files
for f in $FILES; do cp $R/head/$(basename $f).txt $f; done
timeout 150 $B >$T/build_HEAD.log 2>&1; echo "build HEAD rc $?"
timeout 40 python3 docs/runs/2026-12-04-session18-run3/rot_split.py >$T/rot_split_head.txt 2>&1
for op in rope_rotate_half rmsnorm_tanh_residual; do timeout 60 build-gpu/dfuse bench --op $op --json $T/db_HEAD_$op.json >$T/db_HEAD_$op.txt 2>&1; done
timeout 100 $TB --json $T/tb_HEAD.json --ops rope_rotate_half rmsnorm_tanh_residual >$T/tb_HEAD.txt 2>&1
for f in $FILES; do cp /tmp/tree/$(basename $f) $f; done
# 2. the tree without the packed pairs
cp $R/no_packed_rms_norm_rows.cuh.txt src/cuda/rms_norm_rows.cuh
timeout 150 $B >$T/build_NP.log 2>&1; echo "build NP rc $?"
for op in rmsnorm_tanh_residual rmsnorm_scale; do timeout 60 build-gpu/dfuse bench --op $op --json $T/db_NP_$op.json >$T/db_NP_$op.txt 2>&1; done
timeout 100 $TB --json $T/tb_NP.json --ops rmsnorm_tanh_residual rmsnorm_scale rmsnorm_decomposed_scale_shift >$T/tb_NP.txt 2>&1
cp /tmp/tree/rms_norm_rows.cuh src/cuda/rms_norm_rows.cuh
# 3. rope_rotate_half with evict-first x loads
cp $R/rope_evict_first.cu.txt src/ops/rope/rope_rotate_half.cu
timeout 150 $B >$T/build_EF.log 2>&1; echo "build EF rc $?"
timeout 60 build-gpu/dfuse bench --op rope_rotate_half --json $T/db_EF_rope_rotate_half.json >$T/db_EF.txt 2>&1
timeout 60 $TB --json $T/tb_EF.json --ops rope_rotate_half >$T/tb_EF.txt 2>&1
cp /tmp/tree/rope_rotate_half.cu src/ops/rope/rope_rotate_half.cu
for f in $T/*; do [[ -f $f && $(stat -c %s "$f") -gt 100000 ]] && gzip "$f"; done
tar czf $OUT/r1.tgz -C /tmp r1
tail -14 $T/summary.md
grep -h " passed\| failed\|rror" $T/pytest_*.log | tail -4
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck.log $T/racecheck.log | sort | uniq -c
grep -h "meets its contract" $T/*.txt $T/torch_bench.log 2>/dev/null | sort | uniq -c
echo "== rot_split tree"; cat $T/rot_split_tree.txt; echo "== HEAD"; cat $T/rot_split_head.txt
python3 $R/compare.py
