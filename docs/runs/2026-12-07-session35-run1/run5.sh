#!/usr/bin/env bash
# Prepared in session 35 for the next session's first call (carry nothing). On an H200: run3.sh (build, torch_bench
# of every op as the acceptance table of #3 and #4, session 31's from_first patch beside the tree, pytest of the
# modules whose kernels changed since session 30). On any other card: build, then ncu of the QK-norm + RoPE kernels
# at FLUX.1 (fused_qknorm_rope out of place and fused_inplace_qknorm_rope in place, each beside torch.compile's
# kernel), the call session 35 lost when its machine was taken back: the in-place form runs 1.3 us (2.7%) behind the
# out-of-place one on the same bytes (H100, session 35: 50.1 against 48.8 us), and both at 0.97-0.99x of
# torch.compile's faster form. What the profile should say: whether the in-place kernel moves more DRAM bytes (its
# writes land in the packed qkv rows it read) or stalls longer on the same bytes, and where torch.compile's kernel
# issues fewer instructions per byte.
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $card"
[[ $card == *H200* ]] && exec bash docs/runs/2026-12-07-session35-run1/run3.sh
LIMIT_S=${LIMIT_S:-300}
T=/tmp/p
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/p.tgz
build_tree
(cd bench && timeout $(($(left) - 10)) ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
  --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
  --section InstructionStats --log-file $T/qknorm_rope_flux_sections.txt python3 kernel_profile.py --calls 1 \
  --shapes FLUX.1 --ops fused_qknorm_rope fused_inplace_qknorm_rope >$T/ncu.log 2>&1)
echo "ncu rc $? at ${SECONDS}s"
snapshot
grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Achieved Occupancy|Eligible Warps|Issued Warp|Registers Per|Executed Instructions  |Memory \[%\]" \
  $T/qknorm_rope_flux_sections.txt | cut -c1-150 | head -60
