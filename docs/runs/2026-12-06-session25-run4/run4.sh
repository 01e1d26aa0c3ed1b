#!/usr/bin/env bash
# Session 25 run 4 (H100, warm after run 3, run 3's build): ncu of rope_rotate_half beside torch.compile's kernel at
# FLUX.1 and Wan 2.1 (gpu_check's profile step alone). Ran as one command line; written out here.
mkdir -p /tmp/r4
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_PROFILE=1 DFUSE_PROFILE_OPS="rope_rotate_half" DFUSE_CHECK_BUDGET_S=250 \
  scripts/gpu_check.sh /tmp/r4 >/tmp/r4/check.txt 2>&1
echo rc $?
cp build-gpu/logs/*.log /tmp/r4/
tar czf $OUT/r4.tgz -C /tmp r4
tail -5 /tmp/r4/summary.md
grep -c . /tmp/r4/profile.csv
