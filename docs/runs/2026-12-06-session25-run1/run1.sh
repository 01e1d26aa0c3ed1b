#!/usr/bin/env bash
# Session 25 run 1: the whole tree (5c003b6's sources) checked once: build, the GPU GoogleTest suite (small shapes),
# pytest of every module (diffusers installed from the carried .whl/ for the FLUX.1 mount tests), memcheck and
# racecheck over every GPU test, `dfuse verify --quick`, `dfuse bench` of every op. torch_bench runs in run 2.
set -u
T=/tmp/r1
mkdir -p $T
DFUSE_CHECK_SKIP=ctest_host,torch_bench DFUSE_CHECK_BUDGET_S=530 \
  timeout 560 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp build-gpu/logs/*.log $T/ 2>/dev/null
for f in $T/*; do [[ -f $f && $(stat -c %s "$f") -gt 200000 ]] && gzip "$f"; done
tar czf $OUT/r1.tgz -C /tmp r1
nvidia-smi --query-gpu=name --format=csv,noheader
tail -20 $T/summary.md
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck.log* $T/racecheck.log* 2>/dev/null | sort | uniq -c
grep -h " passed\| failed\| error" $T/pytest_*.log 2>/dev/null | head -30
