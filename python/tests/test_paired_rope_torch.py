"""torch.ops.dfuse paired Q/K RoPE ops (LTX-2, LTX-2.5, Helios) against the real PyTorch eager chains they replace,
bit for bit.

    ltx2_qknorm_split_rope(q, k, q_weight, k_weight, eps, q_cos, q_sin, k_cos, k_sin)
        LTX-2's LTX2AudioVideoAttnProcessor (diffusers 0.42.1, rope_type="split"): norm_q / norm_k
        (torch.nn.RMSNorm over heads * head_dim), then apply_split_rotary_emb on each
    ltx25_decoder_rope(q, k, cos_t, sin_t, cos_h, sin_h, cos_w, sin_w)
        the LTX-2.5 diffusion decoder's LTX2VideoVaeRotaryPosEmbed3D on q and k, with the per-axis cos/sin that the
        module computes on every call computed once; checked against the module itself where diffusers is installed
    helios_qk_rope(q, k, freqs)
        Helios' apply_rotary_emb_transposed on query and key (HeliosAttnProcessor), written back into q and k

The chain below is written the way transformer_ltx2.py writes it; where diffusers is installed it is also checked
against diffusers' own apply_split_rotary_emb. Tables are built as LTX2AudioVideoRotaryPosEmbed builds them for
rope_type="split" (cos/sin of fp32 freqs, reshaped to [B, S, H, D/2] and swapaxes(1, 2): a strided view).
Outputs are compared as integers, so -0/+0 and NaN bits count. Where the fused kernel is expected to run, each case
calls the op twice (the Gate's first sight, then the verified kernel alone) and the op counters must show two fused
calls and no new fallback.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402

import dfuse.torch as dt  # noqa: E402
import bitwise  # noqa: E402
from bitwise import assert_bitwise, bits, counters, poison_allocator, rand  # noqa: E402
from rope_chains import apply_rotary_emb_transposed, decoder_chain, decoder_tables, split_rotary  # noqa: E402

ALL = [torch.bfloat16, torch.float16, torch.float32]
EPS = 1e-6

# (batch, q tokens, k tokens or None (self-attention, q's tables), heads, head_dim)
MODEL_SHAPES = {
    "ltx2_video_self": (1, 6144, None, 32, 128),
    "ltx2_video_self_b2": (2, 4096, None, 32, 128),
    "ltx2_audio_to_video": (1, 6144, 126, 32, 64),
}
ODD_SHAPES = {
    "heads1_tokens1": (1, 1, None, 1, 128),
    "heads3_tokens7": (3, 7, None, 3, 128),
    "heads30_tokens4097": (1, 4097, None, 30, 128),
    "cross_tokens7_to_4097": (1, 7, 4097, 3, 64),
    "head_dim_10": (2, 9, None, 3, 10),
}


def chain(q, k, q_norm, k_norm, q_freqs, k_freqs):
    """The processor's lines: query = attn.norm_q(query) ... apply_split_rotary_emb(key, key_rotary_emb or q's)."""
    query = q_norm(q)
    key = k_norm(k)
    query = split_rotary(query, q_freqs)
    key = split_rotary(key, k_freqs if k_freqs is not None else q_freqs)
    return query, key


def split_tables(b, s, h, d, device="cuda"):
    """cos/sin as LTX2AudioVideoRotaryPosEmbed returns them for rope_type="split": fp32 [B, H, S, D/2] views."""
    freqs = torch.rand((b, s, h * (d // 2)), device=device, dtype=torch.float32) * 6.0 - 3.0
    cos = freqs.cos().reshape(b, s, h, -1).swapaxes(1, 2)
    sin = freqs.sin().reshape(b, s, h, -1).swapaxes(1, 2)
    return cos, sin


def norm(dim, dtype, affine=True):
    m = torch.nn.RMSNorm(dim, eps=EPS, elementwise_affine=affine).to(device="cuda", dtype=dtype)
    if affine:
        with torch.no_grad():
            m.weight.copy_(rand((dim,), dtype, 0.5) + 1.0)
    return m


def sprinkle_specials(t):
    return bitwise.sprinkle_specials(t, (60000.0,))


def check(b, s, ks, h, d, dtype, fused=True, affine=True, specials=False, packed=False):
    c = h * d
    if packed:  # q, k, v slices of one projection output [B, S, 3C]
        qkv = rand((b, s, 3 * c), dtype, 3.0)
        q, k = qkv[..., :c], qkv[..., c : 2 * c]
    else:
        q = rand((b, s, c), dtype, 3.0)
        k = rand((b, ks or s, c), dtype, 3.0)
    if specials:
        sprinkle_specials(q)
        sprinkle_specials(k)
    q_norm, k_norm = norm(c, dtype, affine), norm(c, dtype, affine)
    q_freqs = split_tables(b, s, h, d)
    k_freqs = split_tables(b, ks, h, d) if ks else None
    with torch.no_grad():
        ref_q, ref_k = chain(q, k, q_norm, k_norm, q_freqs, k_freqs)
    weights = (q_norm.weight, k_norm.weight) if affine else (None, None)
    k_tables = k_freqs if k_freqs is not None else (None, None)
    q_before, k_before = q.clone(), k.clone()
    before = counters("ltx2_qknorm_split_rope")
    with torch.no_grad():
        for _ in range(2):
            poison_allocator(ref_q.numel() * ref_q.element_size())
            out_q, out_k = dt.ltx2_qknorm_split_rope(q, k, weights[0], weights[1], EPS, *q_freqs, *k_tables)
            assert_bitwise(out_q, ref_q)
            assert_bitwise(out_k, ref_k)
    assert torch.equal(bits(q), bits(q_before)) and torch.equal(bits(k), bits(k_before))  # inputs intact
    after = counters("ltx2_qknorm_split_rope")
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    elif fused is False:
        assert after.fused == before.fused, dt.gate_report()


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", MODEL_SHAPES.values(), ids=MODEL_SHAPES.keys())
def test_model_shapes(shape, dtype):
    check(*shape, dtype)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", ODD_SHAPES.values(), ids=ODD_SHAPES.keys())
def test_odd_shapes(shape, dtype):
    check(*shape, dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_specials(dtype):
    check(1, 257, None, 4, 128, dtype, specials=True)


@pytest.mark.parametrize("dtype", ALL)
def test_packed_projection_views(dtype):
    check(2, 33, None, 4, 128, dtype, packed=True)


def test_without_norm_weight():
    check(1, 65, None, 4, 64, torch.bfloat16, affine=False)


def test_generic_rms_norm_path():
    # C = 3 * 2 = 6: F.rms_norm takes aten's generic (Welford) path, which the kernel reproduces too
    check(1, 9, None, 3, 2, torch.bfloat16)


def test_chain_is_diffusers():
    transformer_ltx2 = pytest.importorskip("diffusers.models.transformers.transformer_ltx2")
    x = rand((2, 17, 4 * 64), torch.bfloat16, 3.0)
    freqs = split_tables(2, 17, 4, 64)
    assert_bitwise(split_rotary(x, freqs), transformer_ltx2.apply_split_rotary_emb(x, freqs))


def test_mismatched_tables_take_the_chain():
    # tables whose head count does not divide C: the kernel refuses, the op returns torch's result (an error here)
    q = rand((1, 8, 256), torch.bfloat16)
    cos, sin = split_tables(1, 8, 3, 64)
    with pytest.raises(RuntimeError):
        dt.ltx2_qknorm_split_rope(q, q, None, None, EPS, cos, sin)


def test_cpu_takes_the_chain():
    q = rand((1, 5, 128), torch.float32, device="cpu")
    k = rand((1, 5, 128), torch.float32, device="cpu")
    cos, sin = split_tables(1, 5, 2, 64, device="cpu")
    qn = torch.nn.RMSNorm(128, eps=EPS)
    with torch.no_grad():
        ref_q, ref_k = chain(q, k, qn, qn, (cos, sin), None)
        out_q, out_k = dt.ltx2_qknorm_split_rope(q, k, qn.weight, qn.weight, EPS, cos, sin)
    assert_bitwise(out_q, ref_q)
    assert_bitwise(out_k, ref_k)


def test_fake_tensor_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty((2, 7, 256), dtype=torch.bfloat16, device="cuda")
        k = torch.empty((2, 5, 256), dtype=torch.bfloat16, device="cuda")
        qc = torch.empty((2, 4, 7, 32), dtype=torch.float32, device="cuda")
        kc = torch.empty((2, 4, 5, 32), dtype=torch.float32, device="cuda")
        out_q, out_k = dt.ltx2_qknorm_split_rope(q, k, None, None, EPS, qc, qc, kc, kc)
    assert out_q.shape == (2, 7, 256) and out_k.shape == (2, 5, 256)
    assert out_q.dtype == torch.bfloat16


# ---- ltx25_decoder_rope ---------------------------------------------------------------------------------------

# (batch, frames, height, width, heads, head_dim)
DECODER_SHAPES = {
    "decoder_16x32x48": (1, 16, 32, 48, 8, 64),
    "decoder_8x64x96_head128": (1, 8, 64, 96, 4, 128),
    "heads1_tokens4097": (1, 17, 1, 241, 1, 64),
    "heads3_tokens7": (1, 7, 1, 1, 3, 64),
    "heads30": (2, 3, 5, 7, 30, 64),
    "head_dim_40": (1, 3, 4, 5, 2, 40),
}


def check_decoder(b, t, h, w, heads, d, dtype, fused=True, specials=False, packed=False):
    if packed:  # q, k, v of one projection, viewed (B, T, H, W, heads, D) as project_qkv does per tensor
        qkv = rand((b, t, h, w, 3 * heads * d), dtype, 3.0)
        q = qkv[..., : heads * d].unflatten(-1, (heads, d))
        k = qkv[..., heads * d : 2 * heads * d].unflatten(-1, (heads, d))
    else:
        q = rand((b, t, h, w, heads, d), dtype, 3.0)
        k = rand((b, t, h, w, heads, d), dtype, 3.0)
    if specials:
        sprinkle_specials(q)
        sprinkle_specials(k)
    tables = decoder_tables(t, h, w, d)
    ref_q, ref_k = decoder_chain(q, tables), decoder_chain(k, tables)
    before = counters("ltx25_decoder_rope")
    for _ in range(2):
        poison_allocator(ref_q.numel() * ref_q.element_size())
        out_q, out_k = dt.ltx25_decoder_rope(q, k, *tables)
        assert_bitwise(out_q, ref_q)
        assert_bitwise(out_k, ref_k)
    after = counters("ltx25_decoder_rope")
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    elif fused is False:
        assert after.fused == before.fused, dt.gate_report()


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", DECODER_SHAPES.values(), ids=DECODER_SHAPES.keys())
def test_decoder_shapes(shape, dtype):
    check_decoder(*shape, dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_decoder_specials(dtype):
    check_decoder(1, 4, 6, 8, 4, 64, dtype, specials=True)


@pytest.mark.parametrize("dtype", ALL)
def test_decoder_packed_projection_views(dtype):
    check_decoder(1, 3, 4, 5, 4, 64, dtype, packed=True)


def test_decoder_chain_is_diffusers():
    decoder = pytest.importorskip("diffusers.models.autoencoders.ltx2_diffusion_decoder")
    rope = decoder.LTX2VideoVaeRotaryPosEmbed3D(64)
    x = rand((1, 3, 4, 5, 2, 64), torch.bfloat16, 3.0)
    assert_bitwise(decoder_chain(x, decoder_tables(3, 4, 5, 64)), rope(x))
    out_q, out_k = dt.ltx25_decoder_rope(x, x.clone(), *decoder_tables(3, 4, 5, 64))
    assert_bitwise(out_q, rope(x))


def test_decoder_mismatched_tables_take_the_chain():
    # tables of another grid: the kernel refuses, the op returns torch's result (an error here)
    q = rand((1, 3, 4, 5, 2, 64), torch.bfloat16)
    with pytest.raises(RuntimeError):
        dt.ltx25_decoder_rope(q, q, *decoder_tables(3, 4, 6, 64))


def test_decoder_fake_tensor_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty((1, 3, 4, 5, 2, 64), dtype=torch.bfloat16, device="cuda")
        tabs = [torch.empty((n, p), dtype=torch.float32, device="cuda") for n, p in ((3, 8), (3, 8), (4, 12), (4, 12),
                                                                                     (5, 12), (5, 12))]
        out_q, out_k = dt.ltx25_decoder_rope(q, q, *tabs)
    assert out_q.shape == q.shape and out_k.dtype == torch.bfloat16


# ---- helios_qk_rope -------------------------------------------------------------------------------------------

# (batch, tokens, heads, head_dim)
HELIOS_SHAPES = {
    "helios": (1, 8190, 40, 128),
    "heads1_tokens1": (1, 1, 1, 128),
    "heads3_tokens7": (3, 7, 3, 128),
    "heads30_tokens4097": (1, 4097, 30, 128),
}


def helios_table(b, s, d, transposed=False, device="cuda"):
    """A [B, S, 2D] cos|sin table with each frequency repeated twice, as HeliosRotaryPosEmbed builds it; the model
    hands the blocks rotary_emb.contiguous(), `transposed` keeps the [B, 2D, S] layout before it."""
    freqs = (torch.rand((b, d // 2, s), device=device) * 50.0).repeat_interleave(2, dim=1)
    table = torch.cat([freqs.cos(), freqs.sin()], dim=1)  # [B, 2D, S]
    view = table.transpose(1, 2)
    return view if transposed else view.contiguous()


def check_helios(b, s, h, d, dtype, fused=True, specials=False, packed=False, transposed=False):
    if packed:
        qkv = rand((b, s, 3 * h * d), dtype, 3.0)
        q_src = qkv[..., : h * d].unflatten(2, (h, -1))
        k_src = qkv[..., h * d : 2 * h * d].unflatten(2, (h, -1))
    else:
        q_src, k_src = rand((b, s, h, d), dtype, 3.0), rand((b, s, h, d), dtype, 3.0)
    if specials:
        sprinkle_specials(q_src)
        sprinkle_specials(k_src)
    freqs = helios_table(b, s, d, transposed)
    ref_q, ref_k = apply_rotary_emb_transposed(q_src, freqs), apply_rotary_emb_transposed(k_src, freqs)
    before = counters("helios_qk_rope")
    for _ in range(2):
        q, k = q_src.clone(), k_src.clone()
        dt.helios_qk_rope(q, k, freqs)
        assert_bitwise(q.contiguous(), ref_q)
        assert_bitwise(k.contiguous(), ref_k)
    after = counters("helios_qk_rope")
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    elif fused is False:
        assert after.fused == before.fused, dt.gate_report()


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", HELIOS_SHAPES.values(), ids=HELIOS_SHAPES.keys())
def test_helios_shapes(shape, dtype):
    check_helios(*shape, dtype)


@pytest.mark.parametrize("dtype", ALL)
def test_helios_specials(dtype):
    check_helios(1, 257, 4, 128, dtype, specials=True)


@pytest.mark.parametrize("dtype", ALL)
def test_helios_transposed_table(dtype):
    check_helios(2, 65, 4, 128, dtype, transposed=True)


def test_helios_packed_projection_in_place():
    b, s, h, d = 1, 33, 4, 128
    qkv = rand((b, s, 3 * h * d), torch.bfloat16, 3.0)
    freqs = helios_table(b, s, d)
    q, k, v = (t.unflatten(2, (h, -1)) for t in qkv.split(h * d, dim=2))
    ref_q, ref_k = apply_rotary_emb_transposed(q, freqs), apply_rotary_emb_transposed(k, freqs)
    v_before = v.clone()
    dt.helios_qk_rope(q, k, freqs)
    assert_bitwise(q.contiguous(), ref_q)
    assert_bitwise(k.contiguous(), ref_k)
    assert torch.equal(bits(v), bits(v_before))  # the packed v is untouched


def test_helios_chain_is_diffusers():
    helios = pytest.importorskip("diffusers.models.transformers.transformer_helios")
    x = rand((2, 17, 3, 64), torch.bfloat16, 3.0)
    freqs = helios_table(2, 17, 64)
    assert_bitwise(apply_rotary_emb_transposed(x, freqs), helios.apply_rotary_emb_transposed(x, freqs))


def test_helios_bad_table_takes_the_chain():
    q, k = rand((1, 8, 2, 64), torch.bfloat16), rand((1, 8, 2, 64), torch.bfloat16)
    with pytest.raises(RuntimeError):
        dt.helios_qk_rope(q, k, torch.rand((1, 8, 64), device="cuda"))  # D wide, not 2D: torch's own error
