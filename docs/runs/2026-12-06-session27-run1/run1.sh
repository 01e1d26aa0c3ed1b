#!/usr/bin/env bash
# Session 27 run 1: the card decides. On an H200, session 26 run 1's H200 branch (the acceptance check of the tree,
# part 1: build, GPU suite, pytest of every module with diffusers, memcheck, dfuse verify); run 2 follows on the
# same machine. On an H100, session 26 run 3 (rope_rotate_half's flat form beside the tree), then pytest of the
# layernorm module on the tree's build: session 26's host change to layernorm_modulate and
# layernorm_folded_modulate (one parameter helper) against torch eager chains, not run on a GPU before.
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash docs/runs/2026-12-06-session26-run1/run1.sh
fi
bash docs/runs/2026-12-06-session26-run3/run3.sh
DFUSE_REQUIRE_CUDA=1 DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so \
  timeout 120 python3 -m pytest python/tests/test_layernorm_torch.py -q -rfEs -p no:cacheprovider \
  >$OUT/pytest_layernorm.log 2>&1
echo "pytest layernorm rc $? at ${SECONDS}s"
tail -3 $OUT/pytest_layernorm.log
