# Helpers for device-run scripts (docs/runs/*/runN.sh) that measure kernel variants beside the tree in one call,
# on build-gpu/ as scripts/gpu_check.sh builds it. Source it with T set to the run's result folder:
#
#   T=/tmp/r1; source scripts/variant_bench.sh   (prints the device's name, kept in $card)
#   build_tree                               gpu_check's build steps alone (its logs in $T)
#   bench tree OPS...                        torch_bench of OPS into $T/tb_tree.{json,txt} (40 s + 20 s per op at most)
#   swap FILE VARIANT.txt NAME OPS...        FILE replaced by VARIANT.txt, rebuilt, benched as NAME, restored and
#                                            rebuilt (so a later bench measures the tree again); `snapshot` runs
#                                            after the bench, so a call cut short during the rebuild still returns
#                                            the variant's numbers
#   snapshot                                 $T archived as $OUT/<name of T>.tgz
#   swap_patch PATCH NAME OPS...             the same with PATCH (git diff format, any files) applied and reversed;
#                                            with SWAP_PYTEST="MODULE ..." set, also pytest of
#                                            python/tests/test_MODULE_torch.py against eager before the reversal;
#                                            with SWAP_WITH_PATCH=FUNCTION set, FUNCTION NAME runs after them (more
#                                            checks of the patched build, e.g. a sanitizer over its tests)
#   left                                     seconds left of LIMIT_S (the script's limit) since it started
#   profile NAME SHAPE OPS...                ncu of OPS at model shape SHAPE (the dfuse kernel and torch.compile's,
#                                            bench/kernel_profile.py, one call each) into $T/ncu_NAME.txt: speed of
#                                            light, occupancy, launch, warp state, scheduler, memory and instruction
#                                            sections; snapshotted
#   profile_summary FILES...                 the lines of those sections that compare kernels, per ncu text output
#   bench_all                                torch_bench of every op into $T/torch_bench.{json,txt} (at most 200 s,
#                                            and 15 s short of LIMIT_S)
#   sanitize TOOL LIMIT_S K MODULES...       compute-sanitizer --tool TOOL (memcheck, racecheck) over pytest -k K of
#                                            python/tests/test_MODULE_torch.py, at most LIMIT_S seconds and 20 s short
#                                            of the script's limit, into $T/TOOL.log; prints its exit status and summary
#   pytest_while_time MODULES...             pytest of python/tests/test_MODULE_torch.py against eager, one module
#                                            after another while 40 s of LIMIT_S are left, each snapshotted
#   contract_summary FILES...                per torch_bench text output, how many rows met their contract with
#                                            the fused kernel running, and how many did not
#
# Every step prints its exit status and the seconds since the script started; compare the results with
# bench/compare_runs.py.
#
# On a machine kept warm after a call that built patched sources, the next call's copy of the tree keeps the
# files' times, older than the patched objects: touch the files the patch changed before building (session 34).
export DFUSE_TORCH_LIB=$PWD/build-gpu/torch_ext/dfuse_torch.so
mkdir -p "$T"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)  # the device's name, for steps of one card
echo "card: $card"

snapshot() {  # $T as $OUT/<name of T>.tgz (one file: the device runner returns few); a script may redefine it
  tar czf "$OUT/$(basename "$T").tgz" -C "$(dirname "$T")" "$(basename "$T")"
}

build_tree() {  # every gpu_check step but the build ones skipped
  DFUSE_CHECK_SKIP=python_deps,ctest_host,ctest_gpu,pytest,memcheck,racecheck,dfuse_verify,dfuse_bench,torch_bench \
    DFUSE_CHECK_BUDGET_S=200 scripts/gpu_check.sh "$T" >"$T/check.txt" 2>&1
  echo "gpu_check (build) rc $? at ${SECONDS}s"
}

build() {  # build NAME: the CUDA backend rebuilt (its log $T/build_NAME.log)
  timeout 120 cmake --build build-gpu --target dfuse_cuda -j16 >"$T/build_$1.log" 2>&1
  echo "build $1 rc $? at ${SECONDS}s"
}

left() { echo $((${LIMIT_S:?} - SECONDS)); }

bench_all() {
  local limit=$(($(left) - 15))
  timeout $((limit > 200 ? 200 : limit)) python3 bench/torch_bench.py --json "$T/torch_bench.json" \
    >"$T/torch_bench.txt" 2>&1
  echo "torch_bench rc $? at ${SECONDS}s"
}

bench() {  # bench NAME OPS...
  local name=$1
  shift
  timeout $((40 + 20 * $#)) python3 bench/torch_bench.py --json "$T/tb_$name.json" --ops "$@" >"$T/tb_$name.txt" 2>&1
  echo "torch_bench $name rc $? at ${SECONDS}s"
}

swap() {  # swap FILE VARIANT.txt NAME OPS...
  local file=$1 variant=$2 name=$3
  shift 3
  local kept
  kept=$(mktemp)  # outside $T, so the tree's file is not archived with the results
  cp "$file" "$kept"
  cp "$variant" "$file" && build "$name" && bench "$name" "$@"
  snapshot
  cp "$kept" "$file" && rm -f "$kept"
  touch "$file"  # newer than the variant's objects, so the build takes the tree's file again
  build "restored_after_$name"
}

swap_patch() {  # swap_patch PATCH NAME OPS...
  local patch=$1 name=$2 m
  shift 2
  if git apply "$patch" && build "$name" && bench "$name" "$@"; then
    snapshot  # the variant's numbers kept if the call ends during the checks
    for m in ${SWAP_PYTEST:-}; do
      DFUSE_REQUIRE_CUDA=1 timeout 80 python3 -m pytest "python/tests/test_${m}_torch.py" -q -p no:cacheprovider \
        >"$T/pytest_${m}_$name.log" 2>&1
      echo "pytest $m with $name rc $? at ${SECONDS}s: $(tail -1 "$T/pytest_${m}_$name.log")"
    done
    [[ -n ${SWAP_WITH_PATCH:-} ]] && "$SWAP_WITH_PATCH" "$name"
  fi
  snapshot
  git apply -R "$patch"  # rewrites the files, so they are newer than the variant's objects
  build "restored_after_$name"
}

sanitize() {  # sanitize TOOL LIMIT_S K MODULES...
  local tool=$1 limit=$2 k=$3 m files=()
  shift 3
  for m in "$@"; do files+=("python/tests/test_${m}_torch.py"); done
  (($(left) - 20 < limit)) && limit=$(($(left) - 20))
  DFUSE_REQUIRE_CUDA=1 timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 1 python3 -m pytest \
    "${files[@]}" -q -p no:cacheprovider -k "$k" >"$T/$tool.log" 2>&1
  echo "$tool rc $? at ${SECONDS}s: $(grep -h "ERROR SUMMARY" "$T/$tool.log" | tail -1); $(tail -1 "$T/$tool.log")"
}

pytest_while_time() {  # pytest_while_time MODULES...
  local m
  for m in "$@"; do
    (($(left) > 40)) || break
    DFUSE_REQUIRE_CUDA=1 timeout $(($(left) - 10)) python3 -m pytest "python/tests/test_${m}_torch.py" -q \
      -p no:cacheprovider >"$T/pytest_$m.log" 2>&1
    echo "pytest $m rc $? at ${SECONDS}s: $(tail -1 "$T/pytest_$m.log")"
    snapshot
  done
}

profile() {  # profile NAME SHAPE OPS...
  local name=$1 shape=$2
  shift 2
  (cd bench && timeout $(($(left) - 10)) ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section MemoryWorkloadAnalysis_Tables --section InstructionStats --log-file "$T/ncu_$name.txt" \
    python3 kernel_profile.py --calls 1 --shapes "$shape" --ops "$@" >"$T/ncu_$name.log" 2>&1)
  echo "ncu $name rc $? at ${SECONDS}s"
  snapshot
}

profile_summary() {  # profile_summary FILES...
  local f
  for f in "$@"; do
    echo "== $(basename "$f")"
    grep -E "^  [a-zA-Z_].*\(|Duration|DRAM Throughput|Achieved Occupancy|Block Limit|Dynamic Shared|Eligible Warps|Issued Warp|Registers Per|Executed Instructions  |L1/TEX Hit|Shared Memory Configuration Size" \
      "$f" | cut -c1-150 | head -50
  done
}

contract_summary() {  # contract_summary FILES...
  local f
  for f in "$@"; do
    echo "$(basename "$f"): $(grep -c 'contract against eager: True, fused kernel ran: True' "$f") met," \
      "$(grep 'meets its contract' "$f" | grep -vc 'True, fused kernel ran: True') not"
  done
}
