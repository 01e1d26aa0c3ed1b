#!/usr/bin/env bash
# The GPU check: builds dfuse and the torch extension, runs every GPU and host test, the sanitizers and
# both benchmarks, in one call on a GPU machine.
#
#   scripts/gpu_check.sh OUT_DIR
#
# OUT_DIR receives few files (the device runner returns at most 8): steps.log (every step's full log, one
# after another), summary.md, dfuse_bench.json, torch_bench.json. Each step's own log is also kept under
# build-gpu/logs/. A failed step does not stop the others; the exit status is non-zero if any failed.
# The whole run keeps inside DFUSE_CHECK_BUDGET_S seconds (default 560): a step gets at most what is left,
# a step that no longer fits is reported as out-of-time (a failure; a step skipped on request is not).
#
# Environment:
#   DFUSE_SANITIZER_FILTER  --gtest_filter for the compute-sanitizer runs (default: all tests)
#   DFUSE_CHECK_BUDGET_S    the time budget in seconds
#   DFUSE_CHECK_FULL=1      also the GPU GoogleTest suite and `dfuse verify` at model shapes (several
#                           minutes: their random data is made on the host). By default both run on
#                           small shapes; model shapes are covered by pytest against torch and by the
#                           benchmarks' bitwise checks.
#   DFUSE_CHECK_SKIP        comma-separated step names not to run (reported as skipped), e.g.
#                           "memcheck,racecheck,ctest_host" for a shorter run
#   DFUSE_PYTEST_MODULES    the pytest modules (default: python/tests/test_*.py)
#   DFUSE_PYTEST_JOBS       how many pytest modules run at once (default: the GPU's memory in GiB / 13)
#   DFUSE_BENCH_OPS         comma-separated op names for `dfuse bench` (default: every op)
#   DFUSE_CHECK_FLUX=1      also scripts/flux_quality.py at FLUX.1-dev size (minutes; OUT/flux_quality.md),
#                           with the arguments in DFUSE_FLUX_ARGS (e.g. "--contribution-steps 5")
#   DFUSE_TORCH_BENCH_OPS   space-separated op names for bench/torch_bench.py (default: every op)
#   DFUSE_CHECK_PROFILE=1   also ncu over bench/kernel_profile.py: dfuse's kernels beside torch.compile's
#                           (OUT/profile.csv, the ncu sections per kernel in OUT/profile_sections.txt, the
#                           Triton source in OUT/inductor_code.log), for the ops in
#                           DFUSE_PROFILE_OPS (space-separated; default: every op of torch_bench.py)
#   DFUSE_PROFILE_BENCH_OPS also ncu sections of dfuse's fused kernels (every kernel whose name lacks
#                           "eager", i.e. not the replicas under dfuse::eager) while `dfuse bench --op OP
#                           --iters 1` runs, for ops torch_bench.py does not cover (space-separated op names;
#                           OUT/bench_profile_OP.txt each): DFUSE_PROFILE_BENCH_COUNT launches (default 2)
#                           after the first DFUSE_PROFILE_BENCH_SKIP (default 0). First run in session 9;
#                           InstructionStats, ComputeWorkloadAnalysis and SourceCounters (executed instructions
#                           by opcode, pipe use, the hottest SASS) added after it, not run yet.
set -uo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUT_DIR" >&2
  exit 2
fi
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
cd "$(dirname "$0")/.." || exit 2

BUILD=build-gpu
LOGDIR=$BUILD/logs
mkdir -p "$LOGDIR"
rm -f "$LOGDIR"/*.log "$LOGDIR"/*.result "$OUT/steps.log" "$OUT/summary.md"
START=$(date +%s)
DEADLINE=$((START + ${DFUSE_CHECK_BUDGET_S:-560}))
STEPS=()
TORCH_LIB=$PWD/$BUILD/torch_ext/dfuse_torch.so

# run_step NAME LIMIT_S CMD...: runs CMD with a time limit, logs it, records pass/fail and seconds.
run_step() {
  local name=$1 limit=$2
  shift 2
  STEPS+=("$name")
  local left=$((DEADLINE - $(date +%s)))
  if [[ ,${DFUSE_CHECK_SKIP:-}, == *,$name,* ]]; then
    echo "$name skipped 0" >"$LOGDIR/$name.result"
    echo "===== $name: skipped (DFUSE_CHECK_SKIP)" >"$LOGDIR/$name.log"
  elif ((left < 15)); then
    echo "$name out-of-time 0" >"$LOGDIR/$name.result"
    echo "===== $name: skipped, out of time" >"$LOGDIR/$name.log"
  else
    ((limit > left)) && limit=$left
    local t0 rc status ms
    t0=$(date +%s%N)
    {
      echo "===== $name (limit ${limit}s): $*"
      timeout -k 10 "$limit" "$@"
    } >"$LOGDIR/$name.log" 2>&1
    rc=$?
    case $rc in
      0) status=pass ;;
      124 | 137) status=timeout ;;
      *) status="fail($rc)" ;;
    esac
    ms=$((($(date +%s%N) - t0) / 1000000))
    echo "$name $status $((ms / 1000)).$((ms % 1000 / 100))" >"$LOGDIR/$name.result"
  fi
  # Steps finish concurrently: one whole log at a time.
  flock "$LOGDIR/.lock" cat "$LOGDIR/$name.log" >>"$OUT/steps.log"
}

# Steps that need the GPU but not each other run side by side; the benchmarks run alone at the end.
run_bg() {
  run_step "$@" &
}

GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)

# diffusers for the FLUX.1 mount tests, from wheels carried in .whl/ (scripts/fetch_wheels.sh).
if ! python3 -c "import diffusers" 2>/dev/null && [[ -d .whl ]]; then
  run_step python_deps 120 python3 -m pip install -q --no-index --find-links .whl diffusers
fi
run_step env 60 bash -c 'nvidia-smi; nvcc --version; cmake --version | head -1
compute-sanitizer --version | tail -1
python3 -c "import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda)"'
# libdfuse is loaded into Python beside torch's shared libstdc++: build it with a compiler that links
# libstdc++ shared too (this machine's $CXX links it statically), and start afresh if the cache holds another.
CXX_SHARED=$(python3 python/build_torch_ext.py --print-cxx)
if [[ -f $BUILD/CMakeCache.txt ]] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=$CXX_SHARED\$" "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
fi
run_step configure 90 cmake -S . -B "$BUILD" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$CXX_SHARED" -DCMAKE_CUDA_HOST_COMPILER="$CXX_SHARED" \
  -DCMAKE_CUDA_ARCHITECTURES=90a -DDFUSE_CUDA=ON -DDFUSE_TESTS=ON
# libdfuse alone first, so that the torch extension builds while the CUDA backend compiles.
run_step build_core 120 cmake --build "$BUILD" --target dfuse -j16
run_bg torch_ext 240 python3 python/build_torch_ext.py --cmake-build "$BUILD" --out "$BUILD/torch_ext"
run_step build 360 cmake --build "$BUILD" -j16
wait
STEPS+=(torch_ext)

SANITIZE=(env DFUSE_GPU_TEST_SMALL=1 compute-sanitizer --error-exitcode 1)
FILTER=--gtest_filter=${DFUSE_SANITIZER_FILTER:-*}
run_bg memcheck 300 "${SANITIZE[@]}" --tool memcheck --leak-check full "$BUILD/dfuse_gpu_tests" "$FILTER"
run_bg racecheck 300 "${SANITIZE[@]}" --tool racecheck --racecheck-report all \
  "$BUILD/dfuse_gpu_tests" "$FILTER"
run_step ctest_host 120 ctest --test-dir "$BUILD" -L host --output-on-failure --no-tests=error
FULL=${DFUSE_CHECK_FULL:-0}
SMALL=$((1 - FULL))
run_step ctest_gpu 180 env DFUSE_GPU_TEST_SMALL="$SMALL" ctest --test-dir "$BUILD" -L gpu --output-on-failure \
  --no-tests=error
# One pytest process per module, several at once on the one GPU (they check bits, not time), so that a
# crash in one module does not hide the others' results; each module's log follows the others. At most
# PYTEST_JOBS modules run together: the model-shape tests take up to 11 GB each, and all 19 modules at
# once beside the sanitizers ran an 80 GB H100 out of memory (session 25).
GPU_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -1)
PYTEST_JOBS=${DFUSE_PYTEST_JOBS:-$((${GPU_MIB:-0} / 1024 / 13))}
((PYTEST_JOBS >= 1)) || PYTEST_JOBS=1
run_step pytest 300 env DFUSE_REQUIRE_CUDA=1 DFUSE_TORCH_LIB="$TORCH_LIB" LOGDIR="$LOGDIR" \
  DFUSE_PYTEST_MODULES="${DFUSE_PYTEST_MODULES:-}" PYTEST_JOBS="$PYTEST_JOBS" bash -c '
  echo "pytest: at most $PYTEST_JOBS modules at once"
  status=0
  running=0
  for module in ${DFUSE_PYTEST_MODULES:-python/tests/test_*.py}; do
    if ((running >= PYTEST_JOBS)); then
      wait -n || status=1
      running=$((running - 1))
    fi
    log=$LOGDIR/pytest_$(basename "$module" .py).log
    python3 -X faulthandler -m pytest "$module" -q -rfEs -p no:cacheprovider >"$log" 2>&1 &
    running=$((running + 1))
  done
  for ((; running > 0; running--)); do wait -n || status=1; done
  for log in "$LOGDIR"/pytest_*.log; do echo "== $(basename "$log")"; cat "$log"; done
  exit $status'
wait
STEPS+=(memcheck racecheck)

VERIFY=(--quick)
[[ $FULL == 1 ]] && VERIFY=()
run_step dfuse_verify 120 "$BUILD/dfuse" verify "${VERIFY[@]}"
if [[ -z ${DFUSE_BENCH_OPS:-} ]]; then
  run_step dfuse_bench 200 "$BUILD/dfuse" bench --json "$OUT/dfuse_bench.json"
else
  run_step dfuse_bench 200 bash -c 'for op in ${0//,/ }; do "$1" bench --op "$op" --json "$2/dfuse_bench_$op.json" || exit 1; done' \
    "$DFUSE_BENCH_OPS" "$BUILD/dfuse" "$OUT"
fi
TORCH_BENCH_OPS=()
[[ -n ${DFUSE_TORCH_BENCH_OPS:-} ]] && read -ra TORCH_BENCH_OPS <<<"--ops $DFUSE_TORCH_BENCH_OPS"
run_step torch_bench 180 env DFUSE_TORCH_LIB="$TORCH_LIB" \
  python3 bench/torch_bench.py --json "$OUT/torch_bench.json" "${TORCH_BENCH_OPS[@]}"
if [[ ${DFUSE_CHECK_PROFILE:-0} == 1 ]]; then
  PROFILE_OPS=()
  [[ -n ${DFUSE_PROFILE_OPS:-} ]] && read -ra PROFILE_OPS <<<"--ops $DFUSE_PROFILE_OPS"
  METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
  METRICS+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed
  METRICS+=,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size
  METRICS+=,launch__block_size,launch__occupancy_limit_registers,launch__waves_per_multiprocessor
  METRICS+=,smsp__inst_executed.sum,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_sector_hit_rate.pct
  METRICS+=,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio
  run_step profile 240 env DFUSE_TORCH_LIB="$TORCH_LIB" TORCH_LOGS=output_code bash -c \
    'ncu --profile-from-start off --csv --page raw --metrics "$1" --log-file "$2/profile.csv" \
       python3 bench/kernel_profile.py "${@:4}" 2>"$3"; status=$?; cp "$3" "$2/inductor_code.log"
     ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats \
       --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
       --log-file "$2/profile_sections.txt" python3 bench/kernel_profile.py --calls 1 "${@:4}" || status=1
     exit $status' \
    _ "$METRICS" "$OUT" "$LOGDIR/inductor_code.log" "${PROFILE_OPS[@]}"
fi
if [[ -n ${DFUSE_PROFILE_BENCH_OPS:-} ]]; then
  run_step bench_profile 240 bash -c \
    'for op in $0; do
       ncu --kernel-name-base demangled -k "regex:^(?!.*eager)" --launch-skip "$3" --launch-count "$4" \
         --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
         --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats \
         --section ComputeWorkloadAnalysis --section SourceCounters \
         "$1" bench --op "$op" --iters 1 >"$2/bench_profile_$op.txt" 2>&1 || exit 1
     done' \
    "$DFUSE_PROFILE_BENCH_OPS" "$BUILD/dfuse" "$OUT" "${DFUSE_PROFILE_BENCH_SKIP:-0}" "${DFUSE_PROFILE_BENCH_COUNT:-2}"
fi
if [[ ${DFUSE_CHECK_FLUX:-0} == 1 ]]; then
  run_step flux_quality 420 env DFUSE_TORCH_LIB="$TORCH_LIB" python3 scripts/flux_quality.py --out "$OUT/flux_quality.md" \
    ${DFUSE_FLUX_ARGS:-}
fi

# ---- summary: failing logs' tails first, the table last ------------------------------------------------
failed=0
table="| step | result | seconds |
|---|---|---:|"
for name in "${STEPS[@]}"; do
  read -r _ status seconds <"$LOGDIR/$name.result"
  table+=$'\n'"| $name | $status | $seconds |"
  # A step skipped on request is not a failure; one that did not fit the time budget is.
  if [[ $status != pass && $status != skipped ]]; then
    failed=1
    echo "----- $name: $status, last 40 lines of its log -----"
    tail -n 40 "$LOGDIR/$name.log"
  fi
done
table+=$'\n'"| total | $([[ $failed == 0 ]] && echo pass || echo FAIL) | $(($(date +%s) - START)) |"
echo "$table" >"$OUT/summary.md"
echo
echo "$table"
exit $failed
