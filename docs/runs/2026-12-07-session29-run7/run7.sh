#!/usr/bin/env bash
# Session 29 run 7 (prepared): the adoption checks of the first patch that won a variant bench, on the machine that
# ran it, in the same call (run 6 ends with it). Generalizes run 4 (which ran inside run 2 and took nothing).
#
#   run7.sh RESULTS_DIR NAME=PATCH=OP@SHAPE[,OP@SHAPE...] ...
#
# A candidate wins when RESULTS_DIR/tb_NAME.json is 0.5% or more faster than RESULTS_DIR/tb_tree.json in every
# named row and no row of it is slower by more than 0.5%. The first winner's PATCH is applied and gpu_check runs
# without the benchmarks: build, the GPU suite, pytest of the modules in PYTEST_MODULES against torch eager chains,
# memcheck and racecheck of the tests SANITIZER_FILTER names. No winner: exit status 3, nothing run.
set -u
dir=$1
shift
PATCH=$(python3 - "$dir" "$@" <<'PY'
import json, sys
def load(path):
    try:
        with open(path) as f:
            return {(r["op"], r["shape"]): r["median_us"] for r in json.load(f)["results"] if r["impl"] == "dfuse"}
    except (OSError, ValueError, KeyError):
        return None
results, candidates = sys.argv[1], sys.argv[2:]
tree = load(f"{results}/tb_tree.json")
for candidate in candidates:
    name, patch, rows = candidate.split("=")
    variant = load(f"{results}/tb_{name}.json")
    if not tree or not variant:
        print(f"# {name}: no results", file=sys.stderr)
        continue
    ratios = {key: variant[key] / tree[key] for key in variant if key in tree}
    targets = [tuple(row.split("@")) for row in rows.split(",")]
    wins = all(key in ratios and ratios[key] <= 0.995 for key in targets) and all(r <= 1.005 for r in ratios.values())
    shown = ", ".join(f"{op} {shape} {r:.4f}" for (op, shape), r in ratios.items())
    print(f"# {name}: {shown} -> {'taken' if wins else 'not taken'}", file=sys.stderr)
    if wins:
        print(patch)
        break
PY
)
echo "patch: ${PATCH:-none}"
[[ -z $PATCH ]] && exit 3
git apply "$PATCH" || exit 1
T=/tmp/adopt
mkdir -p $T
DFUSE_CHECK_SKIP=ctest_host,dfuse_verify,dfuse_bench,torch_bench DFUSE_CHECK_BUDGET_S=$((${LIMIT_S:-560} - 10)) \
  DFUSE_PYTEST_MODULES="${PYTEST_MODULES:-python/tests/test_*.py}" DFUSE_SANITIZER_FILTER="${SANITIZER_FILTER:-*}" \
  scripts/gpu_check.sh $T >$T/check.txt 2>&1
echo "gpu_check rc $? at ${SECONDS}s"
cp $T/steps.log $T/summary.md $T/check.txt $OUT/ 2>/dev/null
cat $T/summary.md
grep -E "passed|failed|ERROR SUMMARY" $T/steps.log | tail -20
