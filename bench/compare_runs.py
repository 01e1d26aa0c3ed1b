"""torch_bench results of several builds measured in one run, side by side.

    python3 bench/compare_runs.py NAME=RESULTS.json [NAME=RESULTS.json ...]

RESULTS.json is a bench/torch_bench.py --json output. Per (op, shape) of the first file, one line with each
build's dfuse median us, its share of the copy bandwidth, torch.compile's median us in that build's run and
dfuse's speedup over it; a build without that (op, shape), or whose file is missing, is named as such. Used by
the device-run scripts under docs/runs/ that rebuild variants of a kernel beside the tree in one call.
"""

import json
import sys


def load(path):
    """{(op, shape, impl): result} of one torch_bench JSON file, or None if it cannot be read."""
    try:
        with open(path) as f:
            return {(r["op"], r["shape"], r["impl"]): r for r in json.load(f)["results"]}
    except (OSError, ValueError, KeyError) as e:
        print(f"{path}: unreadable ({e})")
        return None


def line(key, runs):
    op, shape = key
    parts = [f"{op[:34]:34} {shape[:12]:12}"]
    for name, results in runs:
        fused = results.get((op, shape, "dfuse")) if results else None
        compiled = results.get((op, shape, "compile")) if results else None
        if not fused or not fused.get("median_us"):
            parts.append(f"{name}: -")
            continue
        text = f"{name} {fused['median_us']:.1f} ({fused['pct_copy_bw']:.1f}%)"
        if compiled and compiled.get("median_us"):
            text += f" c {compiled['median_us']:.1f} {compiled['median_us'] / fused['median_us']:.3f}x"
        parts.append(text)
    return " | ".join(parts)


def main(argv):
    if not argv or any("=" not in a for a in argv):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    runs = [(name, load(path)) for name, path in (a.split("=", 1) for a in argv)]
    first = next((r for _, r in runs if r), None)
    if first is None:
        return 1
    for op, shape, impl in first:
        if impl == "dfuse":
            print(line((op, shape), runs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
