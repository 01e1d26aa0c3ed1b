#!/usr/bin/env bash
# The test command: configure, build and run every host test (CTest label "host"). GPU tests
# (label "gpu") build here too but run only on a GPU machine (scripts/gpu_check.sh).
#   scripts/test.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" -L host --output-on-failure -j "$jobs"
