"""bench/compare_runs.py, run as a program on torch_bench-shaped JSON files (no GPU, no torch)."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "compare_runs.py"


def results_file(path, rows):
    path.write_text(json.dumps({"results": [
        {"op": op, "shape": shape, "impl": impl, "median_us": us, "pct_copy_bw": pct}
        for op, shape, impl, us, pct in rows]}))
    return path


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_builds_side_by_side_with_speedup_over_compile(tmp_path):
    tree = results_file(tmp_path / "tree.json", [("rms", "FLUX.1", "dfuse", 20.0, 80.0),
                                                 ("rms", "FLUX.1", "compile", 25.0, 64.0),
                                                 ("rms", "FLUX.1", "eager", 50.0, 32.0)])
    head = results_file(tmp_path / "head.json", [("rms", "FLUX.1", "dfuse", 25.0, 64.0),
                                                 ("rms", "FLUX.1", "compile", 24.0, 66.0)])
    proc = run(f"tree={tree}", f"head={head}", f"gone={tmp_path / 'missing.json'}")
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("rms")]
    assert len(lines) == 1  # one line per (op, shape) of the first file, eager and compile rows folded in
    assert "tree 20.0 (80.0%) c 25.0 1.250x" in lines[0]
    assert "head 25.0 (64.0%) c 24.0 0.960x" in lines[0]
    assert "gone: -" in lines[0]
    assert "missing.json: unreadable" in proc.stdout


def test_bad_arguments_give_usage_and_status_2():
    proc = run("no-equals-sign.json")
    assert proc.returncode == 2
    assert "compare_runs.py NAME=RESULTS.json" in proc.stderr
