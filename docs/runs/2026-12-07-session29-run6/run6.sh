#!/usr/bin/env bash
# Session 29 run 6 (the last ~250 s of device time): the staged rows' shared memory aligned to 128 bytes
# (staged_align128.patch: the four kernels that stage rows by cp.async declare their dynamic shared memory
# __align__(128), was 16). Run 2's ncu: the storage-dtype and decomposed RMSNorm kernels, whose static shared memory
# is 2064 bytes (mean_lane_slots' 2048), read 2x the sectors for their staged row (24,192,000 excessive global
# sectors, 320 per 5120-element row, 2x the 16 per warp-wide 512-byte cp.async) and 2x the shared wavefronts of
# F.rms_norm's kernel (32 bytes static): a row staged 16 bytes off a 32-byte boundary splits every global sector
# over two shared ones. Prediction: rmsnorm_scale and rmsnorm_decomposed_scale_shift at Wan 2.1 ~2-4% faster (toward
# rmsnorm_scale_shift's 99% of copy), rmsnorm_scale_shift unchanged. No time for the tree beside it: compared
# with run 2's tree (same H100 model, another call; run-to-run spread ~1%).
set -u
T=/tmp/a
mkdir -p $T
git apply docs/runs/2026-12-07-session29-run6/staged_align128.patch || exit 1
source scripts/variant_bench.sh
build_tree
timeout $((${LIMIT_S:-200} - SECONDS)) python3 bench/torch_bench.py --json $T/tb_align128.json --ops rmsnorm_scale \
  rmsnorm_decomposed_scale_shift rmsnorm_tanh_residual scale_residual_norm_scale_shift rmsnorm_scale_shift \
  >$T/tb_align128.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
cp $T/tb_align128.* $T/summary.md $OUT/ 2>/dev/null
nvidia-smi --query-gpu=name --format=csv,noheader
grep -c "contract against eager: True, fused kernel ran: True" $T/tb_align128.txt
grep "meets its contract" $T/tb_align128.txt | grep -v "True, fused kernel ran: True"
python3 bench/compare_runs.py run2_tree=docs/runs/2026-12-07-session29-run2/result/tb_tree.json \
  align128=$T/tb_align128.json
grep "copy bandwidth" $T/tb_align128.txt
python3 bench/compare_runs.py run1=docs/runs/2026-12-07-session29-run1/torch_bench.json align128=$T/tb_align128.json \
  | grep "align128 [0-9]"
