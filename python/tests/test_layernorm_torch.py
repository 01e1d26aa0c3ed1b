"""torch.ops.dfuse LayerNorm ops against the real PyTorch eager chains they replace, bit for bit.

layernorm_modulate(x, scale, shift, eps) replaces `F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift`, the
adaLN norm1/norm2 of FLUX.1, Wan 2.1 and friends (nn.LayerNorm(D, elementwise_affine=False, eps=1e-6));
qk_head_layernorm(q, k, q_weight, q_bias, k_weight, k_bias, eps) replaces norm_q(q), norm_k(k) with
nn.LayerNorm(head_dim) on [B, S, H, Dh] heads, dense or views of a packed projection.
Outputs are compared as integers, so -0/+0 and NaN bits count. The fused kernel reproduces whichever
LayerNorm path aten picks: the vectorized kernel for D % 4 == 0 and aligned x, the generic two-kernel path for
odd D or an x view misaligned by an element; both are tested. Where the fused kernel is expected to run, each
case calls the op twice (Gate first sight, then verified) and the counters must show two fused calls and no
new fallback.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import (  # noqa: E402
    HALF_MIN_SUBNORMAL, UNIT_ROUNDOFF, assert_bitwise, check_op, counters, poison_allocator, rand)

FLUX = (1, 4608, 3072)  # FLUX.1 image tokens at 1024x1024, hidden 3072
WAN = (1, 75600, 5120)  # Wan 2.1 14B, 720p 81 frames, hidden 5120
ODD = [(1, 1, 1536), (1, 7, 2560), (3, 4097, 3840), (3, 7, 1536), (2, 4097, 2560)]
HALF = [torch.bfloat16, torch.float16]
ALL = HALF + [torch.float32]
EPS = 1e-6
NAME = "layernorm_modulate"


def chain(x, scale, shift, eps=EPS):
    return F.layer_norm(x, (x.shape[-1],), eps=eps) * (1 + scale) + shift


def check(args, fused=True):
    return check_op(NAME, dt.layernorm_modulate, chain, args, fused)


def chunk6(b, d, dtype):
    """shift and scale of the attention branch: chunks 0 and 1 of a [B, 1, 6D] table (strided views)."""
    table = rand((b, 1, 6 * d), dtype, 0.5)
    shift, scale, *_ = table.chunk(6, dim=-1)
    return scale, shift


def args_for(shape, dtype, per, amplitude=3.0):
    b, s, d = shape
    x = rand(shape, dtype, amplitude) + 0.25
    if per == "chunk6":
        scale, shift = chunk6(b, d, dtype)
    else:
        param = (b, 1, d) if per == "batch" else shape
        scale, shift = rand(param, dtype, 0.5), rand(param, dtype)
    return x, scale, shift


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("per", ["batch", "token", "chunk6"])
@pytest.mark.parametrize("shape", [FLUX] + ODD, ids=str)
def test_shapes(shape, per, dtype):
    check(args_for(shape, dtype, per))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("per", ["batch", "chunk6"])
def test_wan(per, dtype):
    check(args_for(WAN, dtype, per))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("d", [3070, 1534, 77, 2, 1, 1537])
def test_generic_path_odd_d(d, dtype):
    """D % 4 != 0: aten runs RowwiseMoments + LayerNormForward (512-thread Welford)."""
    check(args_for((3, 257, d), dtype, "batch"))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("offset", [1, 2])
def test_generic_path_misaligned_x(offset, dtype):
    """A contiguous x view starting `offset` elements into its storage fails aten's alignment check (8 bytes for
    bf16/f16, 16 for f32), so aten takes the generic path although D % 4 == 0."""
    b, s, d = FLUX
    storage = rand(b * s * d + offset, dtype, 3.0)
    x = storage[offset:].view(b, s, d)
    scale, shift = chunk6(b, d, dtype)
    check((x, scale, shift))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_non_contiguous_x(dtype):
    """A strided x (rows of a wider buffer) is copied by aten first: the copy is aligned, vectorized path."""
    wide = rand((2, 1025, 3072 + 8), dtype, 3.0)
    x = wide[..., 3:3 + 3072]
    scale, shift = chunk6(2, 3072, dtype)
    check((x, scale, shift))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 1e-2, 0.0])
def test_eps(eps, dtype):
    x, scale, shift = args_for((2, 333, 2560), dtype, "batch", amplitude=0.05)
    ref = chain(x, scale, shift, eps)
    for _ in range(2):
        assert_bitwise(dt.layernorm_modulate(x, scale, shift, eps), ref)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_large_mean(dtype):
    """Rows far from zero mean stress the Welford updates (cancellation in delta)."""
    x, scale, shift = args_for((1, 999, 3072), dtype, "token")
    check((x + 100.0, scale, shift))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_specials(dtype):
    x, scale, shift = args_for((1, 512, 3072), dtype, "token")
    x[0, 3, 7] = float("nan")
    x[0, 5, 1] = float("inf")
    x[0, 9, 2] = -float("inf")
    scale[0, 11, 4] = float("nan")
    shift[0, 13, 5] = float("inf")
    check((x, scale, shift))


def test_mixed_dtypes_run_the_chain():
    x = rand((1, 64, 3072), torch.bfloat16)
    scale, shift = rand((1, 1, 3072), torch.float32), rand((1, 1, 3072), torch.float32)
    out = dt.layernorm_modulate(x, scale, shift, EPS)
    assert out.dtype == torch.float32
    assert_bitwise(out, chain(x, scale, shift))


def test_meta_shape_and_dtype():
    x = torch.empty((2, 5, 64), dtype=torch.bfloat16, device="meta")
    s = torch.empty((2, 1, 64), dtype=torch.bfloat16, device="meta")
    out = dt.layernorm_modulate(x, s, s, EPS)
    assert out.shape == (2, 5, 64) and out.dtype == torch.bfloat16 and out.device.type == "meta"


def test_compiles_with_torch_compile():
    x, scale, shift = args_for((1, 64, 3072), torch.bfloat16, "chunk6")
    compiled = torch.compile(lambda a, b, c: dt.layernorm_modulate(a, b, c, EPS), fullgraph=True)
    assert_bitwise(compiled(x, scale, shift), chain(x, scale, shift))


# ---- qk_head_layernorm ------------------------------------------------------------------------------------

QK = "qk_head_layernorm"


def qk_chain(q, k, qw, qb, kw, kb, eps=EPS):
    """norm_q(q), norm_k(k) with nn.LayerNorm(head_dim) modules."""
    return F.layer_norm(q, (q.shape[-1],), qw, qb, eps), F.layer_norm(k, (k.shape[-1],), kw, kb, eps)


def check_qk(args, fused=True):
    q_ref, k_ref = qk_chain(*args)
    before = counters(QK)
    for _ in range(2):
        poison_allocator(2 * q_ref.numel() * q_ref.element_size())
        q_out, k_out = dt.qk_head_layernorm(*args, EPS)
        assert_bitwise(q_out, q_ref)
        assert_bitwise(k_out, k_ref)
    after = counters(QK)
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()


def affine(dh, dtype, weight=True, bias=True):
    w = (1 + rand((dh,), dtype, 0.2)) if weight else None
    b = rand((dh,), dtype, 0.1) if bias else None
    return w, b


def qk_args(b, s, h, dh, dtype, packed=False, weight=True, bias=True, sk=None):
    if packed:  # q, k, v = to_qkv(x).chunk(3, dim=-1), each unflattened to [B, S, H, Dh]
        qkv = rand((b, s, 3 * h * dh), dtype, 2.0)
        q, k, _ = (t.unflatten(-1, (h, dh)) for t in qkv.chunk(3, dim=-1))
    else:
        q, k = rand((b, s, h, dh), dtype, 2.0), rand((b, sk or s, h, dh), dtype, 2.0)
    qw, qb = affine(dh, dtype, weight, bias)
    kw, kb = affine(dh, dtype, weight, bias)
    return q, k, qw, qb, kw, kb


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("packed", [False, True], ids=["dense", "packed"])
@pytest.mark.parametrize("shape", [(1, 4608, 24, 128), (1, 7560, 40, 128), (3, 4097, 12, 128), (2, 333, 16, 64)],
                         ids=str)
def test_qk_shapes(shape, packed, dtype):
    check_qk(qk_args(*shape, dtype, packed=packed))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("weight,bias", [(True, False), (False, True), (False, False)], ids=["gamma", "beta", "none"])
@pytest.mark.parametrize("dh", [128, 126])
def test_qk_affine_variants(dh, weight, bias, dtype):
    """beta-only in the vectorized path has aten's unfused element-0 artefact; Dh 126 takes the generic path."""
    check_qk(qk_args(1, 999, 8, dh, dtype, weight=weight, bias=bias))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_qk_joint_lengths_and_misaligned_q(dtype):
    q, k, qw, qb, kw, kb = qk_args(1, 4608, 24, 128, dtype, sk=4608 + 512)
    storage = rand((q.numel() + 1,), dtype, 2.0)
    q_misaligned = storage[1:].view(q.shape)  # generic path for q, vectorized for k
    check_qk((q_misaligned, k, qw, qb, kw, kb))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("dh", [256, 1030])
def test_qk_long_heads(dh, dtype):
    check_qk(qk_args(1, 64, 4, dh, dtype))


def test_qk_meta():
    q = torch.empty((1, 5, 2, 64), dtype=torch.bfloat16, device="meta")
    w = torch.empty((64,), dtype=torch.bfloat16, device="meta")
    q_out, k_out = dt.qk_head_layernorm(q, q, w, w, w, w, EPS)
    assert q_out.shape == q.shape and k_out.dtype == torch.bfloat16


# ---- fp32_layernorm_bf16 ----------------------------------------------------------------------------------

FP32 = "fp32_layernorm_bf16"


def fp32_chain(x, weight, bias, eps=EPS):
    """diffusers FP32LayerNorm.forward."""
    return F.layer_norm(x.float(), (x.shape[-1],), weight.float() if weight is not None else None,
                        bias.float() if bias is not None else None, eps).to(x.dtype)


def fp32_args(shape, dtype, weight=True, bias=True):
    d = shape[-1]
    w = (1 + rand((d,), torch.float32, 0.2)) if weight else None
    b = rand((d,), torch.float32, 0.1) if bias else None
    return rand(shape, dtype, 2.0) + 0.5, w, b


def check_fp32(args, fused=True):
    return check_op(FP32, lambda *a: dt.fp32_layernorm_bf16(*a, EPS), fp32_chain, args, fused)


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize(
    "shape", [(1, 7560, 5120), FLUX, (3, 4097, 1536), (1, 1, 2560), (2, 333, 3070), (1, 300, 8192)], ids=str)
def test_fp32_layernorm_shapes(shape, dtype):
    """Rows up to 6144 elements held in registers, 8192 re-read after the statistics, 3070 the generic path."""
    check_fp32(fp32_args(shape, dtype))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_fp32_layernorm_misaligned_rows(dtype):
    """x as a view one element into each row of its storage (2-byte aligned rows): x.float() is a fresh, aligned
    copy, so aten takes the vectorized path; the kernel reads and writes those rows element by element."""
    x = (rand((2, 501, 3073), dtype, 2.0) + 0.5)[..., 1:]
    _, w, b = fp32_args((1, 1, 3072), dtype)
    check_fp32((x, w, b))


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("weight,bias", [(True, False), (False, True), (False, False)], ids=["gamma", "beta", "none"])
@pytest.mark.parametrize("d", [5120, 5118])
def test_fp32_layernorm_affine_variants(d, weight, bias, dtype):
    check_fp32(fp32_args((1, 1024, d), dtype, weight, bias))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_fp32_layernorm_misaligned_weight(dtype):
    """A weight view 1 float into its storage fails aten's 16-byte check: the generic path."""
    x, _, b = fp32_args((1, 2048, 5120), dtype)
    w = (1 + rand((5121,), torch.float32, 0.2))[1:]
    check_fp32((x, w, b))


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_fp32_layernorm_strided_affine(dtype):
    """Weight and bias as every second float of their storage: aten makes them contiguous (the vectorized
    path); the kernel reads them one element at a time instead of by 16-byte chunks."""
    x, _, _ = fp32_args((1, 777, 3072), dtype)
    w = (1 + rand((2 * 3072,), torch.float32, 0.2))[::2]
    b = rand((2 * 3072,), torch.float32, 0.1)[::2]
    check_fp32((x, w, b))


def test_fp32_layernorm_half_weight_runs_the_chain():
    x, w, b = fp32_args((1, 64, 1024), torch.bfloat16)
    args = (x, w.to(torch.bfloat16), b)
    assert_bitwise(dt.fp32_layernorm_bf16(*args, EPS), fp32_chain(*args))


# ---- layernorm_folded_modulate (request-gated, close) -----------------------------------------------------

FOLD = "layernorm_folded_modulate"


def folded_chain(x, scale, shift, eps=EPS):
    """The request-gated site's computation: LayerNorm's affine step does the modulate."""
    d = x.shape[-1]
    return F.layer_norm(x, (d,), (1 + scale).reshape(d), shift.reshape(d), eps)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [FLUX, (1, 7560, 5120), (1, 1, 1536), (1, 4097, 2560), (1, 99, 3070)], ids=str)
def test_folded_bit_exact_against_folded_layer_norm(shape, dtype):
    x, scale, shift = args_for(shape, dtype, "chunk6")
    check_op(FOLD, dt.layernorm_folded_modulate, folded_chain, (x, scale, shift))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [FLUX, (1, 4097, 3840)], ids=str)
def test_folded_within_bound_of_lossless_chain(shape, dtype):
    """|fold - chain| <= 4u (|n (1 + scale)| + |shift|) + 2 eta (|1 + scale| + 2), n = the chain's normalized
    value, eta half the smallest subnormal."""
    x, scale, shift = args_for(shape, dtype, "chunk6")
    out = dt.layernorm_folded_modulate(x, scale, shift, EPS).double()
    ref = chain(x, scale, shift).double()
    n = F.layer_norm(x, (x.shape[-1],), eps=EPS).double()
    a = (1 + scale.double()).abs()
    bound = 4 * UNIT_ROUNDOFF[dtype] * ((n * a).abs() + shift.double().abs()) + 2 * HALF_MIN_SUBNORMAL[dtype] * (a + 2)
    excess = (out - ref).abs() - bound
    assert excess.max().item() <= 0, f"max excess {excess.max().item()}"
    assert not torch.equal(out, ref) or dtype == torch.float32  # the fold is not the lossless chain


def test_folded_per_batch_rows_keep_the_lossless_chain():
    x, scale, shift = args_for((2, 64, 1536), torch.bfloat16, "batch")
    assert_bitwise(dt.layernorm_folded_modulate(x, scale, shift, EPS), chain(x, scale, shift))
