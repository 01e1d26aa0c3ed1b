#!/usr/bin/env bash
# Session 30 run 1: on an H200, session 28 run 2 (rope_rotate_half's flat8 beside the tree, then the acceptance
# torch_bench of every op and pytest); on any other card, session 29 run 6 (the staged-row alignment patches of the
# RMSNorm kernels, chaining run 7's adoption checks of a winner).
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash docs/runs/2026-12-07-session28-run2/run2.sh
fi
exec bash docs/runs/2026-12-07-session29-run6/run6.sh
