#!/usr/bin/env bash
# Session 32 run 1. On an H200: session 30 run 2 (the acceptance check of the tree: build, torch_bench of every
# op in one run, then the GPU suite, memcheck, racecheck and dfuse verify in the time left). Prediction: the rows
# of the ops whose kernels did not change since session 30 run 1 within 1% of it; rmsnorm_scale,
# rmsnorm_decomposed_scale_shift and rmsnorm_modulate_fp32 3-4% faster at Wan 2.1 than their last H200 numbers
# (session 31's staged-row alignment, measured on an H100 only); the sanitizers clean.
# On any other card: the checks of the tree that the staged-row alignment (d5f9bb6) has had only over three
# pytest modules and 37 GPU tests (session 31 run 1, on a superset of the change): build, the GPU suite, pytest of
# every module against torch 2.11 eager chains, memcheck and racecheck over every GPU test.
set -u
LIMIT_S=${LIMIT_S:-570}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT_S=$LIMIT_S exec bash docs/runs/2026-12-07-session30-run2/run2.sh
fi
T=/tmp/c
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/c.tgz
DFUSE_CHECK_SKIP=python_deps,ctest_host,dfuse_verify,dfuse_bench,torch_bench \
  DFUSE_CHECK_BUDGET_S=$((LIMIT_S - 15)) scripts/gpu_check.sh $T/check >$T/check.txt 2>&1
echo "gpu_check (build, ctest_gpu, pytest, memcheck, racecheck) rc $? at ${SECONDS}s"
cp build-gpu/logs/{ctest_gpu,memcheck,racecheck,pytest}*.log $T/ 2>/dev/null
for f in $T/*.log; do [[ $(stat -c %s "$f") -gt 200000 ]] && gzip "$f"; done
snapshot
nvidia-smi --query-gpu=name --format=csv,noheader
tail -18 $T/check/summary.md
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck.log* $T/racecheck.log* 2>/dev/null | sort | uniq -c
grep -h "passed\|failed" $T/check/steps.log | grep "^=\+ .* in " | head -30
