"""scripts/flux_quality.py, run as a program on the CPU: --tiny with random weights, and --checkpoint on a tiny
transformer saved with save_pretrained (the loading path a real FLUX.1 checkpoint directory takes). torch.compile
is left out here (minutes of CPU compilation); the GPU run includes it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("diffusers")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "flux_quality.py"


def run_script(*args, cwd, **extra_env):
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"), **extra_env)
    proc = subprocess.run([sys.executable, str(SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout


def test_tiny_run_reports_lossless_identical(tmp_path):
    out = tmp_path / "tiny.md"
    stdout = run_script("--tiny", "--device", "cpu", "--modes", "eager,lossless,extra-high,naive-fp32-norm", "--out",
                        str(out), "--contribution-steps", "1", "--commit", "abc1234", cwd=tmp_path)
    text = out.read_text()
    assert text.strip() == stdout.strip()
    assert "| lossless |" in text and "| inf (identical) | 3/3 |" in text
    assert text.count("| yes |") == 3 and "**NO**" not in text
    assert "| extra-high |" in text and "| naive-fp32-norm |" in text
    assert "## Sites at lossless" in text and "## Sites at extra-high" in text
    assert "transformer_blocks.1.attn.rope" in text and "MISMATCH" not in text
    assert "## What each family buys" in text and "commit abc1234," in text
    assert "| rope_interleaved_pairs | lossless | 4 |" in text and "| linear_gelu_tanh | extra-high | 6 |" in text
    assert "| gelu_tanh_cat | lossless | 2 |" in text


def test_checkpoint_directory_loads(tmp_path):
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import flux_quality as fq
    finally:
        sys.path.remove(str(SCRIPT.parent))
    model = fq.build_model(fq.TINY_CONFIG, torch.bfloat16, "cpu", seed=7)
    (tmp_path / "pipeline").mkdir()
    model.save_pretrained(tmp_path / "pipeline" / "transformer")
    loaded = fq.load_model(tmp_path / "pipeline", torch.bfloat16, "cpu")
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert a.dtype == b.dtype and torch.equal(a, b), name
    with pytest.raises(FileNotFoundError, match="config.json"):
        fq.load_model(tmp_path, torch.bfloat16, "cpu")

    out = tmp_path / "ckpt.md"
    run_script("--checkpoint", str(tmp_path / "pipeline" / "transformer"), "--tiny", "--steps", "2", "--device",
               "cpu", "--modes", "eager,lossless", "--out", str(out), cwd=tmp_path)
    text = out.read_text()
    assert f"checkpoint {tmp_path / 'pipeline' / 'transformer'}" in text
    assert "| inf (identical) | 2/2 |" in text


@pytest.mark.skipif(not torch.cuda.is_available(), reason="on CPU the ops run the chain before the Gate")
def test_kill_switch_sends_every_site_to_the_chain_and_says_why(tmp_path):
    out = tmp_path / "killed.md"
    run_script("--tiny", "--steps", "2", "--device", "cuda", "--modes", "eager,lossless", "--out", str(out),
               cwd=tmp_path, DFUSE_DISABLE_OPS="all")
    text = out.read_text()
    assert "| inf (identical) | 2/2 |" in text
    # Three calls per site: the untimed warm-up forward and two steps.
    assert "| transformer_blocks.0.attn_residual | residual_gate_add | fell back | 0 | 3 |" in text
    assert "kill switch (DFUSE_DISABLE_OPS)" in text


def test_cpu_sites_run_the_chain_and_say_why(tmp_path):
    out = tmp_path / "cpu.md"
    run_script("--tiny", "--steps", "2", "--device", "cpu", "--modes", "eager,lossless", "--out", str(out),
               cwd=tmp_path)
    text = out.read_text()
    assert "| inf (identical) | 2/2 |" in text
    assert "| transformer_blocks.0.attn_residual | residual_gate_add | chain | 0 | 3 |" in text
    assert "CPU tensors: the op runs the aten chain" in text
