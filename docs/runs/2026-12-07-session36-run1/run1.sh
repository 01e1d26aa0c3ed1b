#!/usr/bin/env bash
# Session 36 run 1 (any card; carry nothing). qknorm_rope_staged_async.patch: the QK-norm + RoPE head-group kernel
# (ops/rope/qknorm_rope_rows.cu: fused_qknorm_rope, fused_inplace_qknorm_rope, flux2_strided_qknorm_rope,
# flux2_qkv_epilogue) stages each half-warp's next step (its R heads, and its item's cos / sin rows) in shared
# memory by cp.async while it computes the current one: two stages per half-warp, each lane reading back only the
# chunks it copied (no barrier); a head slot the half does not write is not copied. Arithmetic unchanged (the same
# values, read from shared memory instead of registers loaded from global). ptxas here (after the review): 72-80
# registers for D = 128 (tree 72-80), 109-125 for D = 256 (tree 110-123), no spills; dynamic shared memory per
# block 48 KB (D = 128, 16-bit x and tables), 64 KB (D = 128 with fp32 x or tables; D = 256 with 16-bit ones) or
# 96 KB (D = 256, fp32), so three blocks per SM for D = 128 and two for D = 256, as the registers bound them before.
# Why: session 36's ncu at FLUX.1 (H100, this call's predecessor): the tree's kernel latency-bound, 58% of DRAM
# bandwidth, 1.22 eligible warps per scheduler at 22.5 active warps per SM, a third of its stall cycles waiting on
# L1TEX (its loads), each half-warp waiting on HBM at every step of 4 heads.
# Prediction: FLUX.1 rows 4-8% faster on the H100 (fused_qknorm_rope 48.8 -> ~46 us, ahead of torch.compile's fast
# form 48.3), Wan 2.1 2-5% (1123 -> ~1080, 93.5% -> ~97% of copy); more on the H200, whose HBM needs more bytes in
# flight. On an H200 first the acceptance table of #3 and #4 (torch_bench of every op, the tree's rows).
set -u
LIMIT_S=${LIMIT_S:-560}
HERE=docs/runs/2026-12-07-session36-run1
QK=(fused_qknorm_rope fused_inplace_qknorm_rope flux2_strided_qknorm_rope flux2_qkv_epilogue)
T=/tmp/s36
source scripts/variant_bench.sh  # makes $T; snapshot archives it as $OUT/s36.tgz
sanitize_patched() {  # memcheck, pytest rope, racecheck (shared memory now) over the patched kernel, as time allows
  local tool
  for tool in memcheck rope racecheck; do
    (($(left) > 60)) || break
    if [[ $tool == rope ]]; then
      DFUSE_REQUIRE_CUDA=1 timeout $(($(left) - 20)) python3 -m pytest python/tests/test_rope_torch.py -q \
        -p no:cacheprovider >"$T/pytest_rope_$1.log" 2>&1
      echo "pytest rope with $1 rc $? at ${SECONDS}s: $(tail -n 1 "$T/pytest_rope_$1.log")"
    else
      DFUSE_REQUIRE_CUDA=1 timeout $(($(left) - 20)) compute-sanitizer --tool $tool --error-exitcode 1 python3 -m \
        pytest python/tests/test_qknorm_rope_forms_torch.py python/tests/test_flux2_rope_torch.py -q \
        -p no:cacheprovider -k "(out_of_place or pack_kv or strided_qknorm_rope or qkv_epilogue) and not float16" \
        >"$T/${tool}_$1.log" 2>&1
      echo "$tool with $1 rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$T/${tool}_$1.log" | tail -1); $(tail -n 1 "$T/${tool}_$1.log")"
    fi
    snapshot
  done
}
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $card"
build_tree
if [[ $card == *H200* ]]; then
  bench_all
  snapshot
else
  bench tree "${QK[@]}"
  snapshot
fi
SWAP_PYTEST="qknorm_rope_forms flux2_rope" SWAP_WITH_PATCH=sanitize_patched \
  swap_patch $HERE/qknorm_rope_staged_async.patch staged_async "${QK[@]}"
base=$T/tb_tree.json
[[ -f $T/torch_bench.json ]] && base=$T/torch_bench.json
python3 bench/compare_runs.py tree=$base staged_async=$T/tb_staged_async.json | grep "qknorm_rope\|qkv_epilogue"
grep -h "copy bandwidth" $T/torch_bench.txt $T/tb_*.txt 2>/dev/null
contract_summary $T/torch_bench.txt $T/tb_*.txt 2>/dev/null
