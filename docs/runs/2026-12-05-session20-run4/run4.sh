#!/usr/bin/env bash
# Session 20 run 4: ncu of rmsnorm_scale's RMSNorm rows kernel beside torch.compile's kernel of the same chain on
# the H100 (BENCHMARKS session 20 / Next: compile reaches the copy at Wan 2.1 there, ours 90%), nothing else.
set -u
T=/tmp/r4
mkdir -p $T
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_PROFILE=1 DFUSE_PROFILE_OPS="rmsnorm_scale" DFUSE_CHECK_BUDGET_S=420 \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $?"
cp build-gpu/logs/profile.log $T/ 2>/dev/null
tar czf $OUT/r4.tgz -C /tmp r4
tail -16 $T/summary.md
grep -E "^\"|Kernel Name|gpu__time|dram__throughput" $T/profile.csv | cut -c1-300 | head -5
