#!/usr/bin/env bash
# Session 35 run 3 (carry nothing): the H200 acceptance table of #3 and #4, only on an H200. Any other card
# exits at once (run 1 measured the tree on the H100 today). On an H200: build, torch_bench of every op, then
# session 31's norm_fp32_cached_from_first.patch beside the tree on norm_scale_shift's LayerNorm rows (its target
# the H200's issue-bound row with weight and bias at Wan 2.1, 83.9% of copy in session 30; predicted 2-4% faster
# there), then pytest of the three modules whose kernels changed since session 30 while the time allows.
set -u
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $card"
[[ $card == *H200* ]] || exit 0
LIMIT_S=${LIMIT_S:-560}
T=/tmp/h200
NSS=("norm_scale_shift layer_norm affine" "norm_scale_shift layer_norm")
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/h200.tgz
build_tree
bench_all
snapshot
(($(left) > 130)) && swap_patch docs/runs/2026-12-07-session31-run1/norm_fp32_cached_from_first.patch from_first \
  "${NSS[@]}"
pytest_while_time rope rmsnorm qknorm_rope_forms
grep -h "copy bandwidth" $T/torch_bench.txt $T/tb_*.txt 2>/dev/null
contract_summary $T/torch_bench.txt $T/tb_*.txt 2>/dev/null
