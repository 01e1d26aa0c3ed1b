#!/usr/bin/env bash
# Session 26 run 1: the card decides.
# On an H200, the acceptance check of the tree (ace4673's kernels, unchanged since 8046269) part 1: build, the GPU
# GoogleTest suite (small shapes), pytest of every module against torch eager chains (diffusers from the carried
# .whl/), memcheck over every GPU test, `dfuse verify --quick`. Part 2 (run 2, same machine): torch_bench of every op.
# Racecheck and dfuse bench ran on an H100 over the same sources (session 25 run 1).
# On an H100: session 25 run 5 (rope_rotate_half at four blocks per SM) plus five blocks per SM.
set -u
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  T=/tmp/r1
  mkdir -p $T
  source scripts/variant_bench.sh
  build_tree
  S=docs/runs/2026-12-06-session25-run5
  bench tree rope_rotate_half
  swap src/ops/rope/rope_rotate_half.cu $S/rope_rotate_half_b4.cu.txt b4 rope_rotate_half
  swap src/ops/rope/rope_rotate_half.cu $S/rope_rotate_half_b5.cu.txt b5 rope_rotate_half
  bench tree2 rope_rotate_half
  tar czf $OUT/r1.tgz -C /tmp r1
  nvidia-smi --query-gpu=name --format=csv,noheader
  grep -h "mismatch\|FAIL\|Error" $T/tb_*.txt | sort | uniq -c | head
  python3 bench/compare_runs.py tree=$T/tb_tree.json b4=$T/tb_b4.json b5=$T/tb_b5.json tree2=$T/tb_tree2.json
  exit
fi
T=/tmp/r1
mkdir -p $T
DFUSE_CHECK_SKIP=ctest_host,racecheck,dfuse_bench,torch_bench DFUSE_CHECK_BUDGET_S=540 \
  timeout 570 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
for f in $T/*; do [[ -f $f && $(stat -c %s "$f") -gt 200000 ]] && gzip "$f"; done
tar czf $OUT/r1.tgz -C /tmp r1
nvidia-smi --query-gpu=name --format=csv,noheader
tail -20 $T/summary.md
grep -h "ERROR SUMMARY" $T/memcheck.log* 2>/dev/null | sort | uniq -c
grep -h " passed\| failed\| error" $T/pytest_*.log 2>/dev/null | head -30
