#!/usr/bin/env bash
# Session 25 run 3 (H100 wanted: run 2 measured rope_rotate_half at Wan 2.1 0.944x torch.compile there, 1.04x on
# the H200): rope_rotate_half's head groups beside the tree, each rebuilt in this call: "g2" every input by the
# two-head kernel, "g4" groups of at most 4 heads, "unrolled" the 8-head pair loop unrolled for fp32 opmath too
# (session 17's G). Then gpu_check's pytest step alone (every module, at most GPU-memory/13 GiB at once: the
# check of run 1's out-of-memory fix) in the time left.
set -u
R=docs/runs/2026-12-06-session25-run3
T=/tmp/r3
mkdir -p $T
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_BUDGET_S=200 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check (build) rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
build() { timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >$T/build_$1.log 2>&1; echo "build $1 rc $? at ${SECONDS}s"; }
bench() {  # bench NAME OPS...
  local name=$1; shift
  timeout 100 python3 bench/torch_bench.py --json $T/tb_$name.json --ops "$@" >$T/tb_$name.txt 2>&1
  echo "torch_bench $name rc $? at ${SECONDS}s"
}
F=src/ops/rope/rope_rotate_half.cu
bench tree rope_rotate_half
cp $F /tmp/keep.cu
for v in g2 g4 unrolled; do
  cp $R/rope_rotate_half_$v.cu.txt $F && build $v && bench $v rope_rotate_half
done
cp /tmp/keep.cu $F && touch $F && build tree
bench tree2 rope_rotate_half
left=$((570 - SECONDS))
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_BUDGET_S=$left scripts/gpu_check.sh $T/pytest >$T/check_pytest.txt 2>&1
echo "gpu_check (pytest, budget ${left}s) rc $? at ${SECONDS}s"
cp build-gpu/logs/pytest*.log $T/pytest/ 2>/dev/null
tar czf $OUT/r3.tgz -C /tmp r3
nvidia-smi --query-gpu=name --format=csv,noheader
grep -h "mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head
grep -h "at most\|passed\|failed" $T/pytest/pytest.log | head -30
tail -16 $T/pytest/summary.md
python3 bench/compare_runs.py tree=$T/tb_tree.json g2=$T/tb_g2.json g4=$T/tb_g4.json unrolled=$T/tb_unrolled.json tree2=$T/tb_tree2.json
