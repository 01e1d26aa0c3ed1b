"""dfuse.torch.mount on diffusers' FluxTransformer2DModel: a tiny FLUX.1 (2 double + 2 single blocks, 2 heads of
128) with seeded random weights, run through a few Euler steps of the flow (scripts/flux_quality.py builds the
model, the inputs and the trajectory).

CPU and CUDA: lossless is bit-identical to the unmounted model at every step (integer views); extra-high runs
and stays close; quality changes only between batches; the batch key carries the quality; a site failing its
static guard keeps its whole family off; the graph-capture rule; unmount restores the original model; the
report lists every site. CUDA only: every lossless site runs fused (Gate counters), extra-high's folded
LayerNorm runs fused, and the per-site counts add up to the Gate's per-op counters.

On a CPU model the sites are mounted and every bit-exact op runs the aten chain inside the op (dfuse's host
kernels reproduce PyTorch's CUDA arithmetic, not aten's CPU kernels), so the report says "chain".
"""

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import dfuse.torch as dt
from dfuse.torch.mount import CHAIN, FELL_BACK, FUSED, MIXED, OFF, PENDING, UNCOUNTED, VERIFIED

diffusers = pytest.importorskip("diffusers")
from diffusers.models.transformers.transformer_flux import FluxAttnProcessor  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("flux_quality", REPO / "scripts" / "flux_quality.py")
fq = importlib.util.module_from_spec(_spec)
sys.modules["flux_quality"] = fq
_spec.loader.exec_module(fq)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
STEPS = 3
PROBED = (VERIFIED, FUSED, FELL_BACK, CHAIN, MIXED, UNCOUNTED)


def tiny(device, dtype=torch.bfloat16, seed=0):
    model = fq.build_model(fq.TINY_CONFIG, dtype, device, seed)
    inputs = fq.make_inputs(fq.TINY_CONFIG, 128, 128, 16, dtype, device, seed + 1)
    return model, inputs


def expected_sites(config):
    names = []
    for i in range(config["num_layers"]):
        p = f"transformer_blocks.{i}."
        for norm in ("norm1", "norm1_context", "norm2", "norm2_context"):
            names += [p + norm, p + norm + " [folded]"]
        names += [p + r for r in ("attn_residual", "ff_residual", "context_attn_residual", "context_ff_residual")]
        names += [p + "ff.net.0", p + "ff_context.net.0", p + "attn.norm_qk", p + "attn.norm_added_qk",
                  p + "attn.rope"]
    for i in range(config["num_single_layers"]):
        p = f"single_transformer_blocks.{i}."
        names += [p + "norm", p + "norm [folded]", p + "residual", p + "proj_mlp", p + "mlp_cat", p + "attn.norm_qk",
                  p + "attn.rope"]
    return sorted(names + ["norm_out", "norm_out [folded]"])


def assert_same_trajectory(test, reference):
    for step, (a, b) in enumerate(zip(test.latents, reference.latents)):
        if not fq.bit_identical(a, b):
            differ = (fq.bits(a) != fq.bits(b)).sum().item()
            pytest.fail(f"step {step + 1}: {differ} of {a.numel()} latents differ bitwise from the unmounted model")
    assert len(test.latents) == len(reference.latents) == STEPS


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "f32"])
def test_lossless_trajectory_is_bit_identical(device, dtype):
    model, inputs = tiny(device, dtype)
    eager = fq.run_trajectory(model, inputs, STEPS, warmup=False)
    handle = dt.mount(model)
    with handle.batch():
        lossless = fq.run_trajectory(model, inputs, STEPS, warmup=False)
    assert_same_trajectory(lossless, eager)
    report = handle.report()
    # Every lossless family that is on ran at each of its sites.
    for s in report.sites:
        if s.tier == "lossless" and s.fused:
            assert s.state in PROBED, (s.name, s.state)
            assert s.fused_calls + s.chain_calls == STEPS, (s.name, s.fused_calls, s.chain_calls)
    assert any(s.fused and s.tier == "lossless" for s in report.sites)
    for o in report.ops:
        assert o.consistent, str(report)
    handle.unmount()


@pytest.mark.parametrize("device", DEVICES)
def test_extra_high_runs_and_stays_close(device):
    model, inputs = tiny(device)
    eager = fq.run_trajectory(model, inputs, STEPS, warmup=False)
    handle = dt.mount(model, quality="extra-high")
    with handle.batch():
        extra_high = fq.run_trajectory(model, inputs, STEPS, warmup=False)
    report = handle.report()
    handle.unmount()
    final, ref = extra_high.latents[-1].float(), eager.latents[-1].float()
    max_abs = (final - ref).abs().max().item()
    psnr = fq.psnr(extra_high.latents[-1], eager.latents[-1])
    print(f"extra-high vs eager after {STEPS} steps ({device}): max abs diff {max_abs:.3g}, PSNR {psnr:.2f} dB")
    assert torch.isfinite(final).all()
    assert max_abs <= 2.0 ** -4 * ref.abs().max().item()
    assert psnr > 40
    # The request-gated families are on: the folded LayerNorm replaces layernorm_modulate at every LN site.
    for s in report.sites:
        if s.family in ("layernorm_folded_modulate", "linear_gelu_tanh"):
            assert s.fused and s.state in PROBED, (s.name, s.state, s.reason)
        if s.family == "layernorm_modulate":
            assert s.state == OFF, (s.name, s.state)
    # Back to lossless between batches: bit-identical again.
    handle = dt.mount(model, quality="extra-high")
    handle.set_quality("lossless")
    with handle.batch():
        assert_same_trajectory(fq.run_trajectory(model, inputs, STEPS, warmup=False), eager)
    handle.unmount()


def test_quality_changes_only_between_batches():
    model, inputs = tiny("cpu")
    handle = dt.mount(model, name="flux-tiny")
    assert handle.batch_key() == "model=flux-tiny;quality=lossless"
    assert handle.batch_key("extra-high") == "model=flux-tiny;quality=extra-high"
    with handle.batch("extra-high"):
        assert handle.batch_open and handle.quality == "extra-high"
        with pytest.raises(RuntimeError, match="only between batches"):
            handle.set_quality("lossless")
        with pytest.raises(RuntimeError, match="already open"):
            handle.begin_batch("lossless")
        with pytest.raises(RuntimeError, match="inside one"):
            handle.unmount()
        assert handle.quality == "extra-high"
        assert handle.batch_key() == "model=flux-tiny;quality=extra-high"
    assert not handle.batch_open
    with pytest.raises(RuntimeError, match="without an open batch"):
        handle.end_batch()
    handle.set_quality("lossless")
    assert handle.quality == "lossless"
    with pytest.raises(ValueError, match="unknown quality"):
        handle.set_quality("medium")
    # A batch raising inside still closes.
    with pytest.raises(ZeroDivisionError):
        with handle.batch():
            1 / 0
    assert not handle.batch_open
    handle.unmount()


def test_high_mounts_the_extra_high_set_and_says_so():
    model, _ = tiny("cpu")
    handle = dt.mount(model, quality="extra-high")
    extra_high = {s.name: s.fused for s in handle.sites()}
    handle.set_quality("high")
    assert {s.name: s.fused for s in handle.sites()} == extra_high
    text = str(handle.report())
    assert "FLUX.1 has no model-owned high-only optimization" in text
    handle.unmount()


def test_unmount_restores_the_original_model():
    model, inputs = tiny("cpu")
    before = fq.run_trajectory(model, inputs, STEPS, warmup=False)
    processors = [m.processor for m in model.modules() if hasattr(m, "processor")]
    handle = dt.mount(model, quality="extra-high")
    with handle.batch():
        fq.run_trajectory(model, inputs, 1, warmup=False)
    assert all("forward" in vars(b) for b in model.transformer_blocks)
    handle.unmount()
    for module in model.modules():
        assert "forward" not in vars(module) and not hasattr(module, "_dfuse_sites")
    assert [m.processor for m in model.modules() if hasattr(m, "processor")] == processors
    assert all(type(p) is FluxAttnProcessor for p in processors)
    assert_same_trajectory(fq.run_trajectory(model, inputs, STEPS, warmup=False), before)
    with pytest.raises(RuntimeError, match="unmounted"):
        handle.set_quality("lossless")
    # Mountable again, once at a time.
    again = dt.mount(model)
    with pytest.raises(RuntimeError, match="already mounted"):
        dt.mount(model)
    again.unmount()


def test_report_lists_every_site():
    model, inputs = tiny("cpu")
    handle = dt.mount(model)
    names = expected_sites(fq.TINY_CONFIG)
    report = handle.report()
    assert sorted(s.name for s in report.sites) == names
    assert all(s.state in (PENDING, OFF) for s in report.sites)
    with handle.batch():
        fq.run_trajectory(model, inputs, 1, warmup=False)
    report = handle.report()
    text = str(report)
    for s in report.sites:
        assert s.name in text
        if s.fused:
            assert s.state in PROBED and s.reason, (s.name, s.state)
        else:
            assert s.state == OFF and s.reason, s.name
        if s.tier == "extra-high":
            assert not s.fused and s.reason == "tier extra-high is above quality lossless"
    # On a CPU model every family is mounted and its ops run the aten chain, saying why.
    assert not dict(report.rejected_families)
    residual = report.site("transformer_blocks.0.attn_residual")
    assert residual.fused and residual.state == "chain" and residual.reason.startswith("CPU tensors")
    assert report.site("transformer_blocks.0.attn.rope").op_calls == 2
    assert report.site("single_transformer_blocks.1.attn.norm_qk").op == "diffusion.qk_rmsnorm"
    handle.unmount()


def test_one_rejected_site_keeps_its_family_off():
    model, inputs = tiny("cpu")
    eager = fq.run_trajectory(model, inputs, STEPS, warmup=False)

    class OwnProcessor(FluxAttnProcessor):  # the same math under another class: the mount cannot vouch for it
        pass

    model.single_transformer_blocks[1].attn.set_processor(OwnProcessor())
    handle = dt.mount(model)
    report = handle.report()
    for s in report.sites:
        if s.family in ("qk_rmsnorm", "rope_interleaved_pairs"):
            assert not s.fused and s.state == OFF, s.name
    rope = report.site("transformer_blocks.0.attn.rope")
    assert "single_transformer_blocks.1.attn.rope" in rope.reason and "OwnProcessor" in rope.reason
    assert report.site("transformer_blocks.0.attn_residual").fused
    assert type(model.single_transformer_blocks[1].attn.processor) is OwnProcessor
    with handle.batch():
        assert_same_trajectory(fq.run_trajectory(model, inputs, STEPS, warmup=False), eager)
    handle.unmount()


def test_excluded_family_stays_on_the_chain():
    model, inputs = tiny("cpu")
    eager = fq.run_trajectory(model, inputs, STEPS, warmup=False)
    handle = dt.mount(model, exclude=("rope_interleaved_pairs",))
    report = handle.report()
    rope = report.site("transformer_blocks.0.attn.rope")
    assert not rope.fused and rope.state == OFF and "excluded at mount" in rope.reason
    assert report.site("transformer_blocks.0.attn_residual").fused
    with handle.batch():
        assert_same_trajectory(fq.run_trajectory(model, inputs, STEPS, warmup=False), eager)
    handle.unmount()
    with pytest.raises(ValueError, match="unknown families to exclude.*rope_interleaved_pairs"):
        dt.mount(model, exclude=("rope",))
    assert not hasattr(model, "_dfuse_mount")  # the refused mount left the model as it was


def test_request_gated_quality_is_refused_with_captured_graphs():
    model, _ = tiny("cpu")
    with pytest.raises(ValueError, match="captured CUDA graphs"):
        dt.mount(model, quality="extra-high", cuda_graphs=True)
    # A refused mount leaves the model as it was.
    assert not hasattr(model, "_dfuse_mount")
    assert not any("forward" in vars(m) for m in model.modules())
    assert all(type(m.processor) is FluxAttnProcessor for m in model.modules() if hasattr(m, "processor"))
    handle = dt.mount(model, cuda_graphs=True)
    with pytest.raises(ValueError, match="linear_gelu_tanh"):
        handle.set_quality("extra-high")
    with pytest.raises(ValueError, match="captured CUDA graphs"):
        handle.begin_batch("high")
    assert handle.quality == "lossless" and not handle.batch_open
    handle.set_graph_capture(False)
    handle.set_quality("extra-high")
    with pytest.raises(ValueError, match="captured CUDA graphs"):
        handle.set_graph_capture(True)
    handle.unmount()


def test_mount_refuses_other_models_and_qualities():
    with pytest.raises(TypeError, match="FluxTransformer2DModel"):
        dt.mount(torch.nn.Linear(2, 2))
    model, _ = tiny("cpu")
    with pytest.raises(ValueError, match="unknown quality"):
        dt.mount(model, quality="fast")


@cuda_only
def test_cuda_every_site_runs_fused():
    dt.gate_reset()
    model, inputs = tiny("cuda")
    eager = fq.run_trajectory(model, inputs, STEPS, warmup=False)
    handle = dt.mount(model)
    with handle.batch():
        lossless = fq.run_trajectory(model, inputs, STEPS, warmup=False)
    assert_same_trajectory(lossless, eager)
    report = handle.report()
    assert not report.rejected_families, str(report)
    for s in report.sites:
        if s.tier == "lossless":
            assert s.state in (VERIFIED, FUSED), f"{s.name}: {s.state} ({s.reason})\n{dt.gate_report()}"
            assert s.fused_calls == STEPS and s.chain_calls == 0, (s.name, s.fused_calls, s.chain_calls)
    for o in report.ops:
        assert o.consistent and o.fallbacks == 0, str(report)
        if o.op in ("diffusion.layernorm_modulate", "diffusion.residual_gate_add", "diffusion.qk_rmsnorm",
                    "diffusion.rope_interleaved_pairs", "diffusion.gelu_tanh_cat"):
            assert o.fused_calls > 0 and o.eager_calls == 0, o

    with handle.batch("extra-high"):
        fq.run_trajectory(model, inputs, STEPS, warmup=False)
    report = handle.report()
    for s in report.sites:
        if s.family == "layernorm_folded_modulate":
            assert s.state in (VERIFIED, FUSED), f"{s.name}: {s.state} ({s.reason})"
        if s.family == "linear_gelu_tanh":
            assert s.state == UNCOUNTED and s.unproven_calls == STEPS, (s.name, s.state)
    handle.unmount()


@cuda_only
def test_cuda_graph_capture_of_a_request_gated_quality_raises():
    model, inputs = tiny("cuda")
    handle = dt.mount(model, quality="extra-high")
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="captured CUDA graphs"):
        with torch.inference_mode(), torch.cuda.graph(graph):
            fq.velocity(model, inputs.latents, torch.ones([], device="cuda"), inputs)
    handle.unmount()
