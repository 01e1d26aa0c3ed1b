"""torch.ops.dfuse joint-QKV epilogues against the real PyTorch eager chains they replace, bit for bit.

    qwen_qkv_epilogue(img_q, img_k, img_v, txt_q, txt_k, txt_v, wq, wk, waq, wak, eps, img_freqs, txt_freqs)
        Qwen-Image's QwenDoubleStreamAttnProcessor2_0 between the projections and attention: norm_q/norm_k,
        norm_added_q/norm_added_k (diffusers RMSNorm), apply_rotary_emb_qwen(use_real=False) with the complex64
        tables, torch.cat([txt, img], dim=1) of q, k, v
    hunyuan_qkv_rope_pack(img_q, img_k, img_v, txt_q, txt_k, txt_v, wq, wk, waq, wak, eps, cos, sin)
        HunyuanVideo's HunyuanVideoAttnProcessor2_0: the same norms, apply_rotary_emb(use_real=True,
        use_real_unbind_dim=-1, sequence_dim=1) on the image q and k only, torch.cat([img, txt], dim=1)

The chains below are written the way diffusers 0.42.1 writes them (and, where diffusers is importable, checked
against its own functions). Outputs are compared as integers, so -0/+0 and NaN bits count. Where the fused
kernel is expected to run, each case calls the op twice (the Gate's first sight, then the verified kernel alone)
and the op counters must show two fused calls and no new fallback.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import assert_bitwise, bits, counters, poison_allocator, rand, sprinkle_specials  # noqa: E402
from rope_chains import diffusers_rms_norm as rms_norm  # noqa: E402

ALL = [torch.bfloat16, torch.float16, torch.float32]
D = 128


# ---- the chains, as diffusers writes them -------------------------------------------------------------------


def apply_rotary_emb_qwen(x, freqs_cis):
    """transformer_qwenimage.apply_rotary_emb_qwen(x, freqs_cis, use_real=False)."""
    x_rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.unsqueeze(1)
    x_out = torch.view_as_real(x_rotated * freqs_cis).flatten(3)
    return x_out.type_as(x)


def apply_rotary_emb(x, cos, sin):
    """embeddings.apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-1, sequence_dim=1)."""
    cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def qwen_chain(img_q, img_k, img_v, txt_q, txt_k, txt_v, wq, wk, waq, wak, eps, img_freqs, txt_freqs):
    img_q, img_k = rms_norm(img_q, wq, eps), rms_norm(img_k, wk, eps)
    txt_q, txt_k = rms_norm(txt_q, waq, eps), rms_norm(txt_k, wak, eps)
    img_q, img_k = apply_rotary_emb_qwen(img_q, img_freqs), apply_rotary_emb_qwen(img_k, img_freqs)
    txt_q, txt_k = apply_rotary_emb_qwen(txt_q, txt_freqs), apply_rotary_emb_qwen(txt_k, txt_freqs)
    return (torch.cat([txt_q, img_q], dim=1), torch.cat([txt_k, img_k], dim=1), torch.cat([txt_v, img_v], dim=1))


def hunyuan_chain(img_q, img_k, img_v, txt_q, txt_k, txt_v, wq, wk, waq, wak, eps, cos, sin):
    img_q, img_k = rms_norm(img_q, wq, eps), rms_norm(img_k, wk, eps)
    img_q, img_k = apply_rotary_emb(img_q, cos, sin), apply_rotary_emb(img_k, cos, sin)
    txt_q, txt_k = rms_norm(txt_q, waq, eps), rms_norm(txt_k, wak, eps)
    return (torch.cat([img_q, txt_q], dim=1), torch.cat([img_k, txt_k], dim=1), torch.cat([img_v, txt_v], dim=1))


# ---- inputs ---------------------------------------------------------------------------------------------------


def qwen_freqs(tokens, device="cuda"):
    """complex64 [S, 64] of unit magnitude, as QwenEmbedRope builds them (torch.polar of the angles)."""
    pos = torch.arange(tokens, dtype=torch.float32, device=device)[:, None] + 0.37
    inv = 1.0 / torch.pow(10000.0, torch.arange(0, D, 2, dtype=torch.float32, device=device) / D)
    angles = pos * inv
    return torch.polar(torch.ones_like(angles), angles)


def hunyuan_tables(tokens, device="cuda"):
    """cos, sin f32 [S, 128], each frequency repeated twice (get_1d_rotary_pos_embed, repeat_interleave_real)."""
    angles = torch.rand(tokens, D // 2, device=device, dtype=torch.float32) * 300.0
    return angles.cos().repeat_interleave(2, dim=1), angles.sin().repeat_interleave(2, dim=1)


def heads(b, s, h, dtype, packed, device="cuda", amplitude=3.0):
    """q, k, v [B, S, H, 128]: three projections, or views of one packed [B, S, 3 * H * 128] projection."""
    if packed:
        qkv = rand((b, s, 3 * h * D), dtype, amplitude, device)
        return tuple(t.unflatten(-1, (h, D)) for t in qkv.chunk(3, dim=-1))
    return tuple(rand((b, s, h, D), dtype, amplitude, device) for _ in range(3))


def weights(dtype, with_weight, device="cuda"):
    if not with_weight:
        return (None,) * 4
    return tuple(rand((D,), dtype, 0.5, device) + 1.0 for _ in range(4))


def check(name, op, chain, args, fused=True):
    ref = chain(*args)
    before = counters(name)
    for _ in range(2):
        poison_allocator(3 * ref[0].numel() * ref[0].element_size(), ref[0].device)
        out = op(*args)
        assert len(out) == 3
        for o, r in zip(out, ref):
            assert_bitwise(o, r)
    after = counters(name)
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    elif fused is False:
        assert after.fused == before.fused, dt.gate_report()


def qwen_args(b, s_img, s_txt, h, dtype, packed=False, with_weight=True, specials=False, device="cuda"):
    img, txt = heads(b, s_img, h, dtype, packed, device), heads(b, s_txt, h, dtype, packed, device)
    if specials:
        img = tuple(sprinkle_specials(t) for t in img)
    return (*img, *txt, *weights(dtype, with_weight, device), 1e-6, qwen_freqs(s_img, device),
            qwen_freqs(s_txt, device))


def hunyuan_args(b, s_img, s_txt, h, dtype, packed=False, single_stream=False, with_weight=True, specials=False,
                 device="cuda"):
    if single_stream:  # to_q(cat([x, context])) normed by norm_q over both: the two token ranges of q, k, v
        full = heads(b, s_img + s_txt, h, dtype, packed, device)
        img, txt = tuple(t[:, :s_img] for t in full), tuple(t[:, s_img:] for t in full)
        w = weights(dtype, with_weight, device)
        w = (w[0], w[1], w[0], w[1])
    else:
        img, txt = heads(b, s_img, h, dtype, packed, device), heads(b, s_txt, h, dtype, packed, device)
        w = weights(dtype, with_weight, device)
    if specials:
        img = tuple(sprinkle_specials(t) for t in img)
    return (*img, *txt, *w, 1e-6, *hunyuan_tables(s_img, device))


# (batch, image tokens, text tokens, heads)
SHAPES = {
    "qwen_image_1024": (1, 4096, 512, 24),
    "qwen_image_batch2": (2, 1024, 77, 24),
    "hunyuan_video": (1, 8190, 256, 24),
    "heads1_tokens4097": (1, 4097, 1, 1),
    "heads3_tokens7": (3, 7, 7, 3),
    "heads30_tokens4097": (1, 4097, 7, 30),
    "tokens1": (2, 1, 1, 24),
}


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_qwen_qkv_epilogue(shape, dtype, packed):
    check("qwen_qkv_epilogue", dt.qwen_qkv_epilogue, qwen_chain, qwen_args(*SHAPES[shape], dtype, packed))


@pytest.mark.parametrize("single_stream", [False, True])
@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_hunyuan_qkv_rope_pack(shape, dtype, packed, single_stream):
    check("hunyuan_qkv_rope_pack", dt.hunyuan_qkv_rope_pack, hunyuan_chain,
          hunyuan_args(*SHAPES[shape], dtype, packed, single_stream))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_without_weights_and_specials(dtype):
    check("qwen_qkv_epilogue", dt.qwen_qkv_epilogue, qwen_chain,
          qwen_args(2, 257, 33, 24, dtype, with_weight=False, specials=True))
    check("hunyuan_qkv_rope_pack", dt.hunyuan_qkv_rope_pack, hunyuan_chain,
          hunyuan_args(2, 257, 33, 24, dtype, with_weight=False, specials=True))


def test_misaligned_views():
    # q, k, v starting one element past a 16-byte boundary: element accesses, same bits
    b, s, h = 1, 65, 3
    store = rand((6 * b * s * h * D + 1,), torch.bfloat16, 3.0)
    views = [store[1 + i * b * s * h * D:1 + (i + 1) * b * s * h * D].view(b, s, h, D) for i in range(6)]
    args = (*views, *weights(torch.bfloat16, True), 1e-6, qwen_freqs(s), qwen_freqs(s))
    check("qwen_qkv_epilogue", dt.qwen_qkv_epilogue, qwen_chain, args)


def test_fallbacks_keep_the_chain():
    # head dim 64: the kernel refuses, the op runs the chain
    b, s, h = 1, 9, 2
    img = tuple(rand((b, s, h, 64), torch.bfloat16) for _ in range(3))
    txt = tuple(rand((b, 5, h, 64), torch.bfloat16) for _ in range(3))
    w = tuple(rand((64,), torch.bfloat16) for _ in range(4))
    f_img, f_txt = qwen_freqs(s)[:, :32], qwen_freqs(5)[:, :32]
    check("qwen_qkv_epilogue", dt.qwen_qkv_epilogue, qwen_chain, (*img, *txt, *w, 1e-6, f_img, f_txt), fused=False)
    cos, sin = hunyuan_tables(s)
    check("hunyuan_qkv_rope_pack", dt.hunyuan_qkv_rope_pack, hunyuan_chain,
          (*img, *txt, *w, 1e-6, cos[:, :64], sin[:, :64]), fused=False)
    # f64 tables: the kernel takes f32 only
    args = hunyuan_args(1, 9, 5, 2, torch.bfloat16)
    check("hunyuan_qkv_rope_pack", dt.hunyuan_qkv_rope_pack, hunyuan_chain,
          (*args[:11], args[11].double(), args[12].double()), fused=False)


def test_inputs_intact():
    args = hunyuan_args(1, 33, 7, 3, torch.bfloat16, packed=True)
    before = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    dt.hunyuan_qkv_rope_pack(*args)
    for a, b in zip(args, before):
        if isinstance(a, torch.Tensor):
            assert torch.equal(bits(a), bits(b))


def test_matches_diffusers_functions():
    diffusers = pytest.importorskip("diffusers")  # noqa: F841
    from diffusers.models.embeddings import apply_rotary_emb as diffusers_rope
    from diffusers.models.normalization import RMSNorm
    from diffusers.models.transformers.transformer_qwenimage import apply_rotary_emb_qwen as diffusers_qwen_rope

    x = rand((1, 33, 3, D), torch.bfloat16, 3.0)
    norm = RMSNorm(D, eps=1e-6).to("cuda", torch.bfloat16)
    with torch.no_grad():
        norm.weight.copy_(rand((D,), torch.bfloat16, 0.5) + 1.0)
        assert_bitwise(norm(x), rms_norm(x, norm.weight, 1e-6))
    freqs = qwen_freqs(33)
    assert_bitwise(diffusers_qwen_rope(x, freqs, use_real=False), apply_rotary_emb_qwen(x, freqs))
    cos, sin = hunyuan_tables(33)
    assert_bitwise(diffusers_rope(x, (cos, sin), use_real=True, use_real_unbind_dim=-1, sequence_dim=1),
                   apply_rotary_emb(x, cos, sin))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_cpu_takes_the_chain(dtype):
    args = qwen_args(1, 9, 4, 2, dtype, device="cpu")
    out, ref = dt.qwen_qkv_epilogue(*args), qwen_chain(*args)
    for o, r in zip(out, ref):
        assert_bitwise(o, r)
    args = hunyuan_args(1, 9, 4, 2, dtype, device="cpu")
    out, ref = dt.hunyuan_qkv_rope_pack(*args), hunyuan_chain(*args)
    for o, r in zip(out, ref):
        assert_bitwise(o, r)


def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: dt.qwen_qkv_epilogue(*a), fullgraph=True)
    args = qwen_args(1, 64, 16, 4, torch.bfloat16)
    for o, r in zip(compiled(*args), qwen_chain(*args)):
        assert_bitwise(o, r)


def test_opcheck():
    torch.library.opcheck(torch.ops.dfuse.qwen_qkv_epilogue.default, qwen_args(1, 7, 3, 2, torch.bfloat16))
    torch.library.opcheck(torch.ops.dfuse.hunyuan_qkv_rope_pack.default,
                          hunyuan_args(1, 7, 3, 2, torch.bfloat16, packed=True))
