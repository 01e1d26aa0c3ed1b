"""dfuse torch ops vs the PyTorch eager chain vs torch.compile of the chain, side by side in one run.

    python3 bench/torch_bench.py [--json OUT.json] [--iters 100]

Per op and model shape (bf16; scale/shift/gate per batch, [B,1,D]; silu_mul with separate and packed gate/up
inputs; bias_silu/bias_glu channels last with a per-channel bias, bias_glu's x twice as wide; linear_gelu_tanh as
the FFN up-projection D -> 4D at FLUX.1's shape; layernorm_modulate / rmsnorm_scale_shift with eps 1e-6 and
per-batch scale/shift; rope_rotate_half on the q heads [B, S, D/128, 128] and rope_interleaved_pairs on
[B, D/128, S, 128] (FLUX's layout), fp32 tables; fused_qknorm_rope on q and k heads of 128 sliced from one packed
[B, S, 3 D] projection, F.rms_norm then the fp32 rotate-half RoPE; the norm family's other bit-exact ops: Z-Image's
RMSNorm times a per-batch scale and as a tanh-gated residual, diffusers' decomposed RMSNorm then modulate, the gated
residual then LayerNorm then modulate, the fp32 LayerNorm of a bf16 x, and a LayerNorm per packed q/k head) it reports the median kernel time from
CUDA events, the bytes the op must move at least (each input read once, the output written once) per second,
that rate as a share of the device copy bandwidth measured in the same run, the time of a copy moving the same
bytes against the op's (the ceiling at small sizes, where a copy itself falls short of the large copy's rate),
and the speedup over eager and over torch.compile. Inputs rotate over sets larger than twice the L2 cache so no call hits warm L2; before
each timed round the GPU sleeps while the host queues the round, so host launch cost stays out of the GPU
times. The host overhead per call is measured separately at a tiny shape with time.perf_counter.
"""

import argparse
import json
import math
import statistics
import sys
import time
from collections import namedtuple
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

import dfuse.torch as dt  # noqa: E402

SHAPES = {"FLUX.1": (1, 4608, 3072), "Wan2.1-14B": (1, 75600, 5120)}
DTYPE = torch.bfloat16
SLEEP_CYCLES = 20_000_000  # ~10 ms at H200 clocks: ample time to queue a round


def modulate_chain(x, scale, shift):
    return x * (1 + scale) + shift


def residual_chain(residual, gate, update):
    return residual + gate * update


def silu_mul_chain(a, b):
    return F.silu(a) * b


def bias_silu_chain(x, bias):
    return F.silu(x + bias)


def bias_glu_chain(x, bias):
    h, g = (x + bias).chunk(2, dim=-1)
    return h * F.silu(g)


def rand(shape, amplitude):
    return (torch.randn(shape, device="cuda") * amplitude).to(DTYPE)


def modulate_inputs(shape):
    b, _, d = shape
    return rand(shape, 3.0), rand((b, 1, d), 0.5), rand((b, 1, d), 1.0)


def residual_inputs(shape):
    b, _, d = shape
    return rand(shape, 2.0), rand((b, 1, d), 0.5), rand(shape, 2.0)


def silu_mul_inputs(shape):
    return rand(shape, 3.0), rand(shape, 1.0)


def silu_mul_packed_inputs(shape):
    """FLUX.2's SwiGLU: the gate and up halves of one packed [.., 2D] projection, as strided views."""
    return tuple(rand(shape[:-1] + (2 * shape[-1],), 3.0).chunk(2, dim=-1))


def bias_silu_inputs(shape):
    return rand(shape, 3.0), rand(shape[-1:], 1.0)


def bias_glu_inputs(shape):
    """x [.., 2D] and bias [2D]; the output has `shape`."""
    return rand(shape[:-1] + (2 * shape[-1],), 3.0), rand((2 * shape[-1],), 1.0)


def linear_gelu_chain(x, weight, bias):
    return F.gelu(F.linear(x, weight, bias), approximate="tanh")


def linear_gelu_inputs(shape):
    """The FFN up-projection of a block with hidden size D: x [B, S, D], weight [4D, D], bias [4D]."""
    d = shape[-1]
    return rand(shape, 1.0), rand((4 * d, d), 1 / math.sqrt(d)), rand((4 * d,), 0.5)


EPS = 1e-6


def layernorm_modulate_chain(x, scale, shift):
    return F.layer_norm(x, (x.shape[-1],), eps=EPS) * (1 + scale) + shift


def rmsnorm_scale_shift_chain(x, weight, scale, shift):
    return F.rms_norm(x, (x.shape[-1],), weight, EPS) * (1 + scale) + shift


def rmsnorm_inputs(shape):
    b, _, d = shape
    return rand(shape, 3.0), rand((d,), 1.0), rand((b, 1, d), 0.5), rand((b, 1, d), 1.0)


def zimage_rms_norm(x, weight):
    """Z-Image's RMSNorm (rmsnorm_scale, rmsnorm_tanh_residual): every op in x's dtype."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def rmsnorm_scale_chain(x, weight, scale):
    return zimage_rms_norm(x, weight) * scale


def rmsnorm_tanh_residual_chain(residual, gate, y, weight):
    return residual + torch.tanh(gate) * zimage_rms_norm(y, weight)


def rmsnorm_tanh_residual_inputs(shape):
    b, _, d = shape
    return rand(shape, 2.0), rand((b, 1, d), 1.0), rand(shape, 3.0), rand((d,), 1.0)


def rmsnorm_scale_inputs(shape):
    b, _, d = shape
    return rand(shape, 3.0), rand((d,), 1.0), rand((b, 1, d), 1.0)


def rmsnorm_decomposed_chain(x, weight, scale, shift):
    """diffusers' RMSNorm (x.float().pow(2).mean(-1), rsqrt, cast to the weight's dtype, * weight), then modulate."""
    n = (x * torch.rsqrt(x.to(torch.float32).pow(2).mean(-1, keepdim=True) + EPS)).to(weight.dtype) * weight
    return n * (1 + scale) + shift


def scale_residual_chain(residual, gate, update, scale, shift):
    r = residual + gate * update
    return r, F.layer_norm(r, (r.shape[-1],), eps=EPS) * (1 + scale) + shift


def scale_residual_inputs(shape):
    b, _, d = shape
    return rand(shape, 2.0), rand((b, 1, d), 0.5), rand(shape, 2.0), rand((b, 1, d), 0.5), rand((b, 1, d), 1.0)


def fp32_layernorm_chain(x, weight, bias):
    return F.layer_norm(x.float(), (x.shape[-1],), weight, bias, EPS).to(x.dtype)


def fp32_layernorm_op(x, weight, bias):
    return dt.fp32_layernorm_bf16(x, weight, bias, EPS)


def fp32_layernorm_inputs(shape):
    d = shape[-1]
    return rand(shape, 3.0), torch.randn((d,), device="cuda"), torch.randn((d,), device="cuda")


def qk_head_layernorm_chain(q, k, q_weight, q_bias, k_weight, k_bias):
    return (F.layer_norm(q, (q.shape[-1],), q_weight, q_bias, EPS),
            F.layer_norm(k, (k.shape[-1],), k_weight, k_bias, EPS))


def qk_head_layernorm_op(q, k, q_weight, q_bias, k_weight, k_bias):
    return dt.qk_head_layernorm(q, k, q_weight, q_bias, k_weight, k_bias, EPS)


def qk_head_layernorm_inputs(shape):
    """q and k as the [B, S, H, 128] slots of one packed [B, S, 3 D] projection, affine weights and biases [128]."""
    b, s, d = shape
    q, k, _ = rand((b, s, 3 * d), 3.0).view(b, s, 3, d // 128, 128).unbind(2)
    return q, k, rand((128,), 1.0), rand((128,), 0.5), rand((128,), 1.0), rand((128,), 0.5)


def rope_chain(x, cos, sin):
    """diffusers apply_rotary_emb(use_real=True, use_real_unbind_dim=-2) on x [B, S, H, D], with fp32 tables
    already broadcast as [1, S, 1, D]."""
    x_real, x_imag = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)
    x_rotated = torch.cat([-x_imag, x_real], dim=-1)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def rope_inputs(shape):
    """q of a [B, S, H * 128] projection as [B, S, H, 128], with fp32 cos/sin tables [1, S, 1, 128]."""
    b, s, d = shape
    angles = torch.rand((1, s, 1, 128), device="cuda") * 6.28
    return rand((b, s, d // 128, 128), 1.0), angles.cos(), angles.sin()


def flux_rope_chain(x, cos, sin):
    """diffusers apply_rotary_emb(use_real=True, use_real_unbind_dim=-1) (FLUX.1) on x [B, H, S, D], with fp32
    tables already broadcast as [1, 1, S, D]."""
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def flux_rope_inputs(shape):
    """q as FLUX's attention holds it, [B, H, S, 128] (transposed from a [B, S, H * 128] projection)."""
    b, s, d = shape
    angles = torch.rand((1, 1, s, 64), device="cuda").repeat_interleave(2, dim=-1) * 6.28
    return rand((b, s, d // 128, 128), 1.0).transpose(1, 2), angles.cos(), angles.sin()


def gelu_tanh_cat_chain(attn, mlp):
    """FLUX.1's single-stream block tail: the processor's reshape of the attention heads, then the cat with the
    tanh-GELU of the MLP projection."""
    return torch.cat([attn.reshape(attn.shape[0], attn.shape[1], -1), F.gelu(mlp, approximate="tanh")], dim=2)


def gelu_tanh_cat_inputs(shape):
    """The attention output [B, H, S, 128] as the processor holds it ([B, S, H, 128], transposed) and the
    [B, S, 4 D] MLP projection."""
    b, s, d = shape
    return rand((b, d // 128, s, 128), 1.0).transpose(1, 2), rand((b, s, 4 * d), 2.0)


def qknorm_rope_chain(q, k, q_weight, k_weight, cos, sin):
    """QK RMSNorm (torch.nn.RMSNorm, F.rms_norm) then the rotate-half RoPE in fp32 (diffusers' x.float() * cos
    + rotate_half(x).float() * sin, rounded once), on q and k: fused_qknorm_rope's exact chain."""
    def one(x, w):
        n = F.rms_norm(x, (x.shape[-1],), w, EPS)
        n1, n2 = n.chunk(2, dim=-1)
        return (n.float() * cos + torch.cat((-n2, n1), dim=-1).float() * sin).to(n.dtype)
    return one(q, q_weight), one(k, k_weight)


def qknorm_rope_op(q, k, q_weight, k_weight, cos, sin):
    return dt.fused_qknorm_rope(q, k, q_weight, k_weight, EPS, cos, sin, "torch_rms_norm", "fp32_opmath")


def qknorm_rope_inputs(shape):
    """q and k as the [B, S, H, 128] slots of one packed [B, S, 3 D] projection (strided views), weights [128],
    fp32 rotate-half tables [S, 1, 128]."""
    b, s, d = shape
    q, k, _ = rand((b, s, 3 * d), 3.0).view(b, s, 3, d // 128, 128).unbind(2)
    angles = (torch.rand((s, 1, 64), device="cuda") * 6.28).repeat(1, 1, 2)
    return q, k, rand((128,), 1.0), rand((128,), 1.0), angles.cos(), angles.sin()


def bitwise_equal(out, ref):
    if isinstance(out, (tuple, list)):
        return all(bitwise_equal(o, r) for o, r in zip(out, ref, strict=True))
    return bool(torch.equal(out.view(torch.int16), ref.view(torch.int16)))


def within_linear_gelu_bound(out, ref, x, weight, bias):
    """linear_gelu_tanh's close contract (dfuse/ops/gemm.h): |out - eager| <= 2^-7 |eager| + 2^-8 |h| +
    3 K 2^-24 a + tiny, h = x W^T + b and a = |x| |W|^T + |b| in fp32."""
    h = F.linear(x.float(), weight.float(), bias.float())
    a = F.linear(x.float().abs(), weight.float().abs(), bias.float().abs())
    tiny = torch.finfo(out.dtype).smallest_normal * torch.finfo(out.dtype).eps  # the smallest subnormal
    bound = ref.float().abs() * 2**-7 + h.abs() * 2**-8 + a * (3 * x.shape[-1] * 2**-24) + tiny
    return bool(((out.float() - ref.float()).abs() <= bound).all())


# An op's benchmark: the dfuse op, its eager chain, inputs for a shape, the contract check
# (out, ref, *inputs) -> bool, and the shapes it runs at. A name's first word is the op.
Op = namedtuple("Op", "op chain inputs check shapes", defaults=(None, None))
OPS = {
    "modulate_scale_shift": Op(dt.modulate_scale_shift, modulate_chain, modulate_inputs),
    "residual_gate_add": Op(dt.residual_gate_add, residual_chain, residual_inputs),
    "silu_mul": Op(dt.silu_mul, silu_mul_chain, silu_mul_inputs),
    "silu_mul packed": Op(dt.silu_mul, silu_mul_chain, silu_mul_packed_inputs),
    "bias_silu": Op(dt.bias_silu, bias_silu_chain, bias_silu_inputs),
    "bias_glu": Op(dt.bias_glu, bias_glu_chain, bias_glu_inputs),
    "layernorm_modulate": Op(dt.layernorm_modulate, layernorm_modulate_chain, modulate_inputs),
    "rmsnorm_scale_shift": Op(dt.rmsnorm_scale_shift, rmsnorm_scale_shift_chain, rmsnorm_inputs),
    "rmsnorm_scale": Op(dt.rmsnorm_scale, rmsnorm_scale_chain, rmsnorm_scale_inputs),
    "rmsnorm_tanh_residual": Op(dt.rmsnorm_tanh_residual, rmsnorm_tanh_residual_chain, rmsnorm_tanh_residual_inputs),
    "rmsnorm_decomposed_scale_shift": Op(dt.rmsnorm_decomposed_scale_shift, rmsnorm_decomposed_chain, rmsnorm_inputs),
    "scale_residual_norm_scale_shift": Op(dt.scale_residual_norm_scale_shift, scale_residual_chain,
                                          scale_residual_inputs),
    "fp32_layernorm_bf16": Op(fp32_layernorm_op, fp32_layernorm_chain, fp32_layernorm_inputs),
    "qk_head_layernorm": Op(qk_head_layernorm_op, qk_head_layernorm_chain, qk_head_layernorm_inputs),
    "rope_rotate_half": Op(dt.rope_rotate_half, rope_chain, rope_inputs),
    "rope_interleaved_pairs": Op(dt.rope_interleaved_pairs, flux_rope_chain, flux_rope_inputs),
    "fused_qknorm_rope": Op(qknorm_rope_op, qknorm_rope_chain, qknorm_rope_inputs),
    "gelu_tanh_cat": Op(dt.gelu_tanh_cat, gelu_tanh_cat_chain, gelu_tanh_cat_inputs, None,
                        {"FLUX.1": SHAPES["FLUX.1"]}),
    # A GEMM: its GB/s column is not a roofline; its time is.
    "linear_gelu_tanh": Op(dt.linear_gelu_tanh, linear_gelu_chain, linear_gelu_inputs, within_linear_gelu_bound,
                           {"FLUX.1": SHAPES["FLUX.1"]}),
}
# Ops that run through the first-sight Gate, which counts their fused calls.
GATED = {"modulate_scale_shift", "residual_gate_add", "silu_mul", "bias_silu", "bias_glu", "layernorm_modulate",
         "rmsnorm_scale_shift", "rope_rotate_half", "rope_interleaved_pairs", "gelu_tanh_cat", "fused_qknorm_rope",
         "rmsnorm_scale", "rmsnorm_tanh_residual", "rmsnorm_decomposed_scale_shift", "scale_residual_norm_scale_shift",
         "fp32_layernorm_bf16", "qk_head_layernorm"}


def nbytes(t):
    """Bytes of a tensor, or of each tensor of a tuple of outputs."""
    if isinstance(t, (tuple, list)):
        return sum(nbytes(x) for x in t)
    return t.numel() * t.element_size()


def time_calls(fn, arg_sets, iters):
    """Median GPU microseconds of one fn(*args) call, rotating over arg_sets."""
    for args in arg_sets:  # warm-up: first-sight verification, compilation, allocator
        fn(*args)
    torch.cuda.synchronize()
    times = []
    per_round = max(len(arg_sets), 16)
    for _ in range(math.ceil(iters / per_round)):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(per_round)]
        torch.cuda._sleep(SLEEP_CYCLES)
        for i, (start, stop) in enumerate(events):
            args = arg_sets[i % len(arg_sets)]
            start.record()
            fn(*args)
            stop.record()
        torch.cuda.synchronize()
        times += [start.elapsed_time(stop) * 1e3 for start, stop in events]
    return statistics.median(times)


def copy_bandwidth(l2_bytes, iters):
    """Device copy bandwidth in GB/s: bytes read plus written by dst.copy_(src), src far larger than L2."""
    n = max(1 << 30, 8 * l2_bytes)
    src = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    us = time_calls(lambda: dst.copy_(src), [()], iters)
    return 2 * n / (us * 1e3), us


def same_size_copy_us(moved, l2_bytes, iters):
    """Median us of a device copy moving `moved` bytes (half read, half written), over buffer pairs larger than
    2x L2 together: what a copy achieves at the op's own size, where launch and ramp-up weigh more."""
    half = max(1, moved // 2)
    count = max(1, math.ceil(2 * l2_bytes / moved))
    pairs = [(torch.empty(half, dtype=torch.uint8, device="cuda"), torch.empty(half, dtype=torch.uint8, device="cuda"))
             for _ in range(count)]
    return time_calls(lambda dst, src: dst.copy_(src), pairs, iters)


def bench_op(name, shape_name, shape, l2_bytes, copy_gbs, iters):
    op, chain, make_inputs, check, _ = OPS[name]
    first = make_inputs(shape)
    out = op(*first)
    ref = chain(*first)
    meets_contract = check(out, ref, *first) if check else bitwise_equal(out, ref)
    moved = sum(nbytes(t) for t in first) + nbytes(out)
    input_bytes = sum(nbytes(t) for t in first)
    sets = [first] + [make_inputs(shape) for _ in range(max(1, math.ceil(2 * l2_bytes / input_bytes)))]
    op_name = name.split()[0]
    fused_before = dt.op_counters(op_name)[0] if op_name in GATED else 0
    compiled = torch.compile(chain, fullgraph=True, dynamic=False)
    us = {
        "dfuse": time_calls(op, sets, iters),
        "eager": time_calls(chain, sets, iters),
        "compile": time_calls(compiled, sets, iters),
    }
    copy_us = same_size_copy_us(moved, l2_bytes, iters)
    rows = []
    for impl, t in us.items():
        gbs = moved / (t * 1e3)
        rows.append({
            "op": name, "shape": shape_name, "dims": list(shape), "impl": impl, "median_us": t, "gb_s": gbs,
            "pct_copy_bw": 100 * gbs / copy_gbs, "same_size_copy_us": copy_us,
            "pct_same_size_copy": 100 * copy_us / t, "speedup_vs_eager": us["eager"] / t,
            "speedup_vs_compile": us["compile"] / t, "bytes": moved, "input_sets": len(sets),
        })
    # Ops without a Gate (close contracts) have no counters: they ran fused when the result differs
    # from the chain's, which the fallback would reproduce bit for bit.
    gated = op_name in GATED
    fused_ran = dt.op_counters(op_name)[0] > fused_before if gated else not bitwise_equal(out, ref)
    return rows, {"op": name, "shape": shape_name, "meets_contract": meets_contract, "fused_kernel_ran": fused_ran}


def host_overhead(calls):
    """Host microseconds per back-to-back call (no sync inside the loop) at a tiny shape."""
    x, scale, shift = (torch.randn((1, 8, 64), device="cuda").to(DTYPE) for _ in range(3))
    candidates = {
        "torch.ops.dfuse.modulate_scale_shift": lambda: torch.ops.dfuse.modulate_scale_shift(x, scale, shift),
        "torch.ops.aten.add.Tensor": lambda: torch.ops.aten.add.Tensor(x, scale),
        "eager chain x*(1+scale)+shift": lambda: modulate_chain(x, scale, shift),
    }
    result = {}
    for label, fn in candidates.items():
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        result[label] = (time.perf_counter() - start) / calls * 1e6
        torch.cuda.synchronize()
    return result


def markdown(rows, copy_gbs, overhead):
    lines = [f"device copy bandwidth: {copy_gbs:.0f} GB/s (read + write)", "",
             "| op | shape | impl | median us | GB/s | % copy BW | % same-size copy | vs eager | vs compile |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['shape']} {tuple(r['dims'])} | {r['impl']} | {r['median_us']:.1f} | "
                     f"{r['gb_s']:.0f} | {r['pct_copy_bw']:.1f} | {r['pct_same_size_copy']:.1f} | {r['speedup_vs_eager']:.2f}x | "
                     f"{r['speedup_vs_compile']:.2f}x |")
    lines += ["", "| host overhead per call (1x8x64 bf16) | us |", "|---|---:|"]
    lines += [f"| {label} | {us:.2f} |" for label, us in overhead.items()]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--iters", type=int, default=100, help="timed calls per implementation and shape")
    parser.add_argument("--host-calls", type=int, default=20000, help="calls for the host overhead loop")
    parser.add_argument("--ops", nargs="+", choices=list(OPS), default=list(OPS), metavar="NAME",
                        help="benchmark only these (default: all of " + ", ".join(OPS) + ")")
    args = parser.parse_args()

    props = torch.cuda.get_device_properties(0)
    l2_bytes = props.L2_cache_size
    copy_gbs, copy_us = copy_bandwidth(l2_bytes, args.iters)
    rows, checks = [], []
    for name in args.ops:
        for shape_name, shape in (OPS[name].shapes or SHAPES).items():
            op_rows, op_check = bench_op(name, shape_name, shape, l2_bytes, copy_gbs, args.iters)
            rows += op_rows
            checks.append(op_check)
            torch.cuda.empty_cache()
    overhead = host_overhead(args.host_calls)

    for c in checks:
        print(f"{c['op']} {c['shape']}: meets its contract against eager: {c['meets_contract']}, "
              f"fused kernel ran: {c['fused_kernel_ran']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "device": props.name, "sm": f"{props.major}.{props.minor}", "l2_bytes": l2_bytes,
            "torch": torch.__version__, "dtype": str(DTYPE), "copy_gb_s": copy_gbs, "copy_us": copy_us,
            "results": rows, "checks": checks, "host_overhead_us": overhead, "gate_report": dt.gate_report(),
        }, indent=2))
    print(markdown(rows, copy_gbs, overhead))
    return 0 if all(c["meets_contract"] and c["fused_kernel_ran"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
