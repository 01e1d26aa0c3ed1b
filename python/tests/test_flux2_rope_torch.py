"""torch.ops.dfuse FLUX.2 QK-norm + RoPE ops against the real PyTorch eager chains they replace, bit for bit.

    flux2_strided_qknorm_rope(query, key, q_weight, k_weight, eps, cos, sin)
        Flux2ParallelSelfAttnProcessor (single-stream block, diffusers 0.42): the packed to_qkv_mlp_proj output
        split into qkv and mlp, qkv.chunk(3, -1), unflatten to heads, norm_q / norm_k (torch.nn.RMSNorm), then
        apply_rotary_emb(x, (cos, sin), sequence_dim=1) on query and key.
    flux2_qkv_epilogue(query, key, value, encoder_query, encoder_key, encoder_value, weights..., eps, cos, sin)
        Flux2AttnProcessor (double-stream block) after the projections: norm_q / norm_k on the image heads,
        norm_added_q / norm_added_k on the text heads, torch.cat([text, image], dim=1) for q, k, v, then
        apply_rotary_emb on the joint q and k.

The chains below are written the way diffusers writes them. Outputs are compared as integers, so -0/+0 and NaN
bits count. Where the fused kernel is expected to run, each case calls the op twice (the Gate's first sight,
then the verified kernel alone) and the op counters must show two fused calls and no new fallback. The CUDA
tests skip without a GPU (an error under DFUSE_REQUIRE_CUDA=1); the CPU tests (the ATen chain) always run.
"""

import pytest
import torch
import torch.nn.functional as F
from conftest import require_cuda

import dfuse.torch as dt
from bitwise import assert_bitwise, bits, counters, poison_allocator, rand, sprinkle_specials

ALL = [torch.bfloat16, torch.float16, torch.float32]
EPS = 1e-6


@pytest.fixture
def cuda():
    require_cuda()
    return "cuda"


# ---- the chains, as diffusers writes them -------------------------------------------------------------------


def apply_rotary_emb(x, freqs_cis, sequence_dim=1):
    """diffusers.models.embeddings.apply_rotary_emb(x, freqs_cis, use_real=True, use_real_unbind_dim=-1)."""
    cos, sin = freqs_cis  # [S, D]
    if sequence_dim == 2:
        cos, sin = cos[None, None, :, :], sin[None, None, :, :]
    elif sequence_dim == 1:
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    cos, sin = cos.to(x.device), sin.to(x.device)
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)  # [B, S, H, D//2]
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def rms_norm(x, weight):
    return F.rms_norm(x, (x.shape[-1],), weight, EPS)  # torch.nn.RMSNorm(head_dim, eps=1e-6)


def flux2_tables(tokens, dim, device, theta=2000.0):
    """Flux2PosEmbed-like cos/sin [tokens, dim] fp32: fp64 frequencies, each repeated for its pair."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    freqs = torch.outer(torch.arange(tokens, dtype=torch.float64, device=device) * 1.3, inv)
    return freqs.cos().repeat_interleave(2, dim=-1).float(), freqs.sin().repeat_interleave(2, dim=-1).float()


def single_stream_views(proj, heads, head_dim):
    """Flux2ParallelSelfAttnProcessor's split of the packed projection: q, k, v head views and the MLP part."""
    qkv_dim = 3 * heads * head_dim
    qkv, mlp = torch.split(proj, [qkv_dim, proj.shape[-1] - qkv_dim], dim=-1)
    query, key, value = qkv.chunk(3, dim=-1)
    return (query.unflatten(-1, (-1, head_dim)), key.unflatten(-1, (-1, head_dim)),
            value.unflatten(-1, (-1, head_dim)), mlp)


def strided_chain(query, key, q_weight, k_weight, eps, cos, sin):
    query, key = rms_norm(query, q_weight), rms_norm(key, k_weight)
    return apply_rotary_emb(query, (cos, sin), sequence_dim=1), apply_rotary_emb(key, (cos, sin), sequence_dim=1)


def epilogue_chain(query, key, value, encoder_query, encoder_key, encoder_value, q_weight, k_weight,
                   added_q_weight, added_k_weight, eps, cos, sin):
    query, key = rms_norm(query, q_weight), rms_norm(key, k_weight)
    encoder_query, encoder_key = rms_norm(encoder_query, added_q_weight), rms_norm(encoder_key, added_k_weight)
    query = torch.cat([encoder_query, query], dim=1)
    key = torch.cat([encoder_key, key], dim=1)
    value = torch.cat([encoder_value, value], dim=1)
    return (apply_rotary_emb(query, (cos, sin), sequence_dim=1), apply_rotary_emb(key, (cos, sin), sequence_dim=1),
            value)


def check_twice(name, op, chain, args, inputs, fused):
    """op(*args) vs chain(*args) bitwise, twice; `inputs` must keep their bits; the fused counter as `fused`."""
    refs = chain(*args)
    snapshot = [bits(t).clone() for t in inputs]
    before = counters(name)
    for _ in range(2):
        poison_allocator(sum(r.numel() * r.element_size() for r in refs), refs[0].device)
        outs = op(*args)
        assert len(outs) == len(refs)
        for out, ref in zip(outs, refs):
            assert_bitwise(out, ref)
        for t, s in zip(inputs, snapshot):
            assert torch.equal(bits(t), s), "an input (or the projection's V / MLP part) changed"
    if refs[0].is_cuda:
        after = counters(name)
        if fused:
            assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
        else:
            assert after.fused == before.fused, dt.gate_report()


# ---- flux2_strided_qknorm_rope ------------------------------------------------------------------------------


def check_strided(b, s, h, d, mlp, dtype, device, fused=True, weights=True, specials=False, offset=0,
                  amplitude=3.0):
    width = 3 * h * d + mlp
    storage = rand((b * s * width + offset,), dtype, amplitude, device=device)
    proj = storage[offset:].view(b, s, width)
    if specials:
        sprinkle_specials(proj)
    query, key, _, _ = single_stream_views(proj, h, d)
    qw, kw = (rand((d,), dtype, device=device), rand((d,), dtype, device=device)) if weights else (None, None)
    cos, sin = flux2_tables(s, d, device)
    check_twice("flux2_strided_qknorm_rope", dt.flux2_strided_qknorm_rope, strided_chain,
                (query, key, qw, kw, EPS, cos, sin), [proj], fused)


SINGLE_STREAM = {  # (batch, tokens, heads, head_dim, mlp columns)
    "flux2_klein_4096+512": (1, 4608, 24, 128, 18432),
    "heads1_tokens4097": (1, 4097, 1, 128, 6),
    "heads3_tokens7": (2, 7, 3, 128, 18),
    "heads30_tokens4097": (1, 4097, 30, 128, 180),
    "heads24_tokens1": (2, 1, 24, 128, 144),
    "head_dim_256": (1, 33, 4, 256, 24),
}


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", list(SINGLE_STREAM))
def test_strided_qknorm_rope(cuda, shape, dtype):
    check_strided(*SINGLE_STREAM[shape], dtype, cuda)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_strided_specials_without_weights(cuda, dtype):
    check_strided(2, 257, 24, 128, 64, dtype, cuda, weights=False, specials=True)


def test_strided_misaligned_projection(cuda):
    # strided views are copied to an aligned buffer by aten's rms_norm: the vectorized path, fused
    check_strided(1, 513, 24, 128, 8, torch.bfloat16, cuda, offset=1)


def test_strided_contiguous_heads(cuda):
    q, k = rand((1, 33, 24, 128), torch.bfloat16, 3.0), rand((1, 33, 24, 128), torch.bfloat16, 3.0)
    cos, sin = flux2_tables(33, 128, cuda)
    check_twice("flux2_strided_qknorm_rope", dt.flux2_strided_qknorm_rope, strided_chain,
                (q, k, rand((128,), torch.bfloat16), None, EPS, cos, sin), [q, k], True)


def test_strided_fallbacks(cuda):
    check_strided(1, 33, 4, 64, 8, torch.bfloat16, cuda, fused=False)  # head dim 64
    # contiguous heads off a 4-element boundary: aten's generic rms_norm path, which the kernel does not take
    storage = rand((2 * 33 * 24 * 128 + 2,), torch.bfloat16, 3.0)
    q, k = storage[1:1 + 33 * 24 * 128].view(1, 33, 24, 128), storage[2 + 33 * 24 * 128:].view(1, 33, 24, 128)
    cos, sin = flux2_tables(33, 128, cuda)
    check_twice("flux2_strided_qknorm_rope", dt.flux2_strided_qknorm_rope, strided_chain,
                (q, k, None, None, EPS, cos, sin), [storage], False)


# ---- flux2_qkv_epilogue -------------------------------------------------------------------------------------


def check_epilogue(b, s_img, s_txt, h, d, dtype, device, fused_projections=False, fused=True, weights=True,
                   specials=False):
    def heads(tokens):
        if fused_projections:  # attn.to_qkv(x).chunk(3, dim=-1), as _get_fused_projections
            proj = rand((b, tokens, 3 * h * d), dtype, 3.0, device=device)
            parts = proj.chunk(3, dim=-1)
        else:
            proj = rand((3, b, tokens, h * d), dtype, 3.0, device=device)
            parts = proj.unbind(0)
        if specials:
            sprinkle_specials(proj)
        return [p.unflatten(-1, (-1, d)) for p in parts], proj

    (iq, ik, iv), img = heads(s_img)
    (tq, tk, tv), txt = heads(s_txt)
    ws = [rand((d,), dtype, device=device) if weights else None for _ in range(4)]
    cos, sin = flux2_tables(s_txt + s_img, d, device)
    check_twice("flux2_qkv_epilogue", dt.flux2_qkv_epilogue, epilogue_chain,
                (iq, ik, iv, tq, tk, tv, *ws, EPS, cos, sin), [img, txt], fused)


DOUBLE_STREAM = {  # (batch, image tokens, text tokens, heads, head_dim)
    "flux2_klein_4096+512": (1, 4096, 512, 24, 128),
    "flux2_dev_4096+512": (1, 4096, 512, 48, 128),
    "heads1_tokens4097": (1, 4090, 7, 1, 128),
    "heads3_tokens7": (2, 6, 1, 3, 128),
    "heads30_tokens4097": (1, 3585, 512, 30, 128),
    "head_dim_256": (1, 30, 3, 4, 256),
}


@pytest.mark.parametrize("fused_projections", [False, True])
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", list(DOUBLE_STREAM))
def test_qkv_epilogue(cuda, shape, dtype, fused_projections):
    check_epilogue(*DOUBLE_STREAM[shape], dtype, cuda, fused_projections=fused_projections)


def test_qkv_epilogue_specials_without_weights(cuda):
    check_epilogue(2, 129, 17, 24, 128, torch.bfloat16, cuda, weights=False, specials=True)


def test_qkv_epilogue_fallback_head_dim(cuda):
    check_epilogue(1, 33, 5, 4, 64, torch.bfloat16, cuda, fused=False)


# ---- CPU (the ATen chain), errors, opcheck ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_cpu_matches_torch_cpu_chain(dtype):
    check_strided(2, 7, 3, 128, 18, dtype, "cpu", specials=True)
    check_epilogue(2, 6, 3, 3, 128, dtype, "cpu", fused_projections=True)


def test_tables_must_be_two_dimensional():
    q = rand((1, 7, 3, 128), torch.bfloat16, device="cpu")
    cos, sin = flux2_tables(7, 128, "cpu")
    with pytest.raises(RuntimeError, match=r"FLUX.2 RoPE tables are \[S, D\]"):
        dt.flux2_strided_qknorm_rope(q, q, None, None, EPS, cos[:, None, :], sin[:, None, :])


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_opcheck(device):
    if device == "cuda":
        require_cuda()
    proj = rand((2, 7, 3 * 3 * 128 + 16), torch.bfloat16, device=device)
    query, key, value, _ = single_stream_views(proj, 3, 128)
    cos, sin = flux2_tables(7, 128, device)
    w = rand((128,), torch.bfloat16, device=device)
    torch.library.opcheck(torch.ops.dfuse.flux2_strided_qknorm_rope.default, (query, key, w, None, EPS, cos, sin))
    txt = rand((3, 2, 4, 3 * 128), torch.bfloat16, device=device).unbind(0)
    tq, tk, tv = (t.unflatten(-1, (-1, 128)) for t in txt)
    jcos, jsin = flux2_tables(11, 128, device)
    torch.library.opcheck(torch.ops.dfuse.flux2_qkv_epilogue.default,
                          (query, key, value, tq, tk, tv, w, w, None, w, EPS, jcos, jsin))
