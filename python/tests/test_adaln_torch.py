"""torch.ops.dfuse adaLN ops against the real PyTorch eager chains they replace, bit for bit.

Every comparison views the outputs as integers (int16 for bf16/f16, int32 for f32), so -0/+0 and NaN bits
count, and checks dtype and shape against the eager result. f32 is held to the same bitwise standard: each
eager op rounds to f32 and the fused kernel rounds at the same three (two) points.

Where the fused kernel is expected to run, each case calls the op twice: the first call is the Gate's first
sight (fused into the output, eager into a scratch, compared), the second runs the verified fused kernel
alone. The op counters must show two fused calls and no new fallback, so a kernel that mismatched and
silently fell back to the eager chain fails the test.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import assert_bitwise, check_op, counters, rand  # noqa: E402

FLUX = (1, 4608, 3072)  # FLUX.1 image tokens at 1024x1024, hidden 3072
WAN = (1, 75600, 5120)  # Wan 2.1 14B, 720p 81 frames: 21 latent frames x 3600 tokens, hidden 5120
WAN_FRAMES = (1, 21, 3600, 5120)
ODD = [(1, 1, 1536), (1, 7, 2560), (3, 4097, 3840), (3, 7, 1536), (2, 4097, 2560)]
HALF = [torch.bfloat16, torch.float16]
ALL = HALF + [torch.float32]


def modulate_chain(x, scale, shift):
    return x * (1 + scale) + shift


def residual_chain(residual, gate, update):
    return residual + gate * update


OPS = {
    "modulate_scale_shift": (dt.modulate_scale_shift, modulate_chain),
    "residual_gate_add": (dt.residual_gate_add, residual_chain),
}


def check(name, args, fused=True):
    op, chain = OPS[name]
    return check_op(name, op, chain, args, fused)


# ---- modulate_scale_shift ---------------------------------------------------------------------------------


def modulate_args(shape, dtype, per):
    b, s, d = shape
    x = rand(shape, dtype, 3.0)
    param_shape = (b, 1, d) if per == "batch" else shape
    return x, rand(param_shape, dtype, 0.5), rand(param_shape, dtype)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("per", ["batch", "token"])
@pytest.mark.parametrize("shape", [FLUX] + ODD, ids=str)
def test_modulate_shapes(shape, per, dtype):
    check("modulate_scale_shift", modulate_args(shape, dtype, per))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("per", ["batch", "token"])
def test_modulate_wan(per, dtype):
    check("modulate_scale_shift", modulate_args(WAN, dtype, per))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape", [WAN_FRAMES, (3, 5, 91, 1536), (2, 3, 7, 2560)], ids=str)
def test_modulate_per_frame(shape, dtype):
    b, f, _, d = shape
    x = rand(shape, dtype, 3.0)
    check("modulate_scale_shift", (x, rand((b, f, 1, d), dtype, 0.5), rand((b, f, 1, d), dtype)))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape", [FLUX, (3, 4097, 3840), (3, 7, 1536)], ids=str)
def test_modulate_chunk6_views(shape, dtype):
    b, s, d = shape
    x = rand(shape, dtype, 3.0)
    # The transformer block's modulation: [B, 1, 6D] split into shift, scale, gate (x2), strided views.
    shift, scale, _, _, _, _ = rand((b, 1, 6 * d), dtype).chunk(6, dim=-1)
    assert scale.stride() == (6 * d, 6 * d, 1)
    check("modulate_scale_shift", (x, scale, shift))
    # diffusers: emb [B, 6D].chunk(6, dim=1), then [:, None].
    shift, scale, _, _, _, _ = rand((b, 6 * d), dtype).chunk(6, dim=1)
    check("modulate_scale_shift", (x, scale[:, None], shift[:, None]))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("shape", [FLUX, (3, 7, 1536)], ids=str)
def test_modulate_strided_x(shape, dtype):
    b, s, d = shape
    _, scale, shift = modulate_args(shape, dtype, "batch")
    wide = rand((b, s, 2 * d), dtype, 3.0)
    check("modulate_scale_shift", (wide[..., :d], scale, shift))
    check("modulate_scale_shift", (wide[..., d:], scale, shift))
    check("modulate_scale_shift", (rand((s, b, d), dtype, 3.0).transpose(0, 1), scale, shift))
    # Misaligned rows (2-byte aligned): the kernel may take them or leave them to the eager chain.
    check("modulate_scale_shift", (wide[..., 1:d + 1], scale, shift), fused=None)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_modulate_nan_inf_denormal(dtype):
    shape = (2, 513, 3072)
    x, scale, shift = modulate_args(shape, dtype, "token")
    tiny = torch.finfo(dtype).tiny
    for t, values in [(x, [float("nan"), float("inf"), -float("inf"), tiny / 4, -tiny / 8, -0.0]),
                      (scale, [float("nan"), float("inf"), -1.0, -float("inf")]),
                      (shift, [float("nan"), -float("inf"), -0.0])]:
        flat = t.view(-1)
        where = torch.randint(0, flat.numel(), (64 * len(values),), device="cuda")
        flat[where] = torch.tensor(values, dtype=dtype, device="cuda").repeat(64)
    check("modulate_scale_shift", (x, scale, shift))


# ---- residual_gate_add ------------------------------------------------------------------------------------


def residual_args(shape, dtype, per):
    b, s, d = shape
    gate_shape = {"batch": (b, 1, d), "token": (b, s, 1), "full": shape}[per]
    return rand(shape, dtype, 2.0), rand(gate_shape, dtype, 0.5), rand(shape, dtype, 2.0)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("per", ["batch", "token", "full"])
@pytest.mark.parametrize("shape", [FLUX] + ODD, ids=str)
def test_residual_shapes(shape, per, dtype):
    check("residual_gate_add", residual_args(shape, dtype, per))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("per", ["batch", "token"])
def test_residual_wan(per, dtype):
    check("residual_gate_add", residual_args(WAN, dtype, per))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_residual_chunk6_gate_and_nan(dtype):
    b, s, d = FLUX
    residual, _, update = residual_args(FLUX, dtype, "batch")
    gate = rand((b, 1, 6 * d), dtype).chunk(6, dim=-1)[2]
    check("residual_gate_add", (residual, gate, update))
    for t in (residual, update):
        flat = t.view(-1)
        where = torch.randint(0, flat.numel(), (256,), device="cuda")
        flat[where] = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0], dtype=dtype,
                                   device="cuda").repeat(64)
    check("residual_gate_add", (residual, gate, update))


# ---- the Gate ---------------------------------------------------------------------------------------------


def test_gate_report_shows_verified_signature():
    args = modulate_args((1, 4608, 3072), torch.bfloat16, "batch")
    check("modulate_scale_shift", args)
    lines = [line for line in dt.gate_report().splitlines() if "bf16[1,4608,3072]" in line
             and "diffusion.modulate_scale_shift" in line]
    assert any(" verified " in f" {line} " for line in lines), dt.gate_report()
    assert counters("modulate_scale_shift").fused > 0
    # The short and the qualified op name give the same counters.
    assert dt.op_counters("modulate_scale_shift") == dt.op_counters("diffusion.modulate_scale_shift")


# ---- fallbacks: exactly torch's result, dtype included ----------------------------------------------------


def test_fallback_mixed_dtype():
    x = rand(FLUX, torch.bfloat16, 3.0)
    scale, shift = rand((1, 1, 3072), torch.float32, 0.5), rand((1, 1, 3072), torch.float32)
    ref = check("modulate_scale_shift", (x, scale, shift), fused=False)
    assert ref.dtype == torch.float32
    residual, gate, update = residual_args(FLUX, torch.bfloat16, "batch")
    ref = check("residual_gate_add", (residual, gate.float(), update), fused=False)
    assert ref.dtype == torch.float32


def test_fallback_zero_dim_scale_keeps_dtype():
    # A 0-dim CUDA f32 tensor does not promote a bf16 tensor: the result stays bf16.
    x = rand((2, 7, 1536), torch.bfloat16, 3.0)
    scale = torch.tensor(0.3, device="cuda")
    ref = check("modulate_scale_shift", (x, scale, rand((2, 1, 1536), torch.bfloat16)), fused=None)
    assert ref.dtype == torch.bfloat16


def test_fallback_broadcast_x():
    # x smaller than the result (per-token scale against a per-batch x): the output shape is the broadcast.
    x, scale, shift = rand((2, 1, 1536), torch.bfloat16), rand((2, 7, 1536), torch.bfloat16), \
        rand((2, 7, 1536), torch.bfloat16)
    assert check("modulate_scale_shift", (x, scale, shift), fused=False).shape == (2, 7, 1536)


def test_fallback_integer():
    x = torch.randint(-50, 50, (3, 7, 64), device="cuda", dtype=torch.int32)
    ref = check("modulate_scale_shift", (x, x, x), fused=False)
    assert ref.dtype == torch.int32


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_cpu_matches_torch_cpu_chain(dtype):
    shape = (2, 33, 1536)
    x = rand(shape, dtype, 3.0, device="cpu")
    scale, shift = rand((2, 1, 1536), dtype, 0.5, device="cpu"), rand((2, 1, 1536), dtype, device="cpu")
    check("modulate_scale_shift", (x, scale, shift), fused=None)
    check("residual_gate_add", (x, scale, shift.expand(shape)), fused=None)
    # a scale of another dtype promotes: the kernel must not run, the chain's result comes back
    other = torch.float64 if dtype == torch.float32 else torch.float32
    check("modulate_scale_shift", (x, scale.to(other), shift), fused=False)


# ---- torch.compile, CUDA graphs, opcheck ------------------------------------------------------------------


def block(x, scale, shift, residual, gate):
    return dt.residual_gate_add(residual, gate, dt.modulate_scale_shift(x, scale, shift))


def block_chain(x, scale, shift, residual, gate):
    return residual_chain(residual, gate, modulate_chain(x, scale, shift))


def block_args(shape, dtype):
    b, _, d = shape
    x, scale, shift = modulate_args(shape, dtype, "batch")
    return x, scale, shift, rand(shape, dtype, 2.0), rand((b, 1, d), dtype, 0.5)


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph(dynamic):
    torch._dynamo.reset()
    compiled = torch.compile(block, fullgraph=True, dynamic=dynamic)
    for shape in [FLUX, (2, 7, 1536)]:
        args = block_args(shape, torch.bfloat16)
        ref = block_chain(*args)
        assert_bitwise(block(*args), ref)
        assert_bitwise(compiled(*args), ref)


def test_cuda_graph_replay_with_fresh_inputs():
    args = block_args((1, 4608, 3072), torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        block(*args)  # first sight, outside capture: verifies both signatures
    torch.cuda.current_stream().wait_stream(side)
    before = counters("modulate_scale_shift")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = block(*args)
    assert counters("modulate_scale_shift").fused == before.fused + 1  # captured the fused kernel
    for _ in range(3):
        for t, fresh in zip(args, block_args((1, 4608, 3072), torch.bfloat16)):
            t.copy_(fresh)
        graph.replay()
        torch.cuda.synchronize()
        assert_bitwise(out, block_chain(*args))


def test_cuda_graph_unverified_signature_runs_eager_chain():
    shape = (2, 33, 1344)  # a signature no other test uses: still unverified here
    args = modulate_args(shape, torch.bfloat16, "batch")
    before = counters("modulate_scale_shift")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = dt.modulate_scale_shift(*args)
    after = counters("modulate_scale_shift")
    assert after.eager == before.eager + 1 and after.verifications == before.verifications
    for t, fresh in zip(args, modulate_args(shape, torch.bfloat16, "batch")):
        t.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert_bitwise(out, modulate_chain(*args))
    check("modulate_scale_shift", args)  # outside capture it verifies and runs fused


@pytest.mark.parametrize("name", list(OPS))
def test_opcheck(name):
    op = getattr(torch.ops.dfuse, name).default
    args = modulate_args((2, 7, 1536), torch.bfloat16, "batch") if name == "modulate_scale_shift" \
        else residual_args((2, 7, 1536), torch.bfloat16, "token")
    torch.library.opcheck(op, args)
    torch.library.opcheck(op, tuple(a.cpu() for a in args))
