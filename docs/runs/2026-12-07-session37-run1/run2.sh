#!/usr/bin/env bash
# Session 37 run 2 (any card; carry nothing). Run 1 (session 36's run1.sh, on an H100) measured
# qknorm_rope_staged_async.patch 28% slower at FLUX.1 (48.6 -> 62.1 us) and 9% slower at Wan 2.1, where it was
# predicted 4-8% faster. This call asks why, with ncu of the tree's head-group kernel and the staged one at FLUX.1
# (fused_qknorm_rope, out of place; scripts/variant_bench.sh's profile: session 36's sections plus the memory tables). On an
# H200 first the acceptance table of #3 and #4 (torch_bench of every op: the tree, unchanged since session 30).
# Expectation: the staged kernel shows fewer blocks per SM than its registers allow (its 64 KB of dynamic shared
# memory at fp32 tables, plus the carve-out) or more stall on shared memory / the cp.async waits than the tree's
# L1TEX stalls it replaces; the same DRAM bytes.
set -u
LIMIT_S=${LIMIT_S:-540}
PATCH=docs/runs/2026-12-07-session36-run1/qknorm_rope_staged_async.patch
T=/tmp/s37
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s37.tgz
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $card"
build_tree
if [[ $card == *H200* ]]; then
  bench_all
  snapshot
fi
profile tree FLUX.1 fused_qknorm_rope
if git apply $PATCH; then
  build staged_async && profile staged_async FLUX.1 fused_qknorm_rope
  git apply -R $PATCH
fi
profile_summary $T/ncu_tree.txt $T/ncu_staged_async.txt
[[ -f $T/torch_bench.txt ]] && grep -h "copy bandwidth" $T/torch_bench.txt && contract_summary $T/torch_bench.txt
