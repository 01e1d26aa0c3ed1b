#!/usr/bin/env bash
# Session 29 run 2: where the RMSNorm rows kernel's time goes at Wan 2.1 on the H100. The same one-row kernel
# (cuda/rms_norm_rows.cuh) runs F.rms_norm's chain at 99.4% of copy (rmsnorm_scale_shift, 517.8 us) but the
# storage-dtype chain at 96.1% (rmsnorm_scale, 535.9) and the decomposed chain at 94.6%
# (rmsnorm_decomposed_scale_shift, 544.0; run 1). ncu sections (warp states, scheduler, source counters) of the
# three kernels, one launch each, dfuse's side only. On an H200 instead: session 28 run 2 (rope_rotate_half's
# flat form beside the tree, then the acceptance torch_bench and pytest), the first H200 since session 22.
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash docs/runs/2026-12-07-session28-run2/run2.sh
fi
T=/tmp/p
mkdir -p $T
source scripts/variant_bench.sh
build_tree
timeout 400 ncu --profile-from-start off -k "regex:rms_norm_rows_kernel" \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats \
  --section SourceCounters --print-summary none \
  python3 bench/kernel_profile.py --calls 1 --shapes Wan2.1-14B \
  --ops rmsnorm_scale_shift rmsnorm_scale rmsnorm_decomposed_scale_shift >$T/ncu.txt 2>&1
echo "ncu rc $? at ${SECONDS}s"
cp $T/ncu.txt $T/check.txt $OUT/ 2>/dev/null
grep -E "rms_norm_rows_kernel|Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Achieved Occupancy|Executed Instructions  " $T/ncu.txt | cut -c1-160
