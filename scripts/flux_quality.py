#!/usr/bin/env python3
"""FLUX.1 quality tiers on a real model: a flow-matching trajectory through diffusers'
FluxTransformer2DModel run four ways, compared step by step.

    eager       the diffusers model as it is
    lossless    dfuse.torch.mount(model, "lossless"): must be bit-identical to eager at every step
    extra-high  the same mount at quality "extra-high" (request-gated, close fusions)
    naive-fp32-norm
                the cautionary row: the eager model with its affine-free LayerNorms computed the naive way
                (fp32, variance as E[x^2] - E[x]^2, rounded once), what a "harmless" fp32 norm fusion computes
    compile     torch.compile of the eager model (a speed and PSNR comparison row)

The model is FLUX.1-dev's transformer built from its config (FLUX_1_DEV_CONFIG below; no hub access)
with seeded random weights, or a checkpoint directory given with --checkpoint (a diffusers
save_pretrained directory of the transformer, or a pipeline directory with a transformer/ subfolder).
The trajectory is a simple Euler integration of the flow: sigma from 1 to 0 in --steps equal steps,
x <- x + (sigma_next - sigma) * v(x, sigma), on random latents and random text embeddings
(1024x1024 -> 4096 image tokens, 512 text tokens, bf16, guidance 3.5), the step computed in fp32 and
rounded to the model dtype as diffusers' FlowMatchEulerDiscreteScheduler does.

Prints and writes (--out) a markdown report: per step whether lossless is bit-identical to eager,
each mode's step time, the PSNR of extra-high and compile against eager; the median step time and
speedup of each mode; every site's state and counters from the mount's report.

    python3 scripts/flux_quality.py                       # FLUX.1-dev shapes; needs a GPU (about 24 GB of weights)
    python3 scripts/flux_quality.py --tiny --device cpu   # a 2+2-block model, 3 steps: a functional check
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import math
import platform
import statistics
import subprocess
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "python"))

# black-forest-labs/FLUX.1-dev, transformer/config.json
FLUX_1_DEV_CONFIG = dict(
    patch_size=1,
    in_channels=64,
    out_channels=None,
    num_layers=19,
    num_single_layers=38,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=4096,
    pooled_projection_dim=768,
    guidance_embeds=True,
    axes_dims_rope=(16, 56, 56),
)

# The same architecture, small: 2 double and 2 single blocks, 2 heads of 128 (the dfuse QK-norm kernels
# take head dims 128..512).
TINY_CONFIG = dict(FLUX_1_DEV_CONFIG, in_channels=16, num_layers=2, num_single_layers=2, num_attention_heads=2,
                   joint_attention_dim=64, pooled_projection_dim=32)

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
MODES = ("eager", "lossless", "extra-high", "naive-fp32-norm", "compile")


@contextlib.contextmanager
def default_dtype(dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def build_model(config: dict, dtype, device, seed: int):
    """FluxTransformer2DModel(**config) with the default (seeded) initialization, created directly in `dtype`
    on `device`."""
    from diffusers import FluxTransformer2DModel

    torch.manual_seed(seed)
    with torch.device(device), default_dtype(dtype):
        model = FluxTransformer2DModel(**config)
    return model.eval().requires_grad_(False)


def load_model(path: Path, dtype, device):
    """A transformer saved with save_pretrained, or the transformer/ folder of a pipeline directory."""
    from diffusers import FluxTransformer2DModel

    path = Path(path)
    subfolder = "transformer" if (path / "transformer" / "config.json").is_file() else None
    if subfolder is None and not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: no config.json, neither there nor in transformer/")
    model = FluxTransformer2DModel.from_pretrained(path, subfolder=subfolder, torch_dtype=dtype)
    return model.to(device).eval().requires_grad_(False)


@dataclass
class Inputs:
    latents: torch.Tensor  # [1, image tokens, in_channels]
    text: torch.Tensor  # [1, text tokens, joint_attention_dim]
    pooled: torch.Tensor  # [1, pooled_projection_dim]
    img_ids: torch.Tensor  # [image tokens, 3]
    txt_ids: torch.Tensor  # [text tokens, 3]
    guidance: torch.Tensor | None


def make_inputs(config, height: int, width: int, text_tokens: int, dtype, device, seed: int) -> Inputs:
    """Random latents and text embeddings for a height x width image: the VAE's 8x downsampling and FLUX's
    2x2 packing make (height/16) x (width/16) image tokens."""
    if height % 16 or width % 16:
        raise ValueError(f"height and width must be multiples of 16, got {height}x{width}")
    rows, cols = height // 16, width // 16
    g = torch.Generator(device="cpu").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)

    img_ids = torch.zeros(rows, cols, 3)
    img_ids[..., 1] = torch.arange(rows)[:, None]
    img_ids[..., 2] = torch.arange(cols)[None, :]
    guidance = torch.full([1], 3.5, device=device) if config["guidance_embeds"] else None
    return Inputs(randn(1, rows * cols, config["in_channels"]), randn(1, text_tokens, config["joint_attention_dim"]),
                  randn(1, config["pooled_projection_dim"]), img_ids.reshape(rows * cols, 3).to(device),
                  torch.zeros(text_tokens, 3, device=device), guidance)


def synchronize(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Trajectory:
    latents: list[torch.Tensor] = field(default_factory=list)  # after each step, on the CPU
    step_ms: list[float] = field(default_factory=list)  # transformer forward time per step


def velocity(model, x, sigma, inputs: Inputs):
    return model(hidden_states=x, encoder_hidden_states=inputs.text, pooled_projections=inputs.pooled,
                 timestep=sigma.expand(x.shape[0]).to(x.dtype), img_ids=inputs.img_ids, txt_ids=inputs.txt_ids,
                 guidance=inputs.guidance, return_dict=False)[0]


@torch.inference_mode()
def run_trajectory(model, inputs: Inputs, steps: int, warmup: bool = True) -> Trajectory:
    """Euler steps of the flow from sigma 1 to 0. `warmup`: one untimed forward first (first-sight
    verification, compilation, cuBLAS plans)."""
    device = inputs.latents.device
    sigmas = torch.linspace(1.0, 0.0, steps + 1, device=device)
    # An inference tensor like every later x: torch.compile guards on it and would recompile at step 2.
    x = inputs.latents.clone()
    if warmup:
        velocity(model, x, sigmas[0], inputs)
        synchronize(device)
    out = Trajectory()
    for i in range(steps):
        start = time.perf_counter()
        v = velocity(model, x, sigmas[i], inputs)
        synchronize(device)
        out.step_ms.append((time.perf_counter() - start) * 1e3)
        x = (x.float() + (sigmas[i + 1] - sigmas[i]) * v.float()).to(x.dtype)
        out.latents.append(x.cpu())
    return out


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def bit_identical(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b))


def psnr(test: torch.Tensor, reference: torch.Tensor) -> float:
    """10 log10(peak^2 / MSE) in fp64, peak = max |reference|; inf when equal."""
    ref, x = reference.double(), test.double()
    mse = (x - ref).pow(2).mean().item()
    peak = ref.abs().max().item()
    return math.inf if mse == 0 else 10 * math.log10(peak * peak / mse)


def naive_layer_norm(self, x):
    """F.layer_norm(x, (D,), eps=self.eps) the naive way: fp32, mean and mean of squares, var = E[x^2] - E[x]^2."""
    xf = x.float()
    mean = xf.mean(-1, keepdim=True)
    var = (xf * xf).mean(-1, keepdim=True) - mean * mean
    return ((xf - mean) * torch.rsqrt(var + self.eps)).to(x.dtype)


@contextlib.contextmanager
def naive_fp32_norms(model):
    """Every affine-free nn.LayerNorm of `model` computes naive_layer_norm while the context is open."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.LayerNorm) and m.weight is None]
    for norm in norms:
        norm.forward = types.MethodType(naive_layer_norm, norm)
    try:
        yield
    finally:
        for norm in norms:
            del norm.forward


def run_modes(model, inputs, steps, modes, device) -> tuple[dict, dict]:
    """Trajectories per mode and the mount's reports (for lossless and extra-high)."""
    import dfuse.torch as dt

    results, reports = {}, {}
    if "eager" in modes:
        results["eager"] = run_trajectory(model, inputs, steps)
    mounted = [m for m in ("lossless", "extra-high") if m in modes]
    if mounted:
        handle = dt.mount(model)
        try:
            for quality in mounted:
                with handle.batch(quality):
                    results[quality] = run_trajectory(model, inputs, steps)
                reports[quality] = handle.report()
        finally:
            handle.unmount()
    if "naive-fp32-norm" in modes:
        with naive_fp32_norms(model):
            results["naive-fp32-norm"] = run_trajectory(model, inputs, steps)
    if "compile" in modes:
        compiled = torch.compile(model)
        results["compile"] = run_trajectory(compiled, inputs, steps)
    synchronize(device)
    return results, reports


@dataclass
class Contribution:
    family: str
    tier: str
    sites: int
    without_ms: float  # median step with the family excluded
    with_ms: float     # median step with every family of the tier


def measure_contributions(model, inputs, steps, tiers) -> list[Contribution]:
    """What each family buys: median step time at each tier with every family mounted, and with one family
    excluded (dfuse.torch.mount(exclude=...)), over `steps`-step trajectories measured back to back."""
    import dfuse.torch as dt

    def median_step(quality, exclude=()):
        handle = dt.mount(model, quality, exclude=exclude)
        try:
            with handle.batch(quality):
                t = run_trajectory(model, inputs, steps)
            return statistics.median(t.step_ms), handle.report()
        finally:
            handle.unmount()

    out = []
    for tier in tiers:
        full_ms, report = median_step(tier)
        families = {}  # the families this tier adds (lower tiers' families are measured at their own tier)
        for s in report.sites:
            if s.fused and s.tier == tier:
                families[s.family] = families.get(s.family, 0) + 1
        for family, sites in families.items():
            without_ms, _ = median_step(tier, (family,))
            out.append(Contribution(family, tier, sites, without_ms, full_ms))
    return out


def fmt_ms(ms: float) -> str:
    return f"{ms:.2f}"


def fmt_db(db: float) -> str:
    return "inf (identical)" if math.isinf(db) else f"{db:.2f}"


def git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def device_name(device) -> str:
    d = torch.device(device)
    if d.type == "cuda":
        return torch.cuda.get_device_name(d)
    return f"CPU ({platform.processor() or platform.machine()})"


def markdown(args, results, reports, model_desc, contributions=()) -> str:
    now = datetime.datetime.now(datetime.timezone.utc)
    lines = [f"# FLUX.1 quality tiers: {model_desc}", "",
             f"Date {now:%Y-%m-%d %H:%M UTC}, device {device_name(args.device)}, "
             f"commit {args.commit or git_commit()}, torch {torch.__version__}, dtype {args.dtype}, "
             f"{args.height}x{args.width} ({(args.height // 16) * (args.width // 16)} image tokens), "
             f"{args.text_tokens} text tokens, {args.steps} Euler steps, seed {args.seed}.", ""]
    eager = results.get("eager")
    modes = [m for m in MODES if m in results]

    lines += ["## Summary", "", "| mode | median step ms | speedup vs eager | final PSNR vs eager (dB) | "
              "steps bit-identical to eager |", "|---|---|---|---|---|"]
    for mode in modes:
        t = results[mode]
        median = statistics.median(t.step_ms)
        speedup = f"{statistics.median(eager.step_ms) / median:.3f}x" if eager else "-"
        if eager and mode != "eager":
            identical = sum(bit_identical(a, b) for a, b in zip(t.latents, eager.latents))
            final = fmt_db(psnr(t.latents[-1], eager.latents[-1]))
            same = f"{identical}/{len(t.latents)}"
        else:
            final, same = "-", "-"
        lines.append(f"| {mode} | {fmt_ms(median)} | {speedup} | {final} | {same} |")
    lines.append("")

    if eager:
        head = ["step", "sigma", "eager ms"]
        for mode in modes[1:]:
            head += [f"{mode} ms", f"{mode} == eager" if mode == "lossless" else f"{mode} PSNR dB"]
        lines += ["## Per step", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i in range(args.steps):
            row = [str(i + 1), f"{1 - i / args.steps:.3f}", fmt_ms(eager.step_ms[i])]
            for mode in modes[1:]:
                t = results[mode]
                row.append(fmt_ms(t.step_ms[i]))
                if mode == "lossless":
                    row.append("yes" if bit_identical(t.latents[i], eager.latents[i]) else "**NO**")
                else:
                    row.append(fmt_db(psnr(t.latents[i], eager.latents[i])))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")

    if contributions:
        lines += ["## What each family buys", "",
                  f"Median step over {args.contribution_steps}-step trajectories with every family of the tier "
                  "mounted and with one family excluded (`mount(..., exclude=(family,))`), measured back to back.",
                  "", "| family | tier | sites | step ms, all mounted | step ms, family excluded | saves ms/step |",
                  "|---|---|---|---|---|---|"]
        for c in contributions:
            lines.append(f"| {c.family} | {c.tier} | {c.sites} | {fmt_ms(c.with_ms)} | {fmt_ms(c.without_ms)} | "
                         f"{c.without_ms - c.with_ms:.2f} |")
        lines.append("")

    for quality, report in reports.items():
        lines += [f"## Sites at {quality}", ""]
        families = {}
        for s in report.sites:
            f = families.setdefault((s.family, s.op, s.tier), {"sites": 0, "states": {}, "fused": 0, "chain": 0,
                                                                "uncounted": 0})
            f["sites"] += 1
            f["states"][s.state] = f["states"].get(s.state, 0) + 1
            f["fused"] += s.fused_calls
            f["chain"] += s.chain_calls
            f["uncounted"] += s.unproven_calls
        lines += ["| family | op | tier | sites | states | fused calls | chain calls | uncounted calls |",
                  "|---|---|---|---|---|---|---|---|"]
        for (family, op, tier), f in families.items():
            states = ", ".join(f"{n} {state}" for state, n in f["states"].items())
            lines.append(f"| {family} | {op} | {tier} | {f['sites']} | {states} | {f['fused']} | {f['chain']} | "
                         f"{f['uncounted']} |")
        lines += ["", "Gate counters of each op since mount, and the fused calls the sites account for:", "",
                  "| op | Gate fused | Gate eager | verifications | fallbacks | fused by sites | check |",
                  "|---|---|---|---|---|---|---|"]
        for o in report.ops:
            lines.append(f"| {o.op} | {o.fused_calls} | {o.eager_calls} | {o.verifications} | {o.fallbacks} | "
                         f"{o.site_fused_calls} | {'ok' if o.consistent else 'MISMATCH'} |")
        for family, why in report.rejected_families:
            lines.append(f"\nfamily {family} off: {why}")
        lines += ["", "<details><summary>every site</summary>", "",
                  "| site | family | state | fused | chain | uncounted | verifications | fallbacks | reason |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for s in report.sites:
            reason = s.reason.replace("|", "/")
            lines.append(f"| {s.name} | {s.family} | {s.state} | {s.fused_calls} | {s.chain_calls} | "
                         f"{s.unproven_calls} | {s.verifications} | {s.fallbacks} | {reason} |")
        lines += ["", "</details>", ""]
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tiny", action="store_true",
                   help="tiny config (2+2 blocks), 128x128, 16 text tokens, 3 steps unless given")
    p.add_argument("--checkpoint", type=Path, help="a transformer directory (save_pretrained) or a pipeline "
                   "directory with transformer/; default: the FLUX.1-dev config with random weights")
    p.add_argument("--steps", type=int)
    p.add_argument("--height", type=int)
    p.add_argument("--width", type=int)
    p.add_argument("--text-tokens", type=int)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {','.join(MODES)}")
    p.add_argument("--out", type=Path, help="write the markdown report here")
    p.add_argument("--commit", help="the commit to name in the report (default: what git reports here; a copy of "
                   "the tree with stale git metadata, as on the GPU machine, needs it given)")
    p.add_argument("--contribution-steps", type=int, default=0,
                   help="also measure what each fused family saves per step, over trajectories of this many steps "
                        "(0: not measured)")
    args = p.parse_args(argv)
    small = (3, 128, 128, 16) if args.tiny else (50, 1024, 1024, 512)
    for name, default in zip(("steps", "height", "width", "text_tokens"), small):
        if getattr(args, name) is None:
            setattr(args, name, default)
    args.mode_list = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in args.mode_list if m not in MODES]
    if unknown:
        p.error(f"unknown modes {unknown}; valid: {', '.join(MODES)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    dtype = DTYPES[args.dtype]
    if args.checkpoint:
        model = load_model(args.checkpoint, dtype, args.device)
        desc = f"checkpoint {args.checkpoint}"
    else:
        config = TINY_CONFIG if args.tiny else FLUX_1_DEV_CONFIG
        model = build_model(config, dtype, args.device, args.seed)
        desc = ("tiny FLUX.1 config" if args.tiny else "FLUX.1-dev config") + f", random weights (seed {args.seed})"
    inputs = make_inputs(dict(model.config), args.height, args.width, args.text_tokens, dtype, args.device,
                         args.seed + 1)
    results, reports = run_modes(model, inputs, args.steps, args.mode_list, args.device)
    contributions = []
    if args.contribution_steps > 0:
        tiers = [m for m in ("lossless", "extra-high") if m in args.mode_list]
        contributions = measure_contributions(model, inputs, args.contribution_steps, tiers)
    text = markdown(args, results, reports, desc, contributions)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    lossless, eager = results.get("lossless"), results.get("eager")
    if lossless and eager and not all(bit_identical(a, b) for a, b in zip(lossless.latents, eager.latents)):
        print("lossless is NOT bit-identical to eager", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
