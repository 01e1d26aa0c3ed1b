"""torch.ops.dfuse RMSNorm ops against the real PyTorch eager chains they replace, bit for bit.

rmsnorm_scale_shift(x, weight, scale, shift, eps) replaces `F.rms_norm(x, (D,), weight, eps) * (1 + scale) + shift`
(torch.nn.RMSNorm, LTX-2 style adaLN); rmsnorm_decomposed_scale_shift replaces the same modulate after diffusers'
RMSNorm module (x.float().pow(2).mean(-1), rsqrt, .to(dtype) * weight). The two RMSNorms round differently and
each fused op must match its own chain. The decomposed chain's mean follows Reduce.cuh, whose configuration
depends on the row count (32 lanes from 16 rows up, up to 512 lanes for one row), so row counts 1, 3, 4 and 7
are tested as well as model sizes. Outputs are compared as integers. Where the fused kernel is expected to run,
each case calls the op twice (Gate first sight, then verified) and the counters must show two fused calls and
no new fallback.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import assert_bitwise, check_op, counters, rand  # noqa: E402

FLUX = (1, 4608, 3072)  # FLUX.1 image tokens at 1024x1024, hidden 3072
WAN = (1, 75600, 5120)  # Wan 2.1 14B, 720p 81 frames, hidden 5120
# (2, 17, 1288): 32 Reduce.cuh lanes over a count of 16-byte vectors that is no multiple of 32 (the whole-block
# means' last round partial; the model widths all give whole rounds).
# (2, 9, 6144): f32 rows whose two staging buffers take all of the default 48 KB of dynamic shared memory (the
# kernel's static shared memory needs the opt-in beyond it).
ODD = [(1, 1, 1536), (1, 7, 2560), (3, 4097, 3840), (3, 7, 1536), (2, 4097, 2560), (3, 1, 5120), (1, 4, 3072),
       (2, 17, 1288), (2, 9, 6144)]
ALL = [torch.bfloat16, torch.float16, torch.float32]
EPS = 1e-6


def torch_rms_norm(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def diffusers_rms_norm(x, weight, eps):
    """diffusers.models.normalization.RMSNorm.forward (non-NPU branch)."""
    input_dtype = x.dtype
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    x = x * torch.rsqrt(variance + eps)
    if weight is not None:
        if weight.dtype in [torch.float16, torch.bfloat16]:
            x = x.to(weight.dtype)
        x = x * weight
    else:
        x = x.to(input_dtype)
    return x


CHAINS = {
    "rmsnorm_scale_shift": (lambda: dt.rmsnorm_scale_shift, torch_rms_norm),
    "rmsnorm_decomposed_scale_shift": (lambda: dt.rmsnorm_decomposed_scale_shift, diffusers_rms_norm),
}


def check(name, args, fused=True):
    op, norm = CHAINS[name]

    def chain(x, weight, scale, shift, eps):
        return norm(x, weight, eps) * (1 + scale) + shift

    return check_op(name, op(), chain, args, fused)


def chunk6(b, d, dtype):
    """shift and scale of the attention branch: chunks 0 and 1 of a [B, 1, 6D] table (strided views)."""
    table = rand((b, 1, 6 * d), dtype, 0.5)
    shift, scale, *_ = table.chunk(6, dim=-1)
    return scale, shift


def args_for(shape, dtype, per, weight=True, amplitude=2.0, eps=EPS):
    b, s, d = shape
    x = rand(shape, dtype, amplitude)
    w = (rand((d,), dtype, 0.3) + 1.0) if weight else None
    if per == "chunk6":
        scale, shift = chunk6(b, d, dtype)
    else:
        param = (b, 1, d) if per == "batch" else shape
        scale, shift = rand(param, dtype, 0.5), rand(param, dtype)
    return x, w, scale, shift, eps


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("per", ["batch", "token", "chunk6"])
@pytest.mark.parametrize("shape", [FLUX] + ODD, ids=str)
def test_shapes(shape, per, dtype, name):
    check(name, args_for(shape, dtype, per))


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_wan(dtype, name):
    check(name, args_for(WAN, dtype, "chunk6"))


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [FLUX, (3, 7, 1536), (1, 1, 3072)], ids=str)
def test_no_weight(shape, dtype, name):
    check(name, args_for(shape, dtype, "chunk6", weight=False))


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("d", [3070, 1534, 77, 96, 130, 131])
def test_odd_d(d, dtype, name):
    """D % 4 != 0: F.rms_norm takes aten's generic (Welford) path; the decomposed mean reads rows that start off a
    16-byte boundary (head-alignment step) or, below 128, without float4 loads."""
    check(name, args_for((3, 257, d), dtype, "batch"))


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("offset", [1, 2])
def test_misaligned_x(offset, dtype, name):
    """A contiguous x view starting `offset` elements into its storage: F.rms_norm's generic path."""
    b, s, d = FLUX
    x = rand(b * s * d + offset, dtype, 2.0)[offset:].view(b, s, d)
    _, w, scale, shift, eps = args_for((b, 1, d), dtype, "chunk6")
    check(name, (x, w, scale, shift, eps))


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_non_contiguous_x(dtype, name):
    """A strided x (rows of a wider buffer): aten copies it first, vectorized path."""
    wide = rand((2, 1025, 3072 + 8), dtype, 2.0)
    x = wide[..., 3:3 + 3072]
    _, w, scale, shift, eps = args_for((2, 1, 3072), dtype, "chunk6")
    check(name, (x, w, scale, shift, eps))


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 1e-2, 0.0])
def test_eps(eps, dtype, name):
    check(name, args_for((2, 333, 2560), dtype, "batch", amplitude=0.05, eps=eps))


@pytest.mark.parametrize("name", CHAINS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_specials(dtype, name):
    x, w, scale, shift, eps = args_for((1, 512, 3072), dtype, "token")
    x[0, 3, 7] = float("nan")
    x[0, 5, 1] = float("inf")
    scale[0, 11, 4] = float("nan")
    shift[0, 13, 5] = float("inf")
    check(name, (x, w, scale, shift, eps))


def test_chains_differ():
    """The two RMSNorm chains give different bits on the same bf16 input, so each op is tested against the
    right one."""
    x, w, _, _, _ = args_for(FLUX, torch.bfloat16, "batch")
    assert not torch.equal(torch_rms_norm(x, w, EPS), diffusers_rms_norm(x, w, EPS))


@pytest.mark.parametrize("name", CHAINS)
def test_fp32_weight_with_bf16_x_runs_the_chain(name):
    x, _, scale, shift, eps = args_for((1, 64, 3072), torch.bfloat16, "batch")
    w = torch.ones(3072, device="cuda", dtype=torch.float32)
    out = CHAINS[name][0]()(x, w, scale, shift, eps)
    op, norm = CHAINS[name]
    assert_bitwise(out, norm(x, w, eps) * (1 + scale) + shift)


@pytest.mark.parametrize("name", CHAINS)
def test_meta_shape_and_dtype(name):
    x = torch.empty((2, 5, 64), dtype=torch.bfloat16, device="meta")
    s = torch.empty((2, 1, 64), dtype=torch.bfloat16, device="meta")
    w = torch.empty((64,), dtype=torch.bfloat16, device="meta")
    out = CHAINS[name][0]()(x, w, s, s, EPS)
    assert out.shape == (2, 5, 64) and out.dtype == torch.bfloat16 and out.device.type == "meta"


@pytest.mark.parametrize("name", CHAINS)
def test_compiles_with_torch_compile(name):
    x, w, scale, shift, eps = args_for((1, 64, 3072), torch.bfloat16, "chunk6")
    op, norm = CHAINS[name]
    compiled = torch.compile(lambda a, b, c, d: op()(a, b, c, d, eps), fullgraph=True)
    assert_bitwise(compiled(x, w, scale, shift), norm(x, w, eps) * (1 + scale) + shift)


# ---- per-head QK RMSNorm ----------------------------------------------------------------------------------

QK_OPS = {
    "qk_rmsnorm_native": (lambda: dt.qk_rmsnorm_native, diffusers_rms_norm),
    "qk_rmsnorm": (lambda: dt.qk_rmsnorm, torch_rms_norm),
}


def packed_qk(b, s, h, dh, dtype):
    """q and k as the attention processors see them: unflattened views of a fused QKV projection."""
    qkv = rand((b, s, 3 * h * dh), dtype, 2.0)
    q, k, _ = qkv.chunk(3, dim=-1)
    return q.unflatten(-1, (h, dh)), k.unflatten(-1, (h, dh))


def check_qk(name, q, k, qw, kw, eps=EPS, fused=True):
    op, norm = QK_OPS[name]
    ref_q, ref_k = norm(q, qw, eps), norm(k, kw, eps)
    before = counters(name)
    for _ in range(2):
        out_q, out_k = op()(q, k, qw, kw, eps)
        assert_bitwise(out_q, ref_q)
        assert_bitwise(out_k, ref_k)
    after = counters(name)
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    else:
        assert after.fused == before.fused, dt.gate_report()


def head_weights(dh, dtype):
    return rand((dh,), dtype, 0.3) + 1.0, rand((dh,), dtype, 0.3) + 1.0


@pytest.mark.parametrize("name", QK_OPS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [(1, 4608, 24, 128), (1, 4128, 30, 128), (3, 4097, 12, 128), (1, 1, 16, 128),
                                   (2, 333, 4, 256)], ids=str)
def test_qk_packed(shape, dtype, name):
    q, k = packed_qk(*shape, dtype)
    check_qk(name, q, k, *head_weights(shape[-1], dtype))


@pytest.mark.parametrize("name", QK_OPS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_qk_wan(dtype, name):
    q, k = packed_qk(1, 75600, 40, 128, dtype)
    check_qk(name, q, k, *head_weights(128, dtype))


@pytest.mark.parametrize("name", QK_OPS)
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_qk_separate_no_weight(dtype, name):
    q, k = rand((2, 1024, 8, 128), dtype, 2.0), rand((2, 1024, 8, 128), dtype, 2.0)
    check_qk(name, q, k, None, None, eps=1e-5)


def test_qk_native_wide_mean_runs_the_chain():
    """4 rows of 256: torch's mean gives each row 64 lanes, not reproduced; the op runs the chain."""
    q, k = packed_qk(1, 1, 4, 256, torch.bfloat16)
    check_qk("qk_rmsnorm_native", q, k, *head_weights(256, torch.bfloat16), fused=False)


def test_qk_native_one_token():
    """Rows of 128 always get 32 lanes: one token of 4 heads runs fused."""
    q, k = packed_qk(1, 1, 4, 128, torch.bfloat16)
    check_qk("qk_rmsnorm_native", q, k, *head_weights(128, torch.bfloat16))


def test_qk_meta_shape_and_dtype():
    q = torch.empty((1, 7, 4, 128), dtype=torch.bfloat16, device="meta")
    w = torch.empty((128,), dtype=torch.bfloat16, device="meta")
    for name in QK_OPS:
        out_q, out_k = QK_OPS[name][0]()(q, q, w, w, EPS)
        assert out_q.shape == q.shape and out_k.dtype == torch.bfloat16 and out_q.device.type == "meta"


# ---- storage-dtype (bf16-native) RMSNorm: rmsnorm_scale, rmsnorm_tanh_residual ---------------------------


def zimage_rms_norm(x, weight, eps):
    """Z-Image's RMSNorm: every op in x's dtype (bf16-native statistics)."""
    out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return out * weight if weight is not None else out


def scale_chain(x, weight, scale, eps):
    return zimage_rms_norm(x, weight, eps) * scale


def tanh_residual_chain(residual, gate, y, weight, eps):
    return residual + torch.tanh(gate) * zimage_rms_norm(y, weight, eps)


ZIMAGE = (1, 4128, 3840)  # Z-Image 1024x1024: 4096 image + 32 text tokens, hidden 3840


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("per", ["batch", "chunk6"])
@pytest.mark.parametrize("shape", [ZIMAGE, FLUX, (1, 32, 3840), (2, 17, 256), (1, 1, 3840), (3, 7, 1536), (1, 257, 132),
                                   (2, 17, 1288)], ids=str)
def test_rmsnorm_scale(shape, per, dtype):
    x, w, scale, _, eps = args_for(shape, dtype, per, eps=1e-5)
    check_op("rmsnorm_scale", dt.rmsnorm_scale, scale_chain, (x, w, 1 + scale, eps))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("per", ["batch", "chunk6"])
@pytest.mark.parametrize("shape", [ZIMAGE, FLUX, (1, 32, 3840), (2, 17, 256), (1, 1, 3840), (3, 7, 1536), (1, 257, 132),
                                   (2, 17, 1288)], ids=str)
def test_rmsnorm_tanh_residual(shape, per, dtype):
    y, w, gate, _, eps = args_for(shape, dtype, per, eps=1e-5)
    residual = rand(shape, dtype, 4.0)
    check_op("rmsnorm_tanh_residual", dt.rmsnorm_tanh_residual, tanh_residual_chain, (residual, gate, y, w, eps))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("misaligned", ["residual", "y"])
def test_rmsnorm_tanh_residual_misaligned(misaligned, dtype):
    """One operand as a view one element into each row of its storage (2-byte aligned rows for 16-bit dtypes):
    element accesses instead of 16-byte vectors."""
    shape = (2, 333, 3840)
    y, w, gate, _, eps = args_for(shape, dtype, "chunk6", eps=1e-5)
    residual = rand(shape, dtype, 4.0)
    view = rand((2, 333, 3841), dtype, 4.0)[..., 1:]
    view.copy_(residual if misaligned == "residual" else y)
    if misaligned == "residual":
        residual = view
    else:
        y = view
    check_op("rmsnorm_tanh_residual", dt.rmsnorm_tanh_residual, tanh_residual_chain, (residual, gate, y, w, eps))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_rmsnorm_scale_no_weight_and_wan(dtype):
    x, _, scale, _, eps = args_for(WAN, dtype, "batch")
    check_op("rmsnorm_scale", dt.rmsnorm_scale, scale_chain, (x, None, scale, eps))


def test_storage_meta_shape_and_dtype():
    x = torch.empty((2, 5, 64), dtype=torch.bfloat16, device="meta")
    s = torch.empty((2, 1, 64), dtype=torch.bfloat16, device="meta")
    w = torch.empty((64,), dtype=torch.bfloat16, device="meta")
    assert dt.rmsnorm_scale(x, w, s, EPS).shape == (2, 5, 64)
    out = dt.rmsnorm_tanh_residual(x, s, x, w, EPS)
    assert out.shape == (2, 5, 64) and out.dtype == torch.bfloat16 and out.device.type == "meta"


def test_qk_storage_dtype_chain_matches_zimage():
    """Z-Image's own QK norm (every op in bf16): squares, the mean over 16-byte vectors (16 lanes of 8), rsqrt."""
    for dtype in ALL:
        for shape in [(1, 4128, 30, 128), (1, 1, 3, 128), (2, 333, 4, 128)]:
            q, k = packed_qk(*shape, dtype)
            qw, kw = head_weights(128, dtype)
            ref_q, ref_k = zimage_rms_norm(q, qw, 1e-5), zimage_rms_norm(k, kw, 1e-5)
            before = counters("qk_rmsnorm_storage_dtype")
            for _ in range(2):
                out_q, out_k = dt.qk_rmsnorm_storage_dtype(q, k, qw, kw, 1e-5)
                assert_bitwise(out_q, ref_q)
                assert_bitwise(out_k, ref_k)
            after = counters("qk_rmsnorm_storage_dtype")
            assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
