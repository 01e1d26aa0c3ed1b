#!/usr/bin/env bash
# Session 28 run 2 (prepared for the next session's first call): rope_rotate_half's flat8 form beside the tree on
# whichever card comes, then the tree's acceptance torch_bench. Session 28 run 1 measured flat8 on an H100 only:
# Wan 2.1 583.2-583.6 -> 537.1-537.3 us (torch.compile 541.9-542.0; 0.93x -> 1.01x), FLUX.1 24.1-24.2 -> 24.4
# (compile 24.0-24.1), bit-exact; GPU suite, pytest of every module, memcheck and racecheck clean with it in the
# tree. On the H200 (session 18) the tree ran Wan 2.1 at 402.8 us against compile's 423.0; flat8 is compile's
# layout, so the prediction there is ~420 us, a loss. flat8 goes into the tree only if it does not lose on the H200.
# On an H200: then session 27 run 2 (build, torch_bench of every op, pytest in the time left) with what is left of
# LIMIT_S. On an H100: then torch_bench of every op (the tree's rope_rotate_half row is the same-call baseline).
set -u
LIMIT_S=${LIMIT_S:-590}
T=/tmp/f
mkdir -p $T
source scripts/variant_bench.sh
snapshot() { tar czf $OUT/f.tgz -C /tmp f; }
build_tree
bench tree rope_rotate_half
swap src/ops/rope/rope_rotate_half.cu docs/runs/2026-12-06-session26-run3/rope_rotate_half_flat8.cu.txt flat8 \
  rope_rotate_half  # swap snapshots after the variant's bench
nvidia-smi --query-gpu=name --format=csv,noheader
python3 bench/compare_runs.py tree=$T/tb_tree.json flat8=$T/tb_flat8.json
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT_S=$((LIMIT_S - SECONDS)) exec bash docs/runs/2026-12-06-session27-run2/run2.sh
fi
timeout $((LIMIT_S - SECONDS - 15)) python3 bench/torch_bench.py --json $T/torch_bench.json >$T/torch_bench.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
snapshot
grep -c "meets its contract against eager: True, fused kernel ran: True" $T/torch_bench.txt
grep "meets its contract" $T/torch_bench.txt | grep -v "True, fused kernel ran: True" | head
python3 bench/compare_runs.py h100=$T/torch_bench.json | tail -75
