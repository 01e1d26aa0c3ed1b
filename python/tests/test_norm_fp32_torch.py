"""torch.ops.dfuse request-gated norm + epilogue ops with fp32 internals against the real PyTorch chains.

norm_scale_shift(x, scale, shift, norm, weight, bias, eps) replaces `norm(x) * (1 + scale) + shift` with norm
F.layer_norm (FLUX.1, Qwen-Image, Wan 2.1: nn.LayerNorm(D, elementwise_affine=False, eps=1e-6)) or F.rms_norm;
rmsnorm_modulate_fp32(x, scale, shift, weight, eps) replaces LTX-2's `self.norm1(x) * (1 + scale_msa) + shift_msa`
(diffusers' RMSNorm module); rmsnorm_tanh_residual_fp32(residual, gate, y, weight, eps) replaces Z-Image's
`x + gate_msa.tanh() * self.attention_norm2(attn_out)` with its storage-dtype RMSNorm. Quality "extra-high"
only: each is checked (1) bit for bit, through integer views, against its definition, the chain run on float
copies and rounded once (Wan's own form for LayerNorm + modulate), and (2) within its stated bound of the lossless
chain: 6u (7u for LTX-2's) times (|n (1 + scale)| + |shift|), 10u (|tanh(gate) n| + |residual|) for the gate, each
plus the absolute term of the chain's roundings below the normal range (eta: half the smallest subnormal).
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import HALF_MIN_SUBNORMAL, UNIT_ROUNDOFF, assert_bitwise, check_op, counters, rand  # noqa: E402

FLUX = (1, 4608, 3072)
QWEN = (1, 4096, 3072)
LTX2 = (2, 4097, 4096)
ODD = [(1, 1, 1536), (1, 7, 2560), (3, 4097, 3840), (3, 7, 5120)]
ALL = [torch.bfloat16, torch.float16, torch.float32]
HALF = [torch.bfloat16, torch.float16]
EPS = 1e-6


def modulate_lossless(x, scale, shift, norm, weight=None, bias=None, eps=EPS):
    d = x.shape[-1]
    n = F.layer_norm(x, (d,), weight, bias, eps) if norm == "layer_norm" else F.rms_norm(x, (d,), weight, eps)
    return n * (1 + scale) + shift, n


def modulate_fp32(x, scale, shift, norm, weight=None, bias=None, eps=EPS):
    """The op's definition: Wan's `(self.norm1(x.float()) * (1 + scale) + shift).type_as(x)`."""
    f = lambda t: None if t is None else t.float()  # noqa: E731
    d = x.shape[-1]
    xf = x.float()
    n = F.layer_norm(xf, (d,), f(weight), f(bias), eps) if norm == "layer_norm" else F.rms_norm(xf, (d,), f(weight), eps)
    return (n * (1 + scale.float()) + shift.float()).type_as(x)


def diffusers_rms_norm(x, weight, eps=EPS):
    """diffusers.models.normalization.RMSNorm.forward (the CUDA path)."""
    input_dtype = x.dtype
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    h = x * torch.rsqrt(variance + eps)
    if weight is not None:
        if weight.dtype in (torch.float16, torch.bfloat16):
            h = h.to(weight.dtype)
        return h * weight
    return h.to(input_dtype)


def storage_rms_norm(x, weight, eps=EPS):
    """Z-Image's RMSNorm: every op in x's dtype."""
    out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return out * weight if weight is not None else out


def ltx2_fp32(x, scale, shift, weight=None, eps=EPS):
    w = None if weight is None else weight.float()
    return (diffusers_rms_norm(x.float(), w, eps) * (1 + scale.float()) + shift.float()).to(x.dtype)


def gate_fp32(residual, gate, y, weight=None, eps=EPS):
    w = None if weight is None else weight.float()
    return (residual.float() + torch.tanh(gate.float()) * storage_rms_norm(y.float(), w, eps)).to(y.dtype)


def modulate_bound(factor, dtype, n, scale, shift, weight=None):
    """factor u (|n (1 + scale)| + |shift|) + 2 eta ((|weight| + 1) |1 + scale| + 2), |weight| 0 without a weight
    (norm_scale_shift's chain rounds its n once: no weight term)."""
    a = (1 + scale.double()).abs()
    w = 0 if weight is None else weight.double().abs()
    return (factor * UNIT_ROUNDOFF[dtype] * ((n.double() * a).abs() + shift.double().abs())
            + 2 * HALF_MIN_SUBNORMAL[dtype] * ((w + 1) * a + 2))


def assert_within(out, ref, bound):
    out, ref = out.double(), ref.double()
    finite = torch.isfinite(ref)
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert torch.equal(out[~finite & ~torch.isnan(ref)], ref[~finite & ~torch.isnan(ref)])
    excess = ((out - ref).abs() - bound)[finite]
    assert excess.numel() == 0 or excess.max().item() <= 0, f"max excess {excess.max().item()}"


def scale_shift(shape, dtype, mode, amplitude=0.5):
    b, s, d = shape
    if mode == "chunk6":
        table = rand((b, 1, 6 * d), dtype, amplitude)
        shift, scale, *_ = table.chunk(6, dim=-1)
        return scale, shift
    param = {"batch": (b, 1, d), "token": shape, "scalar": (), "one": (1,), "row": (b, s, 1)}[mode]
    return rand(param, dtype, amplitude), rand(param, dtype, 0.5)


def affine(d, dtype, weight, bias):
    return (rand((d,), dtype) + 1 if weight else None), (rand((d,), dtype, 0.5) if bias else None)


# ---- norm_scale_shift ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("mode", ["chunk6", "token", "batch", "scalar", "one", "row"])
@pytest.mark.parametrize("shape", [FLUX, QWEN] + ODD, ids=str)
def test_norm_scale_shift_bit_exact_against_fp32_chain(shape, mode, norm, dtype):
    x = rand(shape, dtype, 2.0) + 0.25
    scale, shift = scale_shift(shape, dtype, mode)
    w, b = affine(shape[-1], dtype, norm == "rms_norm", False)
    args = (x, scale, shift, norm, w, b, EPS)
    check_op("norm_scale_shift", dt.norm_scale_shift, modulate_fp32, args)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("norm", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("shape", [FLUX, (3, 4097, 3840), (1, 99, 3070)], ids=str)
def test_norm_scale_shift_within_bound_of_lossless_chain(shape, norm, dtype):
    x = rand(shape, dtype, 2.0)
    scale, shift = scale_shift(shape, dtype, "token", amplitude=32.0)  # large scales
    w, b = affine(shape[-1], dtype, True, norm == "layer_norm")
    out = dt.norm_scale_shift(x, scale, shift, norm, w, b, EPS)
    ref, n = modulate_lossless(x, scale, shift, norm, w, b)
    bound = modulate_bound(6, dtype, n, scale, shift)
    assert_within(out, ref, bound)
    assert not torch.equal(out, ref) or dtype == torch.float32  # not the lossless chain


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("weight,bias", [(True, True), (True, False), (False, True)], ids=["affine", "weight", "bias"])
@pytest.mark.parametrize("shape", [FLUX, (3, 7, 5120), (1, 99, 3070), (2, 33, 8192)], ids=str)
def test_norm_scale_shift_layer_norm_affine_bit_exact(shape, weight, bias, dtype):
    """LayerNorm with its own affine: rows up to 6144 elements in registers, 8192 staged, 3070 the generic path."""
    x = rand(shape, dtype, 2.0) + 0.25
    scale, shift = scale_shift(shape, dtype, "chunk6")
    w, b = affine(shape[-1], dtype, weight, bias)
    check_op("norm_scale_shift", dt.norm_scale_shift, modulate_fp32, (x, scale, shift, "layer_norm", w, b, EPS))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_norm_scale_shift_misaligned_scale_shift(dtype):
    """scale and shift as views one element into each row of their storage (2-byte aligned rows): read element
    by element beside x's 4-element chunks."""
    shape = (2, 333, 3072)
    x = rand(shape, dtype, 2.0)
    scale = rand((2, 333, 3073), dtype, 0.5)[..., 1:]
    shift = rand((2, 333, 3073), dtype, 0.5)[..., 1:]
    check_op("norm_scale_shift", dt.norm_scale_shift, modulate_fp32, (x, scale, shift, "layer_norm", None, None, EPS))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_norm_scale_shift_per_frame(dtype):
    """Wan: x [B, F, HW, D], scale/shift [B, F, 1, D]."""
    x = rand((1, 21, 360, 1536), dtype)
    scale, shift = rand((1, 21, 1, 1536), dtype, 0.5), rand((1, 21, 1, 1536), dtype)
    check_op("norm_scale_shift", dt.norm_scale_shift, modulate_fp32, (x, scale, shift, "layer_norm", None, None, EPS))


def test_norm_scale_shift_strided_x_with_nan_inf():
    x = rand((2, 4097, 2 * 3072), torch.bfloat16)[..., :3072]  # non-contiguous rows
    x[0, 5, 7], x[1, 9, 0], x[0, 100, 3] = float("nan"), float("inf"), -float("inf")
    scale, shift = scale_shift((2, 4097, 3072), torch.bfloat16, "chunk6")
    check_op("norm_scale_shift", dt.norm_scale_shift, modulate_fp32, (x, scale, shift, "layer_norm", None, None, EPS))


def test_norm_scale_shift_wan_fp32_modulation_runs_its_definition():
    """Wan hands fp32 scale/shift to a bf16 x: the kernel does not take mixed dtypes, the op returns Wan's chain."""
    x = rand((1, 7560, 5120), torch.bfloat16)
    scale, shift = rand((1, 1, 5120), torch.float32, 0.5), rand((1, 1, 5120), torch.float32)
    before = counters("norm_scale_shift")
    out = dt.norm_scale_shift(x, scale, shift, "layer_norm", None, None, EPS)
    assert_bitwise(out, modulate_fp32(x, scale, shift, "layer_norm"))
    assert counters("norm_scale_shift").fused == before.fused


def test_norm_scale_shift_guard_errors():
    x = rand((2, 8, 64), torch.bfloat16)
    s = rand((2, 1, 64), torch.bfloat16)
    with pytest.raises(RuntimeError, match="layer_norm.*rms_norm"):
        dt.norm_scale_shift(x, s, s, "group_norm", None, None, EPS)
    with pytest.raises(RuntimeError, match="rms_norm has no bias"):
        dt.norm_scale_shift(x, s, s, "rms_norm", None, rand((64,), torch.bfloat16), EPS)


def test_norm_scale_shift_fake_impl():
    x = torch.empty((2, 8, 64), device="meta", dtype=torch.bfloat16)
    s = torch.empty((2, 1, 64), device="meta", dtype=torch.bfloat16)
    out = dt.norm_scale_shift(x, s, s, "layer_norm", None, None, EPS)
    assert out.shape == x.shape and out.dtype == x.dtype


# ---- rmsnorm_modulate_fp32 (LTX-2) ------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("mode", ["chunk6", "token"])
@pytest.mark.parametrize("weight", [True, False])
@pytest.mark.parametrize("shape", [LTX2, (1, 1, 4096), (3, 7, 2048)], ids=str)
def test_ltx2_bit_exact_against_fp32_chain(shape, weight, mode, dtype):
    x = rand(shape, dtype, 2.0)
    scale, shift = scale_shift(shape, dtype, mode)
    w, _ = affine(shape[-1], dtype, weight, False)
    check_op("rmsnorm_modulate_fp32", dt.rmsnorm_modulate_fp32, ltx2_fp32, (x, scale, shift, w, EPS))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_ltx2_within_bound_of_lossless_chain(dtype):
    x = rand(LTX2, dtype, 2.0)
    scale, shift = scale_shift(LTX2, dtype, "token", amplitude=32.0)
    w, _ = affine(LTX2[-1], dtype, True, False)
    out = dt.rmsnorm_modulate_fp32(x, scale, shift, w, EPS)
    n = diffusers_rms_norm(x, w)
    ref = n * (1 + scale) + shift  # transformer_ltx2: self.norm1(hidden_states) * (1 + scale_msa) + shift_msa
    bound = modulate_bound(7, dtype, n, scale, shift, w)
    assert_within(out, ref, bound)
    assert not torch.equal(out, ref) or dtype == torch.float32


# ---- rmsnorm_tanh_residual_fp32 ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("mode", ["chunk6", "batch", "token", "row"])
@pytest.mark.parametrize("shape", [(1, 4128, 3840), (2, 4097, 2560), (3, 1, 1536)], ids=str)
def test_gate_rmsnorm_bit_exact_against_fp32_chain(shape, mode, dtype):
    y, residual = rand(shape, dtype, 2.0), rand(shape, dtype, 2.0)
    gate, _ = scale_shift(shape, dtype, mode, amplitude=2.0)
    w, _ = affine(shape[-1], dtype, True, False)
    check_op("rmsnorm_tanh_residual_fp32", dt.rmsnorm_tanh_residual_fp32, gate_fp32, (residual, gate, y, w, EPS))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_gate_rmsnorm_within_bound_of_lossless_chain(dtype):
    shape = (1, 4128, 3840)  # Z-Image
    y, residual = rand(shape, dtype, 2.0), rand(shape, dtype, 2.0)
    gate = rand((1, 1, 3840), dtype, 2.0)
    w, _ = affine(3840, dtype, True, False)
    out = dt.rmsnorm_tanh_residual_fp32(residual, gate, y, w, EPS)
    n = storage_rms_norm(y, w)
    ref = residual + gate.tanh() * n  # transformer_z_image: x + gate_msa * self.attention_norm2(attn_out)
    t, m = torch.tanh(gate.double()).abs(), y.double().pow(2).mean(-1, keepdim=True)
    eta = HALF_MIN_SUBNORMAL[dtype]
    assert bool((m + EPS >= 16 * eta).all())  # no row outside the contract by underflow
    tn = t * n.double().abs()
    bound = (10 * UNIT_ROUNDOFF[dtype] * (tn + residual.double().abs())
             + eta * (3 * tn / (m + EPS) + 2 * t * (w.double().abs() + 1) + 2 * n.double().abs() + 4))
    assert_within(out, ref, bound)
    if dtype == torch.float32:
        assert_bitwise(out, ref)  # in f32 the chain is the fp32 chain
    else:
        assert not torch.equal(out, ref)


def test_gate_rmsnorm_strided_y_with_nan():
    base = rand((2, 300, 2 * 2560), torch.bfloat16)
    y = base[..., :2560]  # strided rows
    y[0, 3, 4] = float("nan")
    residual, gate = rand((2, 300, 2560), torch.bfloat16), rand((2, 1, 2560), torch.bfloat16)
    check_op("rmsnorm_tanh_residual_fp32", dt.rmsnorm_tanh_residual_fp32, gate_fp32, (residual, gate, y, None, EPS))
