#!/usr/bin/env bash
# Session 27 run 1: the card decides. On an H200, session 26 run 1's H200 branch (the acceptance check of the tree,
# part 1: build, GPU suite, pytest of every module with diffusers, memcheck, dfuse verify); run 2 follows on the
# same machine. On an H100, session 26 run 3 (rope_rotate_half's flat form beside the tree).
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash docs/runs/2026-12-06-session26-run1/run1.sh
fi
exec bash docs/runs/2026-12-06-session26-run3/run3.sh
