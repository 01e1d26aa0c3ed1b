#!/usr/bin/env bash
# Session 37 run 3 (any card; carry nothing): run2.sh cut down to fit the device time left (~330 s). Only the staged
# kernel is profiled (session 36's result_ncu/ holds the tree's kernel with the same sections, on an H100): the patch
# applied before the one build, then ncu of fused_qknorm_rope at FLUX.1 (the staged kernel and torch.compile's).
# Expectation as in run2.sh.
set -u
LIMIT_S=${LIMIT_S:-240}
PATCH=docs/runs/2026-12-07-session36-run1/qknorm_rope_staged_async.patch
T=/tmp/s37
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s37.tgz
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader)"
git apply $PATCH && build_tree
(cd bench && timeout $(($(left) - 10)) ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  --section MemoryWorkloadAnalysis_Tables --section InstructionStats \
  --log-file $T/ncu_staged_async.txt python3 kernel_profile.py --calls 1 --shapes FLUX.1 --ops fused_qknorm_rope \
  >$T/ncu_staged_async.log 2>&1)
echo "ncu staged_async rc $? at ${SECONDS}s"
snapshot
git apply -R $PATCH
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Achieved Occupancy|Block Limit|Dynamic Shared|Eligible Warps|Issued Warp|Registers Per|Executed Instructions  |L1/TEX Hit|Shared Memory Configuration Size" \
  $T/ncu_staged_async.txt | cut -c1-150 | head -50
