#!/usr/bin/env bash
# Session 37 run 3 (any card; carry nothing): run2.sh cut down to fit the device time left (~330 s). Only the staged
# kernel is profiled (session 36's result_ncu/ holds the tree's kernel with the same sections, on an H100): the patch
# applied before the one build, then ncu of fused_qknorm_rope at FLUX.1 (the staged kernel and torch.compile's).
# Expectation as in run2.sh. (As run, the ncu command was written out here; now scripts/variant_bench.sh's profile.)
set -u
LIMIT_S=${LIMIT_S:-240}
PATCH=docs/runs/2026-12-07-session36-run1/qknorm_rope_staged_async.patch
T=/tmp/s37
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s37.tgz
echo "card: $(nvidia-smi --query-gpu=name --format=csv,noheader)"
git apply $PATCH && build_tree
profile staged_async FLUX.1 fused_qknorm_rope
git apply -R $PATCH
profile_summary $T/ncu_staged_async.txt
