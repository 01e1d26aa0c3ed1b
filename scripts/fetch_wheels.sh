#!/usr/bin/env bash
# Downloads the Python wheels the GPU machine lacks (it cannot download) into .whl/, for the
# device runner to carry there; scripts/gpu_check.sh installs them offline when they are missing.
# Today: diffusers (the FLUX.1 mount's tests and scripts/flux_quality.py) for the machine's
# Python 3.12 on x86-64 Linux.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip download -q -d .whl --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
  diffusers==0.42.1
ls .whl
