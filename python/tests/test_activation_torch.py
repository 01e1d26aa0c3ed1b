"""torch.ops.dfuse activation ops against the real PyTorch eager chains they replace, bit for bit.

    silu_mul(a, b)         F.silu(a) * b
    bias_silu(x, bias)     F.silu(x + bias)
    bias_glu(x, bias)      h, g = (x + bias).chunk(2, dim=-1); h * F.silu(g)    (bias None: x.chunk)

Outputs are compared as integers (int16 for bf16/f16, int32 for f32), so -0/+0 and NaN bits count. Where the
fused kernel is expected to run, each case calls the op twice (the Gate's first sight, then the verified
kernel alone) and the op counters must show two fused calls and no new fallback.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import dfuse.torch as dt  # noqa: E402
import bitwise  # noqa: E402
from bitwise import assert_bitwise, check_op, rand  # noqa: E402

FLUX2 = (1, 4608, 3072)  # FLUX.2-like MLP rows: 4608 tokens, 3072 gate/up channels
SANA = (1, 1024, 5600)  # Sana 1600M at 1024px: 32x32 latent tokens, GLUMBConv 2C = 11200
ODD = [(1, 1, 1536), (1, 7, 2560), (3, 4097, 3840), (3, 7, 1539), (2, 33, 77)]
HALF = [torch.bfloat16, torch.float16]
ALL = HALF + [torch.float32]


def silu_mul_chain(a, b):
    return F.silu(a) * b


def bias_silu_chain(x, bias):
    return F.silu(x + bias)


def bias_glu_chain(x, bias=None):
    h, g = (x if bias is None else x + bias).chunk(2, dim=-1)
    return h * F.silu(g)


OPS = {
    "silu_mul": (dt.silu_mul, silu_mul_chain),
    "bias_silu": (dt.bias_silu, bias_silu_chain),
    "bias_glu": (dt.bias_glu, bias_glu_chain),
}


def check(name, args, fused=True):
    op, chain = OPS[name]
    return check_op(name, op, chain, args, fused)


def sprinkle_specials(t):
    """bitwise.sprinkle_specials with a negative subnormal and +-100 (SiLU's saturated ends), 64 copies each."""
    return bitwise.sprinkle_specials(t, (-torch.finfo(t.dtype).tiny / 8, -100.0, 100.0), copies=64)


# ---- silu_mul -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [FLUX2] + ODD, ids=str)
def test_silu_mul_shapes(shape, dtype):
    check("silu_mul", (rand(shape, dtype, 3.0), rand(shape, dtype)))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [FLUX2, (3, 4097, 3840), (2, 7, 77)], ids=str)
def test_silu_mul_packed_projection(shape, dtype):
    # gate_up = proj(x) [.., 2D]; a, b = gate_up.chunk(2, dim=-1): strided views, outer strides 2D
    a, b = rand(shape[:-1] + (2 * shape[-1],), dtype, 3.0).chunk(2, dim=-1)
    assert a.stride()[-2] == 2 * shape[-1]
    check("silu_mul", (a, b))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_silu_mul_nan_inf_denormal(dtype):
    shape = (2, 513, 3072)
    check("silu_mul", (sprinkle_specials(rand(shape, dtype, 3.0)), sprinkle_specials(rand(shape, dtype))))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_silu_mul_large_magnitudes(dtype):
    # exp(-x) overflows for x < -89 in f32: silu -> -0; large positive x: silu(x) = x
    check("silu_mul", (rand((4, 1001, 1024), dtype, 60.0), rand((4, 1001, 1024), dtype)))


def every_value(dtype):
    """[256, 256] holding every bit pattern of a 16-bit dtype once (NaNs, infinities, both zeros included)."""
    return torch.arange(-32768, 32768, dtype=torch.int32, device="cuda").to(torch.int16).view(dtype).reshape(256, 256)


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_silu_every_value(dtype):
    # The kernels divide without IEEE division's range branch and fall back outside a range
    # (cuda/paired_silu.cuh): every value of the dtype as silu_mul's a and bias_glu's g (no bias); bias_silu
    # adds its bias first
    a = every_value(dtype)
    check("silu_mul", (a, rand(a.shape, dtype)))
    check("silu_mul", (a, torch.ones_like(a)))
    check("bias_silu", (a, rand(a.shape[-1:], dtype)))
    check("bias_glu", (torch.cat([rand(a.shape, dtype), a], dim=-1),))
    check("bias_glu", (torch.cat([a, rand(a.shape, dtype)], dim=-1), rand((2 * a.shape[-1],), dtype)))


# ---- bias_silu ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [SANA, FLUX2] + ODD, ids=str)
def test_bias_silu_channels_last(shape, dtype):
    check("bias_silu", (rand(shape, dtype, 3.0), rand(shape[-1:], dtype)))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [(1, 5600, 32, 32), (2, 96, 7, 9), (1, 2240, 1024)], ids=str)
def test_bias_silu_channel_first(shape, dtype):
    # a 1x1 conv's NCHW output plus its bias [C, 1, 1]: one bias value per row of H*W (or W)
    bias = rand((shape[1],) + (1,) * (len(shape) - 2), dtype)
    check("bias_silu", (rand(shape, dtype, 3.0), bias))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_bias_silu_nan_inf_denormal(dtype):
    shape = (2, 513, 2240)
    check("bias_silu", (sprinkle_specials(rand(shape, dtype, 3.0)), sprinkle_specials(rand((2240,), dtype))))


# ---- bias_glu -----------------------------------------------------------------------------------------------


def glu_args(shape, dtype, with_bias=True):
    x = rand(shape[:-1] + (2 * shape[-1],), dtype, 3.0)
    return (x, rand((2 * shape[-1],), dtype)) if with_bias else (x,)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("shape", [SANA] + ODD, ids=str)
def test_bias_glu_shapes(shape, with_bias, dtype):
    check("bias_glu", glu_args(shape, dtype, with_bias))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_bias_glu_nan_inf_denormal(dtype):
    x, bias = glu_args((2, 257, 2240), dtype)
    check("bias_glu", (sprinkle_specials(x), sprinkle_specials(bias)))


def test_bias_glu_strided_rows():
    x = rand((2, 100, 3 * 1120), torch.bfloat16, 3.0)[..., : 2 * 1120]  # rows padded to 3C
    check("bias_glu", (x, rand((2240,), torch.bfloat16)))


# ---- fallbacks, CPU, torch.compile, opcheck -----------------------------------------------------------------


def test_fallback_mixed_dtype():
    a = rand((3, 7, 64), torch.bfloat16)
    ref = check("silu_mul", (a, rand((3, 7, 64), torch.float32)), fused=False)
    assert ref.dtype == torch.float32


def test_fallback_broadcast_b():
    check("silu_mul", (rand((3, 7, 64), torch.bfloat16), rand((3, 1, 64), torch.bfloat16)), fused=False)


def test_fallback_strided_last_dim():
    x = rand((3, 7, 128), torch.bfloat16)[..., ::2]
    check("bias_silu", (x, rand((64,), torch.bfloat16)), fused=False)


def test_bias_glu_rejects_odd_channels():
    with pytest.raises(RuntimeError, match="must be even"):
        dt.bias_glu(rand((2, 3, 7), torch.bfloat16), None)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_cpu_matches_torch_cpu_chain(dtype):
    # torch's CPU silu uses its own exp, so the Gate may disable the fused kernel: any result must be the chain's
    x = rand((2, 33, 1536), dtype, 3.0, device="cpu")
    check("silu_mul", (x, rand((2, 33, 1536), dtype, device="cpu")), fused=None)
    check("bias_silu", (x, rand((1536,), dtype, device="cpu")), fused=None)
    check("bias_glu", (x, rand((1536,), dtype, device="cpu")), fused=None)


def mlp(a, b, x, bias):
    return dt.silu_mul(a, b) + dt.bias_glu(x, bias)


def mlp_chain(a, b, x, bias):
    return silu_mul_chain(a, b) + bias_glu_chain(x, bias)


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph(dynamic):
    torch._dynamo.reset()
    compiled = torch.compile(mlp, fullgraph=True, dynamic=dynamic)
    for shape in [FLUX2, (2, 7, 1536)]:
        args = (rand(shape, torch.bfloat16, 3.0), rand(shape, torch.bfloat16)) + glu_args(shape, torch.bfloat16)
        ref = mlp_chain(*args)
        assert_bitwise(mlp(*args), ref)
        assert_bitwise(compiled(*args), ref)


@pytest.mark.parametrize("name", list(OPS))
def test_opcheck(name):
    op = getattr(torch.ops.dfuse, name).default
    shape = (2, 7, 1536)
    args = {"silu_mul": (rand(shape, torch.bfloat16), rand(shape, torch.bfloat16)),
            "bias_silu": (rand(shape, torch.bfloat16), rand((1536,), torch.bfloat16)),
            "bias_glu": glu_args(shape, torch.bfloat16)}[name]
    torch.library.opcheck(op, args)
    torch.library.opcheck(op, tuple(a.cpu() for a in args))
