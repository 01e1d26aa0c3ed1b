"""The GEMM-epilogue torch ops against their eager chains: linear_gelu_tanh against
F.gelu(F.linear(x, w, b), approximate="tanh"), qkv_projection_into against Qwen-Image's three added
projections and the joint torch.cat.

Contract: close. Per element, with h = x @ w.T + b in fp32: |out - eager| <= 2^-7 |eager| + 2^-8 |h| + tiny
(tiny: the dtype's smallest subnormal), eager computed with fp32 split-K reductions (full_precision_reductions)
(dfuse/ops/gemm.h). check_bound prints the largest error it saw in units of the eager value's ulp.
"""

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import require_cuda

require_cuda()

import dfuse.torch as dt  # noqa: E402
from bitwise import assert_bitwise, rand  # noqa: E402

# (tokens, K, N): FLUX.1's FFN up-projection at 1024x1024 (4096 image + 512 text tokens), its text
# stream alone, and odd shapes.
SHAPES = [((1, 4608, 3072), 12288), ((1, 512, 3072), 12288), ((3, 7, 1536), 6144), ((1, 1, 3072), 12288),
          ((5, 2560), 640)]
DTYPES = [torch.bfloat16, torch.float16]


def chain(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


def inputs(x_shape, n, dtype):
    k = x_shape[-1]
    return rand(x_shape, dtype), rand((n, k), dtype, 1 / math.sqrt(k)), rand((n,), dtype, 0.5)


def smallest_subnormal(dtype):
    return torch.finfo(dtype).smallest_normal * torch.finfo(dtype).eps


def contract_bound(eager, x, w, b, dtype):
    """dfuse/ops/gemm.h's bound on |out - eager|: 2^-7 |eager| + 2^-8 |h| + 3 K 2^-24 a + the smallest subnormal,
    h = x W^T + b and a = |x| |W|^T + |b| in fp32 (a scales the difference of two orders of the K-term sum)."""
    xf, wf, bf = x.float(), w.float(), None if b is None else b.float()
    h = F.linear(xf, wf, bf)
    a = F.linear(xf.abs(), wf.abs(), None if bf is None else bf.abs())
    return eager.abs() * 2**-7 + h.abs() * 2**-8 + a * (3 * x.shape[-1] * 2**-24) + smallest_subnormal(dtype)


@contextlib.contextmanager
def full_precision_reductions():
    """cuBLAS split-K partial sums kept in fp32. PyTorch's default lets them be rounded to bf16/fp16, which moves
    the eager GEMM itself off the exact product (measured on the H200: 0.002 at M = 1, K = 3072, 65 fp16 ulp of a
    value near 0.03); the contract is stated against the chain without that rounding."""
    matmul = torch.backends.cuda.matmul
    saved = matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_reduced_precision_reduction
    matmul.allow_bf16_reduced_precision_reduction = matmul.allow_fp16_reduced_precision_reduction = False
    try:
        yield
    finally:
        matmul.allow_bf16_reduced_precision_reduction, matmul.allow_fp16_reduced_precision_reduction = saved


def check_bound(out, x, w, b, eager_chain=chain):
    """The close contract against `eager_chain` (the GELU chain, or F.linear alone for qkv_projection_into),
    computed with fp32 split-K reductions."""
    with full_precision_reductions():
        eager = eager_chain(x, w, b).float()
    err = (out.float() - eager).abs()
    bound = contract_bound(eager, x, w, b, out.dtype)
    worst = (err - bound).max().item()
    ulp = torch.finfo(out.dtype).eps * torch.maximum(eager.abs(), torch.full_like(eager, torch.finfo(out.dtype).tiny))
    print(f"max |out - eager| = {err.max().item():.3g}, {(err / ulp).max().item():.1f} ulp; "
          f"{(err > 0).float().mean().item() * 100:.1f}% of elements differ")
    assert worst <= 0, f"{int((err > bound).sum())} elements outside the bound"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("x_shape,n", SHAPES, ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
def test_within_bound(x_shape, n, dtype, with_bias):
    x, w, b = inputs(x_shape, n, dtype)
    b = b if with_bias else None
    out = dt.linear_gelu_tanh(x, w, b)
    assert out.shape == chain(x, w, b).shape and out.dtype == dtype
    check_bound(out, x, w, b)


def test_strided_rows_of_a_wider_tensor():
    x_wide, w, b = inputs((4097, 3072 + 64), 1024, torch.bfloat16)
    x = x_wide[:, :3072]
    w = w[:, :3072]
    check_bound(dt.linear_gelu_tanh(x, w, b), x, w, b)


@pytest.mark.parametrize("case", ["f32", "unaligned_k", "cpu", "transposed_weight"])
def test_fallback_runs_the_chain(case):
    x, w, b = inputs((2, 9, 64), 32, torch.bfloat16)
    if case == "f32":
        x, w, b = x.float(), w.float(), b.float()
    elif case == "unaligned_k":
        x, w, _ = inputs((2, 9, 63), 32, torch.bfloat16)
    elif case == "cpu":
        x, w, b = x.cpu(), w.cpu(), b.cpu()
    elif case == "transposed_weight":
        w = w.t().contiguous().t()
    assert_bitwise(dt.linear_gelu_tanh(x, w, b), chain(x, w, b))


def test_bad_shapes_raise_like_torch():
    x, w, b = inputs((2, 9, 64), 32, torch.bfloat16)
    with pytest.raises(RuntimeError):
        dt.linear_gelu_tanh(x, w[:, :48], b)


def test_torch_compile_fullgraph():
    x, w, b = inputs((2, 33, 256), 512, torch.bfloat16)
    compiled = torch.compile(lambda x, w, b: dt.linear_gelu_tanh(x, w, b) * 2, fullgraph=True)
    assert_bitwise(compiled(x, w, b), dt.linear_gelu_tanh(x, w, b) * 2)


def test_opcheck():
    x, w, b = inputs((2, 33, 256), 512, torch.bfloat16)
    torch.library.opcheck(torch.ops.dfuse.linear_gelu_tanh, (x, w, b))


# Qwen-Image: hidden 3072 (24 heads x 128), 1024x1024 image = 4096 tokens, text prompts of a few hundred
# tokens; plus odd sizes.
JOINT_SHAPES = [(1, 256, 4096, 3072), (2, 7, 33, 1536), (1, 1, 5, 3072)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch,s_txt,s_img,d", JOINT_SHAPES, ids=str)
def test_qkv_projection_into_joint_buffer(batch, s_txt, s_img, d, dtype):
    txt, img = rand((batch, s_txt, d), dtype), rand((batch, s_img, d), dtype)
    # add_q/add_k/add_v and to_q/to_k/to_v as separate linears, the way the model holds them.
    added = [(rand((d, d), dtype, 1 / math.sqrt(d)), rand((d,), dtype, 0.5)) for _ in range(3)]
    own = [(rand((d, d), dtype, 1 / math.sqrt(d)), rand((d,), dtype, 0.5)) for _ in range(3)]

    joint = torch.full((batch, s_txt + s_img, 3 * d), float("nan"), device="cuda", dtype=dtype)
    for x, rows, proj in ((txt, slice(0, s_txt), added), (img, slice(s_txt, None), own)):
        weight = torch.cat([w for w, _ in proj])
        bias = torch.cat([b for _, b in proj])
        dt.qkv_projection_into(x, weight, bias, joint[:, rows])
        check_bound(joint[:, rows], x, weight, bias, F.linear)

    # The eager chain: three linears per stream, then the joint concatenation of each of q, k, v.
    for i, fused in enumerate(joint.chunk(3, dim=-1)):
        with full_precision_reductions():
            eager = torch.cat([F.linear(txt, *added[i]), F.linear(img, *own[i])], dim=1).float()
        bound = torch.cat([contract_bound(eager[:, :s_txt], txt, *added[i], dtype),
                           contract_bound(eager[:, s_txt:], img, *own[i], dtype)], dim=1)
        assert bool(((fused.float() - eager).abs() <= bound).all())


def test_qkv_projection_into_leaves_other_rows_and_falls_back():
    x, w, b = inputs((2, 9, 64), 96, torch.bfloat16)
    for device in ("cuda", "cpu"):
        xs, ws, bs = (t.to(device) for t in (x, w, b))
        joint = torch.zeros((2, 12, 96), device=device, dtype=torch.bfloat16)
        dt.qkv_projection_into(xs, ws, bs, joint[:, 3:])
        if device == "cpu":  # the chain, bit for bit
            assert_bitwise(joint[:, 3:].contiguous(), F.linear(xs, ws, bs))
        else:
            check_bound(joint[:, 3:], xs, ws, bs, F.linear)
        assert bool((joint[:, :3] == 0).all())
    # f32 is not the kernel's: the chain writes the linear's exact result.
    joint = torch.zeros((2, 9, 96), device="cuda")
    dt.qkv_projection_into(x.float(), w.float(), b.float(), joint)
    assert_bitwise(joint, F.linear(x.float(), w.float(), b.float()))


def test_qkv_projection_into_compiles():
    x, w, b = inputs((2, 33, 256), 768, torch.bfloat16)

    def project(x, w, b):
        joint = torch.empty((2, 40, 768), device="cuda", dtype=torch.bfloat16)
        dt.qkv_projection_into(x, w, b, joint[:, 7:])
        return joint[:, 7:] * 2

    compiled = torch.compile(project, fullgraph=True)
    assert_bitwise(compiled(x, w, b), project(x, w, b))
