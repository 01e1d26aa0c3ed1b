"""torch.ops.dfuse.linear_gelu_tanh against the eager chain F.gelu(F.linear(x, w, b), approximate="tanh").

Contract: close. Per element, with h = x @ w.T + b in fp32: |out - eager| <= 2^-7 |eager| + 2^-8 |h|
(dfuse/ops/gemm.h). Each test also prints the largest error it saw in units of the eager value's ulp.
"""

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


def check_bound(out, x, w, b):
    eager = chain(x, w, b).float()
    h = F.linear(x.float(), w.float(), None if b is None else b.float())
    err = (out.float() - eager).abs()
    bound = eager.abs() * 2**-7 + h.abs() * 2**-8
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
