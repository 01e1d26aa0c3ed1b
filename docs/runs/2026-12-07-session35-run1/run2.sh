#!/usr/bin/env bash
# Session 35 run 2 (carry .whl; on the machine run 1 left warm, whose build it reuses, or a fresh one): the tree's
# correctness checks on whatever card came: the GPU GoogleTest suite, pytest of every module against torch 2.11
# eager chains (diffusers from .whl), memcheck and racecheck over the GPU suite, `dfuse verify`. No benchmark.
set -u
T=/tmp/s35c
mkdir -p $T
DFUSE_CHECK_SKIP=ctest_host,dfuse_bench,torch_bench DFUSE_CHECK_BUDGET_S=${LIMIT_S:-540} scripts/gpu_check.sh $T \
  >$T/check.txt 2>&1
echo "gpu_check rc $?"
grep -h "passed\|failed" build-gpu/logs/pytest_*.log | tail -25
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" build-gpu/logs/memcheck.log build-gpu/logs/racecheck.log
tail -3 build-gpu/logs/dfuse_verify.log
tar czf $OUT/s35c.tgz -C /tmp s35c
tail -16 $T/summary.md
nvidia-smi --query-gpu=name --format=csv,noheader
