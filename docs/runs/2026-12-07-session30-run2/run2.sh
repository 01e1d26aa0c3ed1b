#!/usr/bin/env bash
# Session 30 run 2 (prepared for the next session's first call). On an H200: the rest of the acceptance check of
# the tree, whose pytest of every module and torch_bench of eight ops ran on an H200 in session 30 run 1: build,
# torch_bench of every op (all 69 rows in one run, so the acceptance table comes from one copy measurement), then
# the GPU GoogleTest suite, memcheck and racecheck over it, and `dfuse verify --quick` in the time left. On any
# other card: session 29 run 6 (the RMSNorm kernels' staged rows on a 128-byte boundary, two forms beside the
# tree, chaining run 7's adoption checks of a winner).
# Prediction on the H200: the eight rows of run 1 within 1% of run 1; the other rows within 2% of their last H200
# numbers (session 22 and earlier) where their kernels did not change since; the sanitizers clean (as on the
# H100, session 25 run 1). Time: torch_bench of all rows fitted in session 29 run 1's 240 s call beside a build
# and two one-op benches (H100); the sanitizers take about 160 s beside the GPU suite (session 25 run 1).
set -u
LIMIT_S=${LIMIT_S:-560}
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash docs/runs/2026-12-07-session29-run6/run6.sh
fi
T=/tmp/h
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/h.tgz
build_tree
timeout $((LIMIT_S - SECONDS - 15 > 200 ? 200 : LIMIT_S - SECONDS - 15)) \
  python3 bench/torch_bench.py --json $T/torch_bench.json >$T/torch_bench.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
snapshot
if ((LIMIT_S - SECONDS > 90)); then
  DFUSE_CHECK_SKIP=python_deps,ctest_host,pytest,dfuse_bench,torch_bench \
    DFUSE_CHECK_BUDGET_S=$((LIMIT_S - SECONDS - 10)) scripts/gpu_check.sh $T/check >$T/check_rest.txt 2>&1
  echo "gpu_check (ctest_gpu, memcheck, racecheck, dfuse verify) rc $? at ${SECONDS}s"
  cp build-gpu/logs/{ctest_gpu,memcheck,racecheck,dfuse_verify}.log $T/ 2>/dev/null
  for f in $T/*.log; do [[ $(stat -c %s "$f") -gt 200000 ]] && gzip "$f"; done
  snapshot
fi
nvidia-smi --query-gpu=name --format=csv,noheader
tail -18 $T/check/summary.md 2>/dev/null
grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" $T/memcheck.log* $T/racecheck.log* 2>/dev/null | sort | uniq -c
grep -c "meets its contract against eager: True, fused kernel ran: True" $T/torch_bench.txt
grep "meets its contract" $T/torch_bench.txt | grep -v "True, fused kernel ran: True" | head
grep -h "copy bandwidth" $T/torch_bench.txt
python3 bench/compare_runs.py h200=$T/torch_bench.json \
  s30=docs/runs/2026-12-07-session30-run1/result_a/torch_bench.json | tail -75
