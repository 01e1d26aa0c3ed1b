"""torch.ops.dfuse adaLN value ops against the real PyTorch eager chains they replace.

temb_table_slices, ltx2_ada_values and scaled_residual_bf16 are bit-exact: every output is compared as
integers (so -0/+0 and NaN bits count) with the chain written as the model code writes it, and the op must
run fused on both calls (the Gate's first sight, then the verified kernel) with no fallback. The two
multi-output ops return dense slices where the chain returns strided views: values, shapes and dtypes must
match, and each slice must be contiguous.

timestep_embedding has a close contract: |out - torch| <= 2^-20 * max(1, |scale * t|) against diffusers'
get_timestep_embedding in fp32 (the test prints whether CUDA happened to match bit for bit).
"""

import math

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import assert_bitwise, counters, poison_allocator, rand  # noqa: E402

HALF = [torch.bfloat16, torch.float16]
ALL = HALF + [torch.float32]


def check_parts(name, op, chain, args):
    """Op vs chain, every part bitwise and contiguous, twice, fused both times."""
    ref = chain(*args)
    before = counters(name)
    for _ in range(2):
        poison_allocator(sum(r.numel() * r.element_size() for r in ref), ref[0].device)
        out = op(*args)
        assert len(out) == len(ref)
        for o, r in zip(out, ref):
            assert_bitwise(o, r)
    after = counters(name)
    assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()


# ---- temb_table_slices (Wan) ---------------------------------------------------------------------------


def wan21_chain(scale_shift_table, temb):
    # diffusers WanTransformerBlock, temb [B, 6, D]
    return (scale_shift_table + temb.float()).chunk(6, dim=1)


def wan22_per_token_chain(scale_shift_table, temb):
    # diffusers WanTransformerBlock, temb [B, S, 6, D] (Wan 2.2 TI2V)
    return (scale_shift_table.unsqueeze(0) + temb.float()).chunk(6, dim=2)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("b,d", [(1, 5120), (2, 1536), (1, 3072), (3, 77)])
def test_temb_table_slices_wan21(b, d, dtype):
    table = torch.randn(1, 6, d, device="cuda") / d**0.5
    temb = rand((b, 6 * d), dtype).unflatten(1, (6, -1))
    check_parts("temb_table_slices", dt.temb_table_slices, wan21_chain, (table, temb))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
@pytest.mark.parametrize("b,s,d", [(1, 27280, 3072), (1, 4680, 3072), (2, 33, 1536), (1, 7, 40)])
def test_temb_table_slices_wan22_per_token(b, s, d, dtype):
    table = torch.randn(1, 6, d, device="cuda") / d**0.5
    temb = rand((b, s, 6 * d), dtype).unflatten(2, (6, -1))
    # The model holds the table as [1, 6, D] and unsqueezes it; the op takes the unsqueezed view.
    check_parts("temb_table_slices", lambda t, e: dt.temb_table_slices(t.unsqueeze(0), e), wan22_per_token_chain,
                (table, temb))


def test_temb_table_slices_specials():
    d = 1536
    table = torch.randn(1, 6, d, device="cuda")
    temb = rand((2, 6, d), torch.bfloat16)
    temb.view(-1)[::97] = float("nan")
    temb.view(-1)[5::101] = float("inf")
    temb.view(-1)[7::103] = -0.0
    check_parts("temb_table_slices", dt.temb_table_slices, wan21_chain, (table, temb))


# ---- ltx2_ada_values (LTX-2) ---------------------------------------------------------------------------


def ltx2_chain(scale_shift_table, timestep):
    # ltx_core BasicAVTransformerBlock.get_ada_values with indices = slice(None)
    batch_size = timestep.shape[0]
    num_ada_params = scale_shift_table.shape[0]
    indices = slice(None)
    return (
        scale_shift_table[indices].unsqueeze(0).unsqueeze(0).to(device=timestep.device, dtype=timestep.dtype)
        + timestep.reshape(batch_size, timestep.shape[1], num_ada_params, -1)[:, :, indices, :]
    ).unbind(dim=2)


@pytest.mark.parametrize("table_dtype", ALL, ids=str)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("b,t,n,d", [(2, 1, 9, 4096), (1, 6144, 9, 4096), (1, 1001, 9, 2048), (2, 37, 6, 77)])
def test_ltx2_ada_values(b, t, n, d, dtype, table_dtype):
    table = (torch.randn(n, d, device="cuda") / d**0.5).to(table_dtype)
    timestep = rand((b, t, n * d), dtype)
    check_parts("ltx2_ada_values", dt.ltx2_ada_values, ltx2_chain, (table, timestep))


# ---- scaled_residual_bf16 (LingBot World) --------------------------------------------------------------


def scaled_residual_chain(x, y, gate):
    # Wan-style block residual: bf16 hidden states, fp32 per-frame gate, cast back
    return (x.float() + y * gate).type_as(x)


def check_scaled_residual(x, y, gate):
    ref = scaled_residual_chain(x, y, gate)
    assert torch.equal(ref.view(torch.int16), (x + y * gate).to(torch.bfloat16).view(torch.int16))
    before = counters("scaled_residual_bf16")
    for _ in range(2):
        poison_allocator(ref.numel() * ref.element_size())
        assert_bitwise(dt.scaled_residual_bf16(x, y, gate), ref)
    after = counters("scaled_residual_bf16")
    assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()


@pytest.mark.parametrize("shape", [(1, 21, 1560, 5120), (1, 21, 360, 5120), (2, 3, 91, 3072), (1, 2, 5, 77)],
                         ids=str)
def test_scaled_residual_per_frame(shape):
    b, f, _, d = shape
    x = rand(shape, torch.bfloat16, 3.0)
    y = rand(shape, torch.bfloat16)
    gate = torch.randn(b, f, 1, d, device="cuda")
    check_scaled_residual(x, y, gate)


def test_scaled_residual_chunked_modulation():
    b, f, hw, d = 1, 21, 360, 5120
    modulation = torch.randn(1, 1, 6, d, device="cuda")
    e = torch.randn(b, f, 6, d, device="cuda")
    gate = (modulation + e).chunk(6, dim=2)[2]  # [B, F, 1, D], strides [6FD, 6D, D, 1]
    x = rand((b, f, hw, d), torch.bfloat16)
    check_scaled_residual(x, rand((b, f, hw, d), torch.bfloat16), gate)


@pytest.mark.parametrize("gate_shape", ["batch", "token", "row"])
def test_scaled_residual_other_gates(gate_shape):
    b, s, d = 2, 4097, 3072
    x = rand((b, s, d), torch.bfloat16)
    gate = torch.randn({"batch": (b, 1, d), "token": (b, s, d), "row": (b, s, 1)}[gate_shape], device="cuda")
    check_scaled_residual(x, rand((b, s, d), torch.bfloat16), gate)


def test_scaled_residual_specials():
    x = rand((1, 3, 64, 1536), torch.bfloat16)
    y = rand((1, 3, 64, 1536), torch.bfloat16)
    x.view(-1)[::97] = float("nan")
    y.view(-1)[3::89] = float("inf")
    x.view(-1)[5::83] = -0.0
    check_scaled_residual(x, y, torch.randn(1, 3, 1, 1536, device="cuda"))


# ---- timestep_embedding ------------------------------------------------------------------------------


def get_timestep_embedding(timesteps, embedding_dim, flip_sin_to_cos=False, downscale_freq_shift=1, scale=1,
                           max_period=10000):
    # diffusers.models.embeddings.get_timestep_embedding
    assert len(timesteps.shape) == 1, "Timesteps should be a 1d-array"
    half_dim = embedding_dim // 2
    exponent = -math.log(max_period) * torch.arange(start=0, end=half_dim, dtype=torch.float32,
                                                    device=timesteps.device)
    exponent = exponent / (half_dim - downscale_freq_shift)
    emb = torch.exp(exponent)
    emb = timesteps[:, None].float() * emb[None, :]
    emb = scale * emb
    emb = torch.cat([torch.sin(emb), torch.cos(emb)], dim=-1)
    if flip_sin_to_cos:
        emb = torch.cat([emb[:, half_dim:], emb[:, :half_dim]], dim=-1)
    if embedding_dim % 2 == 1:
        emb = torch.nn.functional.pad(emb, (0, 1, 0, 0))
    return emb


TIMESTEP_CONFIGS = [
    # (embedding_dim, flip_sin_to_cos, downscale_freq_shift, scale)
    (256, True, 0, 1),  # FLUX, Wan, LTX Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0)
    (320, False, 1, 1),  # SD defaults
    (129, True, 0, 1),  # odd: padded column
    (64, False, 0, 1000),  # scaled fractional timesteps
]


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("config", TIMESTEP_CONFIGS, ids=str)
def test_timestep_embedding(config, dtype, device):
    dim, flip, shift, scale = config
    if dtype == torch.int64:
        t = torch.randint(0, 1000, (4096,), device=device)
    elif scale != 1:
        t = torch.rand(4096, device=device).to(dtype)
    else:
        t = (torch.rand(4096, device=device) * 1000).to(dtype)
    ref = get_timestep_embedding(t, dim, flip, shift, scale)
    out = dt.timestep_embedding(t, dim, flip, float(shift), float(scale))
    assert out.dtype == ref.dtype and out.shape == ref.shape and out.is_contiguous()
    allowed = torch.clamp((scale * t.float()).abs(), min=1.0)[:, None] * 2.0**-20
    err = (out - ref).abs()
    assert bool((err <= allowed).all()), f"max error {err.max().item()} beyond the bound"
    same = torch.equal(out.view(torch.int32), ref.view(torch.int32))
    print(f"timestep_embedding {device} {config} {dtype}: max |err| {err.max().item():.3g}, bitwise equal: {same}")


def test_meta_shapes():
    table = torch.empty(1, 6, 3072, device="meta")
    parts = dt.temb_table_slices(table, torch.empty(2, 6, 3072, device="meta", dtype=torch.bfloat16))
    assert len(parts) == 6 and all(p.shape == (2, 1, 3072) and p.dtype == torch.float32 for p in parts)
    parts = dt.ltx2_ada_values(torch.empty(9, 64, device="meta"), torch.empty(2, 5, 576, device="meta",
                                                                               dtype=torch.bfloat16))
    assert len(parts) == 9 and all(p.shape == (2, 5, 64) and p.dtype == torch.bfloat16 for p in parts)
    out = dt.scaled_residual_bf16(torch.empty(1, 3, 4, 8, device="meta", dtype=torch.bfloat16),
                                  torch.empty(1, 3, 4, 8, device="meta", dtype=torch.bfloat16),
                                  torch.empty(1, 3, 1, 8, device="meta"))
    assert out.shape == (1, 3, 4, 8) and out.dtype == torch.bfloat16
    assert dt.timestep_embedding(torch.empty(7, device="meta"), 256).shape == (7, 256)
