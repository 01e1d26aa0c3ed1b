#!/usr/bin/env bash
# The main job: build dfuse, then verify every registered op against its eager chain and
# benchmark fused vs eager on this machine's device (the GPU when there is one, else the host).
#   scripts/run.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDFUSE_TESTS=OFF
cmake --build "$build" -j "$(nproc 2>/dev/null || echo 2)" --target dfuse_cli
"$build/dfuse" list
if "$build/dfuse" verify --device cuda --quick >/dev/null 2>&1; then
  device=cuda
  quick=()
else
  device=host
  quick=(--quick)  # the host is slow: small shapes
fi
echo "device: $device"
"$build/dfuse" verify --device "$device" "${quick[@]}"
"$build/dfuse" bench --device "$device" "${quick[@]}"
