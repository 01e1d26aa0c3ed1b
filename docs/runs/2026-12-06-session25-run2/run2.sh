#!/usr/bin/env bash
# Session 25 run 2 (same warm H100, run 1's build): the three pytest modules whose model-shape tests ran out of GPU
# memory in run 1 (19 modules at once beside the sanitizers on an 80 GB card) rerun one at a time, then torch_bench
# of every op.
set -u
T=/tmp/r2
mkdir -p $T
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so DFUSE_REQUIRE_CUDA=1
for m in rmsnorm norm_fp32 scale_residual_norm; do
  timeout 120 python3 -m pytest python/tests/test_${m}_torch.py -q -rfEs -p no:cacheprovider >$T/pytest_$m.log 2>&1
  echo "pytest $m rc $? at ${SECONDS}s: $(tail -1 $T/pytest_$m.log)"
done
timeout 330 python3 bench/torch_bench.py --json $T/torch_bench.json >$T/torch_bench.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
tar czf $OUT/r2.tgz -C /tmp r2
nvidia-smi --query-gpu=name --format=csv,noheader
grep -c "meets its contract\|bitwise" $T/torch_bench.txt
tail -60 $T/torch_bench.txt
