#!/usr/bin/env bash
# Session 32 run 3, with the device time left after runs 1 and 2 (about 330 s of running).
# On an H200: build, then torch_bench of every op in one run (the acceptance table of #3 and #4 on the current tree).
# On any other card: the two pytest modules run 1 skipped (it skipped gpu_check's python_deps step, so diffusers
# was missing: test_mount_flux.py and test_flux_quality_script.py), with diffusers installed from the carried
# wheels, then pytest of test_rmsnorm_torch.py again beside them.
set -u
LIMIT_S=${LIMIT_S:-330}
T=/tmp/a
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/a.tgz
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  build_tree
  timeout $((LIMIT_S - SECONDS - 10)) python3 bench/torch_bench.py --json $T/torch_bench.json >$T/torch_bench.txt 2>&1
  echo "torch_bench rc $? at ${SECONDS}s"
  snapshot
  contract_summary $T/torch_bench.txt
  grep -h "copy bandwidth" $T/torch_bench.txt
  python3 bench/compare_runs.py h200=$T/torch_bench.json \
    s30=docs/runs/2026-12-07-session30-run1/result_a/torch_bench.json | tail -75
else
  DFUSE_CHECK_SKIP=ctest_host,ctest_gpu,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
    DFUSE_PYTEST_MODULES="python/tests/test_mount_flux.py python/tests/test_flux_quality_script.py python/tests/test_rmsnorm_torch.py" \
    DFUSE_CHECK_BUDGET_S=$((LIMIT_S - 10)) scripts/gpu_check.sh $T/check >$T/check.txt 2>&1
  echo "gpu_check (python_deps, build, pytest of three modules) rc $? at ${SECONDS}s"
  cp build-gpu/logs/pytest*.log $T/ 2>/dev/null
  snapshot
  tail -18 $T/check/summary.md
  for f in $T/pytest_*.log; do echo "$(basename $f): $(tail -1 $f)"; done
fi
nvidia-smi --query-gpu=name --format=csv,noheader
