#!/usr/bin/env bash
# Session 29 run 5: where run 2's ncu found excess in the storage-dtype RMSNorm kernel (rmsnorm_scale at Wan 2.1):
# 24,192,000 excessive global sectors (320 per row, one row's worth; F.rms_norm's chain in the same kernel has
# none) and 10.1 cycles per issue waiting on L1TEX against 6.9. The source counters' tables (top SASS lines per
# metric, with -lineinfo's source lines) of that one kernel.
set -u
T=/tmp/s
mkdir -p $T
source scripts/variant_bench.sh
build_tree
timeout $((${LIMIT_S:-190} - SECONDS)) ncu --profile-from-start off -k "regex:rms_norm_rows_kernel" -c 1 \
  --section SourceCounters --section WarpStateStats --print-details all --print-summary none \
  python3 bench/kernel_profile.py --calls 1 --shapes Wan2.1-14B --ops rmsnorm_scale >$T/ncu_source.txt 2>&1
echo "ncu rc $? at ${SECONDS}s"
cp $T/ncu_source.txt $OUT/
grep -v "^ *-* *$" $T/ncu_source.txt | tail -120 | cut -c1-200
