#!/usr/bin/env bash
# Session 34 run 1 (prepared in session 33). rope_rotate_half_flat_large.patch: rope_rotate_half with 16-bit x and
# fp32 opmath from 2^26 elements up (Wan 2.1's 387M, HunyuanVideo's 101M; FLUX.1's 14M stays below) takes the flat
# form, torch.compile's layout: one item per thread, 8 bytes of one head's columns, no grid stride (sessions 26-28's
# flat8 with its threshold raised from 2^20, the rotation and the table loads shared with the grouped kernel).
# The grouped kernels' SASS is unchanged but for register order and a few address instructions in the
# storage-dtype 8-head kernels; the flat kernels take 30-32 registers. The patch also adds a partial-rotary pytest
# case over the threshold on a packed projection (1 x 18000 x 30 x 128, rot 96: the flat form's tail items).
# Prediction: H100 Wan 2.1 ~572 -> ~537 us (flat8 ran 537.0-537.3 in sessions 26-28; 1.01x torch.compile), FLUX.1
# unchanged (24.1: below the threshold); H200 Wan 2.1 unchanged within 1% (flat8 402.4 against 403.2, session 30),
# FLUX.1 unchanged (18.4). dfuse bench hunyuanvideo fp32-opmath (101M, now flat) not measured in either form before.
# Either card: build; rope_rotate_half on the tree; the patch built, benched (torch_bench and dfuse bench), pytest
# rope against torch eager chains, memcheck over its flat-form cases; reversed. Then on an H200 torch_bench of
# every op (the acceptance table of #3 and #4) and session 31's from_first on norm_scale_shift's LayerNorm rows; on
# an H100 torch_bench of every op in what is left.
set -u
LIMIT_S=${LIMIT_S:-560}
HERE=docs/runs/2026-12-07-session34-run1
T=/tmp/f
source scripts/variant_bench.sh
build_tree
bench tree rope_rotate_half
timeout 60 build-gpu/dfuse bench --op rope_rotate_half >"$T/dfuse_bench_tree.txt" 2>&1
echo "dfuse bench tree rc $? at ${SECONDS}s"
snapshot
flat_checks() {  # with the patch applied: dfuse bench and memcheck over the flat form's pytest cases
  timeout 60 build-gpu/dfuse bench --op rope_rotate_half >"$T/dfuse_bench_$1.txt" 2>&1
  echo "dfuse bench $1 rc $? at ${SECONDS}s"
  snapshot
  DFUSE_REQUIRE_CUDA=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest \
    python/tests/test_rope_torch.py -q -p no:cacheprovider -k "rotate_half and bfloat16 and (hunyuan_video or 18000)" \
    >"$T/memcheck_$1.log" 2>&1
  echo "memcheck $1 rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY" "$T/memcheck_$1.log" | tail -1)"
}
SWAP_PYTEST=rope SWAP_WITH_PATCH=flat_checks swap_patch $HERE/rope_rotate_half_flat_large.patch flat_large \
  rope_rotate_half
grep -h "copy bandwidth" $T/tb_*.txt
python3 bench/compare_runs.py tree=$T/tb_tree.json flat_large=$T/tb_flat_large.json
grep -h "rope_rotate_half" $T/dfuse_bench_*.txt | head -20
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bench_all
  snapshot
  (($(left) > 110)) && swap_patch docs/runs/2026-12-07-session31-run1/norm_fp32_cached_from_first.patch from_first \
    "norm_scale_shift layer_norm affine" "norm_scale_shift layer_norm"
  python3 bench/compare_runs.py tree=$T/torch_bench.json from_first=$T/tb_from_first.json 2>/dev/null |
    grep "norm_scale_shift layer_norm"
else
  bench_all
fi
snapshot
contract_summary $T/torch_bench.txt $T/tb_*.txt
nvidia-smi --query-gpu=name --format=csv,noheader
