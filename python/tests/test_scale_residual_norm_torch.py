"""torch.ops.dfuse.scale_residual_norm_scale_shift against the real PyTorch eager chain, bit for bit.

The op replaces the gated residual step of one transformer block followed by the next modulated norm:
    r = residual + gate * update
    n = F.layer_norm(r, (D,), eps=eps)          norm="layer_norm"   (FLUX.1, Wan 2.1, LingBot Video)
    n = F.rms_norm(r, (D,), weight, eps)        norm="rms_norm"     (Qwen-Image-style RMSNorm blocks)
    out = n * (1 + scale) + shift
    return r, out
gate/scale/shift per batch [B,1,D], per token [B,S,D] (gate also [B,S,1]), or chunk(6) views of a
[B,1,6D] table. Both outputs are compared as integers (-0/+0 and NaN bits count). Where the fused kernel
is expected to run, each case calls the op twice (Gate first sight, then verified) and the counters must
show two fused calls and no new fallback.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import assert_bitwise, counters, poison_allocator, rand  # noqa: E402

FLUX = (1, 4608, 3072)  # FLUX.1 image tokens at 1024x1024, hidden 3072
WAN = (1, 75600, 5120)  # Wan 2.1 14B, 720p 81 frames, hidden 5120
ODD = [(1, 1, 1536), (1, 7, 2560), (3, 4097, 3840), (3, 7, 1536), (2, 4097, 2560)]
ALL = [torch.bfloat16, torch.float16, torch.float32]
NORMS = ["layer_norm", "rms_norm"]
EPS = 1e-6
NAME = "scale_residual_norm_scale_shift"


def chain(residual, gate, update, scale, shift, norm="layer_norm", weight=None, eps=EPS):
    """As model code writes it."""
    r = residual + gate * update
    d = r.shape[-1]
    n = F.layer_norm(r, (d,), eps=eps) if norm == "layer_norm" else F.rms_norm(r, (d,), weight, eps)
    return r, n * (1 + scale) + shift


def check(args, norm, weight=None, eps=EPS, fused=True):
    ref = chain(*args, norm=norm, weight=weight, eps=eps)
    before = counters(NAME)
    for _ in range(2):
        poison_allocator(ref[1].numel() * ref[1].element_size(), ref[1].device)
        r, out = dt.scale_residual_norm_scale_shift(*args, norm=norm, weight=weight, eps=eps)
        assert_bitwise(r, ref[0])
        assert_bitwise(out, ref[1])
    after = counters(NAME)
    if fused:
        assert after.fused - before.fused == 2 and after.fallbacks == before.fallbacks, dt.gate_report()
    elif fused is False:
        assert after.fused == before.fused, dt.gate_report()


def args_for(shape, dtype, per_gate, per_mod):
    b, s, d = shape
    residual = rand(shape, dtype, 3.0) + 0.25
    update = rand(shape, dtype)
    table = rand((b, 1, 6 * d), dtype, 0.5)
    shift_c, scale_c, gate_c, *_ = table.chunk(6, dim=-1)
    gate = {"batch": rand((b, 1, d), dtype, 0.5), "token": rand(shape, dtype, 0.5),
            "token_scalar": rand((b, s, 1), dtype, 0.5), "chunk6": gate_c}[per_gate]
    if per_mod == "chunk6":
        scale, shift = scale_c, shift_c
    else:
        param = (b, 1, d) if per_mod == "batch" else shape
        scale, shift = rand(param, dtype, 0.5), rand(param, dtype)
    return residual, gate, update, scale, shift


def weight_for(norm, d, dtype, with_weight=True):
    return rand((d,), dtype) + 1.0 if norm == "rms_norm" and with_weight else None


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("per", [("chunk6", "chunk6"), ("batch", "batch"), ("token", "token"),
                                 ("token_scalar", "batch")], ids=str)
@pytest.mark.parametrize("shape", [FLUX] + ODD, ids=str)
@pytest.mark.parametrize("norm", NORMS)
def test_shapes(norm, shape, per, dtype):
    d = shape[-1]
    check(args_for(shape, dtype, *per), norm, weight_for(norm, d, dtype))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("norm", NORMS)
def test_wan(norm, dtype):
    check(args_for(WAN, dtype, "chunk6", "chunk6"), norm, weight_for(norm, WAN[-1], dtype))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("d", [4096, 6144, 6148, 8192])
@pytest.mark.parametrize("norm", NORMS)
def test_rows_held_and_staged(norm, d, dtype):
    """Rows up to 6144 elements keep r in registers on CUDA (6144 the longest), longer ones stage it."""
    check(args_for((2, 129, d), dtype, "chunk6", "token"), norm, weight_for(norm, d, dtype))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_rms_norm_without_weight(dtype):
    check(args_for(FLUX, dtype, "chunk6", "chunk6"), "rms_norm", None)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("d", [3070, 1534, 77, 2, 1, 1537])
@pytest.mark.parametrize("norm", NORMS)
def test_generic_path_odd_d(norm, d, dtype):
    """D % 4 != 0: aten's generic (512-thread Welford) LayerNorm / RMSNorm path for r."""
    check(args_for((3, 257, d), dtype, "token", "batch"), norm, weight_for(norm, d, dtype))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_rms_norm_misaligned_weight_generic(dtype):
    """A weight view one element into its storage: aten's generic RMSNorm path even for D % 4 == 0."""
    d = 3072
    weight = (rand((d + 1,), dtype) + 1.0)[1:]
    check(args_for((1, 1024, d), dtype, "chunk6", "chunk6"), "rms_norm", weight)


@pytest.mark.parametrize("norm", NORMS)
def test_misaligned_and_strided_residual(norm):
    """r is fresh in the chain: a residual view misaligned by one element or with padded rows still gives
    aten's vectorized path for r."""
    dtype, (b, s, d) = torch.bfloat16, (2, 333, 3072)
    base = rand((b * s * d + 1,), dtype)
    args = list(args_for((b, s, d), dtype, "chunk6", "chunk6"))
    args[0] = base[1:].view(b, s, d)
    check(tuple(args), norm, weight_for(norm, d, dtype))
    args[0] = rand((b, s, d + 64), dtype)[..., :d]
    check(tuple(args), norm, weight_for(norm, d, dtype))


@pytest.mark.parametrize("norm", NORMS)
def test_specials(norm):
    dtype, shape = torch.bfloat16, (1, 512, 3072)
    args = list(args_for(shape, dtype, "token", "token"))
    args[0][0, 3, 7] = float("nan")
    args[2][0, 5, 11] = float("inf")
    args[1][0, 9, 13] = float("-inf")
    args[2][0, 9, 13] = 0.0
    check(tuple(args), norm, weight_for(norm, shape[-1], dtype))


@pytest.mark.parametrize("eps", [1e-5, 1e-2])
@pytest.mark.parametrize("norm", NORMS)
def test_eps(norm, eps):
    check(args_for((1, 256, 3072), torch.bfloat16, "batch", "batch"), norm,
          weight_for(norm, 3072, torch.bfloat16), eps=eps)


def test_rows_over_8192_run_the_chain():
    check(args_for((1, 8, 8196), torch.bfloat16, "batch", "batch"), "layer_norm", fused=False)


def test_mixed_dtypes_run_the_chain():
    args = list(args_for((1, 16, 256), torch.bfloat16, "batch", "batch"))
    args[1] = args[1].float()
    check(tuple(args), "rms_norm", weight_for("rms_norm", 256, torch.bfloat16), fused=False)


def test_layer_norm_with_weight_runs_the_chain():
    """The kernel is affine-free for layer_norm; a weight gives F.layer_norm(r, (D,), weight) via the chain."""
    args = args_for((1, 16, 256), torch.bfloat16, "batch", "batch")
    weight = rand((256,), torch.bfloat16)
    r, out = dt.scale_residual_norm_scale_shift(*args, norm="layer_norm", weight=weight)
    ref_r = args[0] + args[1] * args[2]
    assert_bitwise(r, ref_r)
    assert_bitwise(out, F.layer_norm(ref_r, (256,), weight, eps=EPS) * (1 + args[3]) + args[4])


def test_unknown_norm_is_an_error():
    args = args_for((1, 4, 64), torch.bfloat16, "batch", "batch")
    with pytest.raises(RuntimeError, match="layer_norm"):
        dt.scale_residual_norm_scale_shift(*args, norm="group_norm")


def test_opcheck():
    args = args_for((2, 33, 256), torch.bfloat16, "chunk6", "chunk6")
    torch.library.opcheck(torch.ops.dfuse.scale_residual_norm_scale_shift.default, args,
                          {"norm": "rms_norm", "weight": rand((256,), torch.bfloat16), "eps": EPS})
