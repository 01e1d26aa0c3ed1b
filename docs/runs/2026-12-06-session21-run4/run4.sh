#!/usr/bin/env bash
# Session 21 run 4: torch_bench of the ops whose last H200 numbers (sessions 14-16) were short of 85% of copy
# and that run 3 found near the copy on an H100: qk_head_layernorm, norm_scale_shift (four forms); the tree as is.
set -u
T=/tmp/r4
mkdir -p $T
DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,memcheck,racecheck,pytest,dfuse_verify,dfuse_bench,torch_bench \
DFUSE_CHECK_BUDGET_S=180 scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so timeout 60 python3 bench/torch_bench.py --json $T/tb.json \
  --ops qk_head_layernorm "norm_scale_shift layer_norm" "norm_scale_shift layer_norm affine" \
  "norm_scale_shift rms_norm" "norm_scale_shift rms_norm weight" >$T/tb.txt 2>&1
echo "torch_bench rc $? at ${SECONDS}s"
tar czf $OUT/r4.tgz -C /tmp r4
grep -E "copy bandwidth|meets its contract|\| dfuse \||\| compile \|" $T/tb.txt
