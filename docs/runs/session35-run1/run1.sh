#!/usr/bin/env bash
# Prepared in session 34 for the next session's first call (any card; carry nothing). The checks session 34 could not
# run on its kernels (9148629): memcheck over qk_rmsnorm's vectorized kernel with its new grid (each of q and k up to
# the resident blocks) at the FLUX.1 packed shape, where the grid differs from the old one; pytest rope, rmsnorm and
# qknorm_rope_forms against torch eager chains; then torch_bench of every op (on an H200 the acceptance table of #3
# and #4, with rope_rotate_half's flat form at Wan 2.1: predicted 402-403 us, as flat8 in session 30).
set -u
LIMIT_S=${LIMIT_S:-560}
T=/tmp/s35
source scripts/variant_bench.sh
build_tree
for m in rope rmsnorm qknorm_rope_forms; do
  DFUSE_REQUIRE_CUDA=1 timeout 90 python3 -m pytest "python/tests/test_${m}_torch.py" -q -p no:cacheprovider \
    >"$T/pytest_$m.log" 2>&1
  echo "pytest $m rc $? at ${SECONDS}s: $(tail -1 "$T/pytest_$m.log")"
done
snapshot
DFUSE_REQUIRE_CUDA=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 1 python3 -m pytest \
  python/tests/test_rmsnorm_torch.py -q -p no:cacheprovider -k "qk_packed and bfloat16 and 4608" \
  >"$T/memcheck_qk.log" 2>&1
echo "memcheck qk rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY" "$T/memcheck_qk.log" | tail -1)"
snapshot
bench_all
snapshot
grep -h "copy bandwidth" $T/torch_bench.txt
contract_summary $T/torch_bench.txt
nvidia-smi --query-gpu=name --format=csv,noheader
