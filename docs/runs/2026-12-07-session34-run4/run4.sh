#!/usr/bin/env bash
# Session 34 run 4: what run 3 would do, cut to the one short call the device time still allows (LIMIT_S about 250):
# no tree build or tree bench; the tree's side is session 33's H100 table (or session 30's H200 rows) and, within
# the call, each row's torch.compile time. Both patches applied before the only build (gpu_check's build steps), then
# torch_bench of the five ops, pytest rope (rotate_half) and rmsnorm (qk) against torch eager chains, memcheck over
# the flat form's cases, each only while the time allows. Predictions: run 1's and run 2's.
set -u
LIMIT_S=${LIMIT_S:-250}
T=/tmp/k
source scripts/variant_bench.sh
git apply docs/runs/2026-12-07-session34-run1/rope_rotate_half_flat_large.patch &&
  git apply docs/runs/2026-12-07-session34-run2/qk_rmsnorm_rope_grid.patch && echo "patches applied at ${SECONDS}s"
build_tree
bench both rope_rotate_half qk_head_layernorm qk_rmsnorm qk_rmsnorm_native qk_rmsnorm_storage_dtype
snapshot
if (($(left) > 45)); then
  DFUSE_REQUIRE_CUDA=1 timeout $(($(left) - 5)) python3 -m pytest python/tests/test_rope_torch.py -q -p no:cacheprovider \
    -k rotate_half >"$T/pytest_rope_both.log" 2>&1
  echo "pytest rope rc $? at ${SECONDS}s: $(tail -1 "$T/pytest_rope_both.log")"
  snapshot
fi
if (($(left) > 45)); then
  DFUSE_REQUIRE_CUDA=1 timeout $(($(left) - 5)) python3 -m pytest python/tests/test_rmsnorm_torch.py -q \
    -p no:cacheprovider -k qk >"$T/pytest_rmsnorm_both.log" 2>&1
  echo "pytest rmsnorm rc $? at ${SECONDS}s: $(tail -1 "$T/pytest_rmsnorm_both.log")"
  snapshot
fi
if (($(left) > 45)); then
  DFUSE_REQUIRE_CUDA=1 timeout $(($(left) - 5)) compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest \
    python/tests/test_rope_torch.py -q -p no:cacheprovider -k "rotate_half and bfloat16 and (hunyuan_video or 18000)" \
    >"$T/memcheck_rope_both.log" 2>&1
  echo "memcheck rope rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY" "$T/memcheck_rope_both.log" | tail -1)"
  snapshot
fi
grep -h "copy bandwidth" $T/tb_both.txt
contract_summary $T/tb_both.txt
nvidia-smi --query-gpu=name --format=csv,noheader
