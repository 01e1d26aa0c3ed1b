"""torch.ops.dfuse rope ops against the real PyTorch eager chains they replace, bit for bit.

    rope_rotate_half(x, cos, sin, math)   diffusers' apply_rotary_emb(use_real=True, use_real_unbind_dim=-2)
                                          (math="fp32_opmath"), and the partial-rotary rotate_half form with
                                          tables in x's dtype (math="storage_dtype"), tail concatenated
    rope_interleaved_pairs(x, cos, sin)   diffusers' apply_rotary_emb(use_real=True, use_real_unbind_dim=-1)
                                          (FLUX.1/2, HunyuanVideo, CogVideoX) and LTX-Video's own copy of it
    interleaved_rope_fp64(q, k, cos, sin) SANA-Video's apply_interleaved_rotary_emb with fp64 tables, q and k
    fused_inplace_qknorm_rope(q, k, ..., round_norm_before_rope=True)
                                          q = norm_q(q); k = norm_k(k) (F.rms_norm or diffusers' RMSNorm),
                                          then the rotate-half chain on each, written back into q and k (the
                                          exact form; the default one-rounding form and the out-of-place and
                                          pack-KV forms: test_qknorm_rope_forms_torch.py)

The chains below are written the way the model code writes them. Outputs are compared as integers, so -0/+0
and NaN bits count. Where the fused kernel is expected to run, each case calls the op twice (the Gate's first
sight, then the verified kernel alone) and the op counters must show two fused calls and no new fallback.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from rope_chains import (  # noqa: E402
    NORMS, ROPES, apply_interleaved_rotary_emb, partial_rope_fp32_opmath, partial_rope_storage_dtype)
import bitwise  # noqa: E402
from bitwise import assert_bitwise, bits, check_op, counters, poison_allocator, rand  # noqa: E402

HALF = [torch.bfloat16, torch.float16]
ALL = HALF + [torch.float32]

# (batch, tokens, heads, head_dim)
MODEL_SHAPES = {
    "flux1_4096+512": (1, 4608, 24, 128),
    "flux2_4096+512": (1, 4608, 48, 128),
    "qwen_image": (1, 4608, 24, 128),
    "hunyuan_video": (1, 32760, 24, 128),
    "ltx2": (1, 6144, 32, 128),
}
ODD_SHAPES = {
    "heads1_tokens1": (1, 1, 1, 128),
    "heads3_tokens7": (2, 7, 3, 128),
    "heads30_tokens4097": (1, 4097, 30, 128),
    "heads1_tokens4097": (1, 4097, 1, 64),
    "head_dim_96": (2, 33, 5, 96),
}


# ---- the chains, as model code writes them ----------------------------------------------------------------


def diffusers_apply_rotary_emb(x, cos, sin, sequence_dim=1):
    """diffusers.models.embeddings.apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-2)."""
    if sequence_dim == 2:
        cos, sin = cos[None, None, :, :], sin[None, None, :, :]
    else:
        cos, sin = cos[None, :, None, :], sin[None, :, None, :]
    x_real, x_imag = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)  # [B, S, H, D//2]
    x_rotated = torch.cat([-x_imag, x_real], dim=-1)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


# ---- inputs -------------------------------------------------------------------------------------------------


def rope_tables(tokens, dim, dtype, device="cuda", theta=10000.0):
    """cos/sin [tokens, dim] in the rotate-half layout (freqs repeated over both halves), built in fp64 and
    cast as diffusers does."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    freqs = torch.outer(torch.arange(tokens, dtype=torch.float64, device=device), inv)
    freqs = torch.cat([freqs, freqs], dim=-1)
    return freqs.cos().to(dtype), freqs.sin().to(dtype)


def sana_tables(tokens, dim, device="cuda", theta=10000.0):
    """SANA-Video style fp64 tables [1, tokens, 1, dim], each frequency repeated for its pair."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    freqs = torch.outer(torch.arange(tokens, dtype=torch.float64, device=device) * 0.37, inv)
    cos = freqs.cos().repeat_interleave(2, dim=-1)
    sin = freqs.sin().repeat_interleave(2, dim=-1)
    return cos[None, :, None, :], sin[None, :, None, :]


def packed_heads(b, s, h, d, dtype, slot=0, amplitude=3.0):
    """q (slot 0) or k (slot 1) of a packed projection qkv [B, S, 3 * H * D], as a strided [B, S, H, D] view."""
    qkv = rand((b, s, 3 * h * d), dtype, amplitude)
    view = qkv.view(b, s, 3, h, d)[:, :, slot]
    assert view.stride(1) == 3 * h * d
    return view


def sprinkle_specials(t):
    return bitwise.sprinkle_specials(t, (60000.0,), copies=32)


# ---- rope_rotate_half ---------------------------------------------------------------------------------------


def rotate_half_op(math):
    return lambda x, cos, sin: dt.rope_rotate_half(x, cos, sin, math)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", list(MODEL_SHAPES.values()) + list(ODD_SHAPES.values()),
                         ids=list(MODEL_SHAPES) + list(ODD_SHAPES))
def test_rotate_half_diffusers_chain(shape, dtype):
    b, s, h, d = shape
    cos, sin = rope_tables(s, d, torch.float32)
    x = rand(shape, dtype, 3.0)
    chain = lambda x, c, s_: diffusers_apply_rotary_emb(x, c, s_, sequence_dim=1)  # noqa: E731
    ref = chain(x, cos, sin)
    check_op("rope_rotate_half", rotate_half_op("fp32_opmath"), lambda *a: ref,
             (x, cos[None, :, None, :], sin[None, :, None, :]))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [MODEL_SHAPES["flux1_4096+512"], ODD_SHAPES["heads3_tokens7"]], ids=str)
def test_rotate_half_packed_projection(shape, dtype):
    b, s, h, d = shape
    cos, sin = rope_tables(s, d, torch.float32)
    x = packed_heads(b, s, h, d, dtype)
    ref = diffusers_apply_rotary_emb(x, cos, sin, sequence_dim=1)
    check_op("rope_rotate_half", rotate_half_op("fp32_opmath"), lambda *a: ref,
             (x, cos[None, :, None, :], sin[None, :, None, :]))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("b, s", [(2, 4097), (1, 32760)], ids=["tokens4097", "head_groups_of_8"])
def test_rotate_half_heads_first(b, s, dtype):
    h, d = 24, 128
    cos, sin = rope_tables(s, d, torch.float32)
    x = packed_heads(b, s, h, d, dtype, slot=1).transpose(1, 2)  # [B, H, S, D], strided
    ref = diffusers_apply_rotary_emb(x, cos, sin, sequence_dim=2)
    check_op("rope_rotate_half", rotate_half_op("fp32_opmath"), lambda *a: ref, (x, cos, sin))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_rotate_half_tables_in_x_dtype(dtype):
    b, s, h, d = 1, 4608, 24, 128
    cos, sin = rope_tables(s, d, dtype)
    x = rand((b, s, h, d), dtype, 3.0)
    ref = diffusers_apply_rotary_emb(x, cos, sin)
    check_op("rope_rotate_half", rotate_half_op("fp32_opmath"), lambda *a: ref,
             (x, cos[None, :, None, :], sin[None, :, None, :]))


@pytest.mark.parametrize("math, chain", [("storage_dtype", partial_rope_storage_dtype),
                                         ("fp32_opmath", partial_rope_fp32_opmath)], ids=["storage", "fp32"])
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape, rot", [((1, 4608, 24, 128), 64), ((1, 4608, 24, 128), 128), ((2, 7, 3, 80), 34),
                                        ((1, 4097, 30, 128), 96), ((1, 1, 1, 64), 2),
                                        ((1, 16384, 30, 128), 96), ((1, 18000, 30, 128), 96)], ids=str)
def test_rotate_half_partial_rotary(shape, rot, dtype, math, chain):
    b, s, h, d = shape
    table_dtype = dtype if math == "storage_dtype" else torch.float32
    cos, sin = (t[:, None, :] for t in rope_tables(s, rot, table_dtype))  # [S, 1, R]
    x = packed_heads(b, s, h, d, dtype)
    check_op("rope_rotate_half", rotate_half_op(math), chain, (x, cos, sin))


@pytest.mark.parametrize("math, chain", [("storage_dtype", partial_rope_storage_dtype),
                                         ("fp32_opmath", partial_rope_fp32_opmath)], ids=["storage", "fp32"])
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_rotate_half_odd_head_groups(dtype, math, chain):
    """Nine heads over enough tokens that the kernel walks them in groups of 5 and 4: a group's last head
    rotated alone, by both maths' 8-head kernels (pairs rolled for fp32 opmath, unrolled for the storage dtype)."""
    b, s, h, d = 1, 80000, 9, 64
    table_dtype = dtype if math == "storage_dtype" else torch.float32
    cos, sin = (t[:, None, :] for t in rope_tables(s, d, table_dtype))
    check_op("rope_rotate_half", rotate_half_op(math), chain, (rand((b, s, h, d), dtype, 3.0), cos, sin))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_rotate_half_tables_per_head(dtype):
    """cos/sin as large as x (no dim to share them over): every head is its own group."""
    b, s, h, d = 2, 77, 6, 128
    cos, sin = (torch.rand((b, s, h, d), device="cuda") * 2 - 1 for _ in range(2))
    x = rand((b, s, h, d), dtype, 3.0)
    x_rotated = torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1)
    ref = (x.float() * cos + x_rotated.float() * sin).to(dtype)
    check_op("rope_rotate_half", rotate_half_op("fp32_opmath"), lambda *a: ref, (x, cos, sin))


@pytest.mark.parametrize("math, chain", [("storage_dtype", partial_rope_storage_dtype),
                                         ("fp32_opmath", partial_rope_fp32_opmath)], ids=["storage", "fp32"])
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_rotate_half_nan_inf(dtype, math, chain):
    b, s, h, d = 2, 513, 24, 128
    table_dtype = dtype if math == "storage_dtype" else torch.float32
    cos, sin = (t[:, None, :] for t in rope_tables(s, 96, table_dtype))
    check_op("rope_rotate_half", rotate_half_op(math), chain, (sprinkle_specials(rand((b, s, h, d), dtype)), cos, sin))


def test_rotate_half_fallbacks():
    x = rand((2, 7, 3, 64), torch.bfloat16)
    cos, sin = (t[:, None, :] for t in rope_tables(7, 64, torch.float32))
    # storage_dtype with fp32 tables: the chain promotes to fp32, which the kernel does not produce
    ref = check_op("rope_rotate_half", rotate_half_op("storage_dtype"), partial_rope_storage_dtype, (x, cos, sin),
                   fused=False)
    assert ref.dtype == torch.float32
    # a strided last dim
    xs = rand((2, 7, 3, 128), torch.bfloat16)[..., ::2]
    check_op("rope_rotate_half", rotate_half_op("fp32_opmath"), partial_rope_fp32_opmath, (xs, cos, sin), fused=False)


def test_rotate_half_rejects_bad_math():
    x = rand((1, 7, 3, 64), torch.bfloat16)
    cos, sin = rope_tables(7, 64, torch.float32)
    with pytest.raises(RuntimeError, match="math must be"):
        dt.rope_rotate_half(x, cos[:, None], sin[:, None], "bf16")


# ---- interleaved_rope_fp64 ----------------------------------------------------------------------------------


def check_interleaved(q, k, cos, sin, fused=True):
    ref_q = apply_interleaved_rotary_emb(q, cos, sin)
    ref_k = apply_interleaved_rotary_emb(k, cos, sin)
    before = counters("interleaved_rope_fp64")
    for _ in range(2):
        poison_allocator(2 * ref_q.numel() * ref_q.element_size())
        out_q, out_k = dt.interleaved_rope_fp64(q, k, cos, sin)
        assert_bitwise(out_q, ref_q)
        assert_bitwise(out_k, ref_k)
    after = counters("interleaved_rope_fp64")
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    elif fused is False:
        assert after.fused == before.fused, dt.gate_report()


SANA_SHAPES = {
    "sana_video_480p": (2, 8190, 20, 112),
    "flux_like": (1, 4608, 24, 128),
    "heads1_tokens1": (1, 1, 1, 112),
    "heads3_tokens7": (2, 7, 3, 112),
    "heads30_tokens4097": (1, 4097, 30, 64),
    "head_dim_6": (1, 33, 5, 6),
}


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", list(SANA_SHAPES.values()), ids=list(SANA_SHAPES))
def test_interleaved_rope_fp64(shape, dtype):
    b, s, h, d = shape
    cos, sin = sana_tables(s, d)
    check_interleaved(rand(shape, dtype, 3.0), rand(shape, dtype, 3.0), cos, sin)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_rope_fp64_random_tables(dtype):
    # random fp64 tables exercise the double -> float -> dtype rounding far more often than real angles
    b, s, h, d = 1, 4097, 24, 128
    cos = torch.randn((1, s, 1, d), dtype=torch.float64, device="cuda")
    sin = torch.randn((1, s, 1, d), dtype=torch.float64, device="cuda")
    check_interleaved(rand((b, s, h, d), dtype, 3.0), rand((b, s, h, d), dtype, 3.0), cos, sin)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_rope_fp64_packed_projection(dtype):
    b, s, h, d = 2, 1025, 20, 112
    cos, sin = sana_tables(s, d)
    qkv = rand((b, s, 3 * h * d), dtype, 3.0)
    q, k, _ = qkv.view(b, s, 3, h, d).unbind(2)
    check_interleaved(q, k, cos, sin)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_rope_fp64_nan_inf(dtype):
    b, s, h, d = 1, 513, 20, 112
    cos, sin = sana_tables(s, d)
    check_interleaved(sprinkle_specials(rand((b, s, h, d), dtype)), sprinkle_specials(rand((b, s, h, d), dtype)),
                      cos, sin)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_rope_fp64_inf_times_zero_beside_nan(dtype):
    # Token 0's angles are 0: sin = 0 exactly, so x1 = +-inf makes x1 * sin an invalid-operation NaN (on the
    # H200 fp64's is negative, 0xfff8...) that meets x2 * cos = NaN in the odd output (and the mirror case in
    # the even one). Which NaN survives an fp64 add or subtract of two NaNs is the arithmetic's choice, not
    # the formula's; the output's sign bit must still be torch's (a dfuse verify run once saw it differ).
    b, s, h, d = 1, 9, 2, 64
    cos, sin = sana_tables(s, d)
    q, k = rand((b, s, h, d), dtype, 3.0), rand((b, s, h, d), dtype, 3.0)
    nan, inf = float("nan"), float("inf")
    for x in (q, k):
        x[0, 0, 0, 0:2] = torch.tensor([inf, nan])
        x[0, 0, 0, 2:4] = torch.tensor([nan, inf])
        x[0, 0, 1, 0:2] = torch.tensor([-inf, nan])
        x[0, 0, 1, 2:4] = torch.tensor([-nan, -inf])
    k[0, 0, 0, 4:6] = torch.tensor([inf, -inf])
    check_interleaved(q, k, cos, sin)


def test_interleaved_rope_fp64_fallback_f32_tables():
    b, s, h, d = 1, 7, 3, 64
    cos, sin = (t.float() for t in sana_tables(s, d))
    check_interleaved(rand((b, s, h, d), torch.bfloat16), rand((b, s, h, d), torch.bfloat16), cos, sin, fused=False)


# ---- fused_inplace_qknorm_rope ------------------------------------------------------------------------------


def check_qknorm_rope(b, s, h, d, rot, dtype, norm, math, fused=True, with_weight=True, specials=False):
    eps = 1e-6
    qkv = rand((b, s, 3 * h * d), dtype, 3.0)
    if specials:
        sprinkle_specials(qkv)
    weights = (rand((d,), dtype), rand((d,), dtype)) if with_weight else (None, None)
    table_dtype = dtype if math == "storage_dtype" else torch.float32
    cos, sin = (t[:, None, :] for t in rope_tables(s, rot, table_dtype))
    q0, k0, _ = qkv.view(b, s, 3, h, d).unbind(2)
    ref_q = ROPES[math](NORMS[norm](q0, weights[0], eps), cos, sin)
    ref_k = ROPES[math](NORMS[norm](k0, weights[1], eps), cos, sin)
    before = counters("fused_inplace_qknorm_rope")
    for _ in range(2):
        work = qkv.clone()
        q, k, v = work.view(b, s, 3, h, d).unbind(2)
        v_before = v.clone()
        dt.fused_inplace_qknorm_rope(q, k, weights[0], weights[1], eps, cos, sin, norm, math,
                                     round_norm_before_rope=True)
        assert_bitwise(q.contiguous(), ref_q)
        assert_bitwise(k.contiguous(), ref_k)
        assert torch.equal(bits(v), bits(v_before))  # the packed v is untouched
    after = counters("fused_inplace_qknorm_rope")
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    elif fused is False:
        assert after.fused == before.fused, dt.gate_report()


@pytest.mark.parametrize("math", list(ROPES))
@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape, rot", [((1, 4608, 24, 128), 128), ((1, 6144, 32, 128), 128),
                                        ((1, 4097, 30, 128), 64), ((2, 7, 3, 128), 96), ((1, 1, 16, 256), 256),
                                        ((1, 513, 8, 256), 160)], ids=str)
def test_qknorm_rope(shape, rot, dtype, norm, math):
    check_qknorm_rope(*shape, rot, dtype, norm, math)


@pytest.mark.parametrize("norm", list(NORMS))
def test_qknorm_rope_without_weight_and_specials(norm):
    check_qknorm_rope(1, 257, 24, 128, 128, torch.bfloat16, norm, "fp32_opmath", with_weight=False, specials=True)


@pytest.mark.parametrize("layout", ["heads_before_tokens", "tables_per_head", "one_head_batch_3"])
@pytest.mark.parametrize("norm", list(NORMS))
def test_qknorm_rope_table_layouts(layout, norm):
    """The kernel loads a table row once for the heads that share it, along whichever dim they lie: heads
    before tokens ([B, H, S, D] views, tables [S, D]), tables that differ per head (nothing shared), and one
    head with the batch as the shared dim."""
    b, s, h, d, eps = (3, 65, 1, 128, 1e-6) if layout == "one_head_batch_3" else (2, 33, 5, 128, 1e-6)
    dtype = torch.bfloat16
    qkv = rand((b, s, 3 * h * d), dtype, 3.0)
    weights = rand((d,), dtype), rand((d,), dtype)
    if layout == "tables_per_head":
        angles = torch.rand((s, h, d // 2), device="cuda", dtype=torch.float64) * 6.28
        angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos().float(), angles.sin().float()  # [S, H, D]
    else:
        cos, sin = (t[:, None, :] for t in rope_tables(s, d, torch.float32))  # [S, 1, D]

    def views(t):
        q, k, _ = t.view(b, s, 3, h, d).unbind(2)
        return (q.transpose(1, 2), k.transpose(1, 2)) if layout == "heads_before_tokens" else (q, k)

    tables = (cos[:, 0], sin[:, 0]) if layout == "heads_before_tokens" else (cos, sin)
    refs = [ROPES["fp32_opmath"](NORMS[norm](x, w, eps), *tables) for x, w in zip(views(qkv), weights)]
    before = counters("fused_inplace_qknorm_rope")
    work = qkv.clone()
    q, k = views(work)
    dt.fused_inplace_qknorm_rope(q, k, weights[0], weights[1], eps, *tables, norm, "fp32_opmath",
                                 round_norm_before_rope=True)
    assert_bitwise(q.contiguous(), refs[0])
    assert_bitwise(k.contiguous(), refs[1])
    after = counters("fused_inplace_qknorm_rope")
    assert after.fused - before.fused == 1 and after.fallbacks == before.fallbacks, dt.gate_report()


def test_qknorm_rope_fallback_head_dim():
    check_qknorm_rope(1, 33, 4, 64, 64, torch.bfloat16, "torch_rms_norm", "fp32_opmath", fused=False)


def test_qknorm_rope_fallback_decomposed_mean_of_few_long_rows():
    # diffusers' mean over 2 rows of 256 runs with 64 lanes per row: not the order the kernel reproduces
    check_qknorm_rope(1, 1, 2, 256, 256, torch.bfloat16, "diffusers_decomposed", "fp32_opmath", fused=False)
    check_qknorm_rope(1, 1, 2, 256, 256, torch.bfloat16, "torch_rms_norm", "fp32_opmath")


# ---- CPU, torch.compile, opcheck ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_cpu_matches_torch_cpu_chain(dtype):
    x = rand((2, 33, 5, 64), dtype, 3.0, device="cpu")
    cos, sin = (t[:, None, :] for t in rope_tables(33, 48, torch.float32, device="cpu"))
    check_op("rope_rotate_half", rotate_half_op("fp32_opmath"), partial_rope_fp32_opmath, (x, cos, sin), fused=None)
    cos64, sin64 = sana_tables(33, 64, device="cpu")
    q, k = x, rand((2, 33, 5, 64), dtype, 3.0, device="cpu")
    out_q, out_k = dt.interleaved_rope_fp64(q, k, cos64, sin64)
    assert_bitwise(out_q, apply_interleaved_rotary_emb(q, cos64, sin64))
    assert_bitwise(out_k, apply_interleaved_rotary_emb(k, cos64, sin64))


def attention_inputs(q, k, cos, sin, cos64, sin64):
    q2, k2 = dt.interleaved_rope_fp64(q, k, cos64, sin64)
    return dt.rope_rotate_half(q2, cos, sin, "fp32_opmath") + dt.rope_rotate_half(k2, cos, sin, "fp32_opmath")


def attention_inputs_chain(q, k, cos, sin, cos64, sin64):
    q2, k2 = apply_interleaved_rotary_emb(q, cos64, sin64), apply_interleaved_rotary_emb(k, cos64, sin64)
    return partial_rope_fp32_opmath(q2, cos, sin) + partial_rope_fp32_opmath(k2, cos, sin)


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph(dynamic):
    torch._dynamo.reset()
    compiled = torch.compile(attention_inputs, fullgraph=True, dynamic=dynamic)
    for b, s, h, d in [(1, 4608, 24, 128), (2, 7, 3, 128)]:
        cos, sin = (t[:, None, :] for t in rope_tables(s, d, torch.float32))
        cos64, sin64 = sana_tables(s, d)
        args = (rand((b, s, h, d), torch.bfloat16, 3.0), rand((b, s, h, d), torch.bfloat16, 3.0), cos, sin,
                cos64, sin64)
        ref = attention_inputs_chain(*args)
        assert_bitwise(attention_inputs(*args), ref)
        assert_bitwise(compiled(*args), ref)


def test_opcheck():
    x = rand((2, 7, 3, 64), torch.bfloat16)
    cos, sin = (t[:, None, :] for t in rope_tables(7, 64, torch.float32))
    cos64, sin64 = sana_tables(7, 64)
    for args in [(x, cos, sin, "fp32_opmath"), (x, cos.bfloat16(), sin.bfloat16(), "storage_dtype")]:
        torch.library.opcheck(torch.ops.dfuse.rope_rotate_half.default, args)
        torch.library.opcheck(torch.ops.dfuse.rope_rotate_half.default, tuple(
            a.cpu() if isinstance(a, torch.Tensor) else a for a in args))
    args = (x, rand((2, 7, 3, 64), torch.bfloat16), cos64, sin64)
    torch.library.opcheck(torch.ops.dfuse.interleaved_rope_fp64.default, args)
    q, k = rand((2, 7, 3, 128), torch.bfloat16), rand((2, 7, 3, 128), torch.bfloat16)
    cos128, sin128 = (t[:, None, :] for t in rope_tables(7, 128, torch.float32))
    torch.library.opcheck(torch.ops.dfuse.fused_inplace_qknorm_rope.default,
                          (q, k, rand((128,), torch.bfloat16), None, 1e-6, cos128, sin128, "torch_rms_norm",
                           "fp32_opmath"), {"round_norm_before_rope": True})
    torch.library.opcheck(torch.ops.dfuse.interleaved_rope_fp64.default, tuple(a.cpu() for a in args))


# ---- rope_interleaved_pairs ---------------------------------------------------------------------------------


def diffusers_apply_rotary_emb_pairs(x, freqs_cis, sequence_dim=2):
    """diffusers.models.embeddings.apply_rotary_emb(x, freqs_cis, use_real=True, use_real_unbind_dim=-1,
    sequence_dim=...) (FLUX.1, FLUX.2, HunyuanVideo, CogVideoX)."""
    cos, sin = freqs_cis  # [S, D]
    if sequence_dim == 2:
        cos = cos[None, None, :, :]
        sin = sin[None, None, :, :]
    else:
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
    cos, sin = cos.to(x.device), sin.to(x.device)
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)  # [B, H, S, D//2]
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def ltx_apply_rotary_emb(x, freqs):
    """LTX-Video's apply_rotary_emb: x [B, S, H * D] before the head split, tables [B, S, H * D]."""
    cos, sin = freqs
    x_real, x_imag = x.unflatten(2, (-1, 2)).unbind(-1)  # [B, S, C // 2]
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(2)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def pair_tables(tokens, dim, dtype=torch.float32, device="cuda", theta=10000.0):
    """cos/sin [tokens, dim] with each frequency repeated for its pair (get_1d_rotary_pos_embed with
    repeat_interleave_real=True), built in fp64 and cast to `dtype`."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
    freqs = torch.outer(torch.arange(tokens, dtype=torch.float64, device=device), inv)
    return freqs.cos().repeat_interleave(2, dim=-1).to(dtype), freqs.sin().repeat_interleave(2, dim=-1).to(dtype)


def pairs_op(x, cos, sin):
    return dt.rope_interleaved_pairs(x, cos, sin)


def check_pairs(x, cos, sin, sequence_dim, fused=True):
    """The op on x with [S, D] tables broadcast as diffusers does, against diffusers' chain."""
    ref = diffusers_apply_rotary_emb_pairs(x, (cos, sin), sequence_dim)
    shaped = (cos[None, None], sin[None, None]) if sequence_dim == 2 else (cos[None, :, None], sin[None, :, None])
    check_op("rope_interleaved_pairs", pairs_op, lambda *a: ref, (x, *shaped), fused=fused)


# (batch, heads, tokens, head_dim): x [B, H, S, D] as FLUX transposes q/k before RoPE
PAIR_MODEL_SHAPES = {
    "flux1_4096+512": (1, 24, 4608, 128),
    "flux2_dev_4096+512": (1, 48, 4608, 128),
    "hunyuan_video": (1, 24, 32760, 128),
    "cogvideox_5b": (2, 48, 17550, 64),
}
PAIR_ODD_SHAPES = {
    "heads1_tokens1": (1, 1, 1, 128),
    "heads3_tokens7": (2, 3, 7, 128),
    "heads30_tokens4097": (1, 30, 4097, 128),
    "heads1_tokens4097": (1, 1, 4097, 64),
    "head_dim_6": (2, 5, 33, 6),
}


@pytest.mark.parametrize("sequence_dim", [2, 1])
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", list(PAIR_MODEL_SHAPES.values()) + list(PAIR_ODD_SHAPES.values()),
                         ids=list(PAIR_MODEL_SHAPES) + list(PAIR_ODD_SHAPES))
def test_interleaved_pairs_diffusers_chain(shape, dtype, sequence_dim):
    b, h, s, d = shape
    x = rand((b, h, s, d) if sequence_dim == 2 else (b, s, h, d), dtype, 3.0)
    check_pairs(x, *pair_tables(s, d), sequence_dim)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [PAIR_MODEL_SHAPES["flux1_4096+512"], PAIR_ODD_SHAPES["heads3_tokens7"],
                                   PAIR_ODD_SHAPES["heads30_tokens4097"]], ids=str)
def test_interleaved_pairs_packed_projection(shape, dtype):
    b, h, s, d = shape
    cos, sin = pair_tables(s, d)
    for slot in (0, 1):
        x = packed_heads(b, s, h, d, dtype, slot=slot)  # [B, S, H, D] view of qkv [B, S, 3 * H * D]
        check_pairs(x, cos, sin, sequence_dim=1)
        check_pairs(x.transpose(1, 2), cos, sin, sequence_dim=2)  # FLUX: q.view(B, -1, H, D).transpose(1, 2)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_pairs_cogvideox_image_slice(dtype):
    # CogVideoX rotates query[:, :, text_seq_length:] of [B, H, S_text + S_image, D]
    b, h, text, image, d = 2, 30, 226, 1350, 64
    q = packed_heads(b, text + image, h, d, dtype).transpose(1, 2)
    cos, sin = pair_tables(image, d)
    check_pairs(q[:, :, text:], cos, sin, sequence_dim=2)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_pairs_ltx_video(dtype):
    b, s, inner = 2, 4096, 2048  # LTX-Video: 32 heads x 64, tables per batch over the flattened heads
    x = rand((b, s, inner), dtype, 3.0)
    cos, sin = (t.expand(b, s, inner).contiguous() for t in pair_tables(s, inner))
    ref = ltx_apply_rotary_emb(x, (cos, sin))
    check_op("rope_interleaved_pairs", pairs_op, lambda *a: ref, (x, cos, sin))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_interleaved_pairs_tables_in_x_dtype(dtype):
    b, h, s, d = 1, 24, 4608, 128
    check_pairs(rand((b, h, s, d), dtype, 3.0), *pair_tables(s, d, dtype), sequence_dim=2)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_pairs_random_tables(dtype):
    # random tables (no repeated pairs) reach far more rounding cases than real angles
    b, h, s, d = 1, 24, 4097, 128
    cos = torch.randn((s, d), dtype=torch.float32, device="cuda")
    sin = torch.randn((s, d), dtype=torch.float32, device="cuda")
    check_pairs(rand((b, h, s, d), dtype, 3.0), cos, sin, sequence_dim=2)
    check_pairs(rand((b, s, h, d), dtype, 3.0), cos, sin, sequence_dim=1)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_pairs_nan_inf(dtype):
    b, h, s, d = 2, 24, 513, 128
    check_pairs(sprinkle_specials(rand((b, h, s, d), dtype)), *pair_tables(s, d), sequence_dim=2)


def test_interleaved_pairs_fallbacks():
    cos, sin = pair_tables(7, 64)
    xs = rand((2, 3, 7, 128), torch.bfloat16)[..., ::2]  # a strided last dim
    check_pairs(xs, cos, sin, sequence_dim=2, fused=False)
    c64, s64 = pair_tables(7, 64, torch.float64)  # fp64 tables: the chain computes in fp64
    check_pairs(rand((2, 3, 7, 64), torch.bfloat16), c64, s64, sequence_dim=2, fused=False)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_interleaved_pairs_cpu_matches_torch_cpu_chain(dtype):
    cos, sin = pair_tables(33, 64, device="cpu")
    x = rand((2, 5, 33, 64), dtype, 3.0, device="cpu")
    ref = diffusers_apply_rotary_emb_pairs(x, (cos, sin), sequence_dim=2)
    check_op("rope_interleaved_pairs", pairs_op, lambda *a: ref, (x, cos[None, None], sin[None, None]), fused=None)


def flux_rope_qk(q, k, cos, sin):
    return dt.rope_interleaved_pairs(q, cos, sin), dt.rope_interleaved_pairs(k, cos, sin)


@pytest.mark.parametrize("dynamic", [False, True])
def test_interleaved_pairs_torch_compile_fullgraph(dynamic):
    torch._dynamo.reset()
    compiled = torch.compile(flux_rope_qk, fullgraph=True, dynamic=dynamic)
    for b, h, s, d in [(1, 24, 4608, 128), (2, 3, 7, 128)]:
        cos, sin = pair_tables(s, d)
        qkv = rand((b, s, 3 * h * d), torch.bfloat16, 3.0)
        q, k, _ = (t.transpose(1, 2) for t in qkv.view(b, s, 3, h, d).unbind(2))
        refs = [diffusers_apply_rotary_emb_pairs(t, (cos, sin), sequence_dim=2) for t in (q, k)]
        for outs in (flux_rope_qk(q, k, cos[None, None], sin[None, None]),
                     compiled(q, k, cos[None, None], sin[None, None])):
            assert_bitwise(outs[0], refs[0])
            assert_bitwise(outs[1], refs[1])


def test_interleaved_pairs_opcheck():
    cos, sin = pair_tables(7, 64)
    x = rand((2, 3, 7, 64), torch.bfloat16)
    for args in [(x, cos[None, None], sin[None, None]),
                 (x.transpose(1, 2), cos[:, None], sin[:, None]),
                 (x, cos[None, None].bfloat16(), sin[None, None].bfloat16())]:
        torch.library.opcheck(torch.ops.dfuse.rope_interleaved_pairs.default, args)
        torch.library.opcheck(torch.ops.dfuse.rope_interleaved_pairs.default, tuple(a.cpu() for a in args))
