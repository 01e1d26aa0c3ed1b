"""torch.ops.dfuse.gelu_tanh_cat against the tail of diffusers' FLUX.1 single-stream block, bit for bit:

    attn_output = attention heads [B, S, H, D] .reshape(B, S, H * D)     (the processor's reshape copy)
    torch.cat([attn_output, F.gelu(mlp_hidden_states, approximate="tanh")], dim=2)

Outputs are compared as integers, so -0/+0 and NaN bits count. Where the fused kernel is expected to run, each case
calls the op twice (first sight, then the verified kernel alone) and the counters must show two fused calls.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import assert_bitwise, check_op, rand  # noqa: E402

ALL = [torch.bfloat16, torch.float16, torch.float32]
# (batch, tokens, heads, head dim): FLUX.1 at 1024x1024 (4096 image + 512 text tokens, 24 heads of 128), odd shapes
SHAPES = [(1, 4608, 24, 128), (1, 1, 12, 128), (3, 7, 20, 128), (2, 4097, 30, 128), (1, 33, 3, 64)]


def chain(attn, mlp):
    attn_output = attn.reshape(attn.shape[0], attn.shape[1], -1) if attn.dim() == 4 else attn
    return torch.cat([attn_output, F.gelu(mlp, approximate="tanh")], dim=2)


def heads_and_mlp(b, s, h, d, dtype, amplitude=3.0, nan_every=0):
    """The attention's [B, H, S, D] output transposed to [B, S, H, D] (a view), and the MLP projection.
    nan_every > 0: every nan_every-th attention element is NaN."""
    heads = rand((b, h, s, d), dtype, amplitude)
    if nan_every:
        heads.view(-1)[::nan_every] = float("nan")
    return heads.transpose(1, 2), rand((b, s, 4 * h * d), dtype, amplitude)


def check(args, fused=True):
    return check_op("gelu_tanh_cat", dt.gelu_tanh_cat, chain, args, fused)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_heads(shape, dtype):
    check(heads_and_mlp(*shape, dtype))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_dense_attention_output(dtype):
    attn, mlp = heads_and_mlp(1, 4608, 24, 128, dtype)
    check((attn.reshape(1, 4608, -1), mlp))


def test_strided_mlp_rows():
    # The MLP half as a slice of a wider projection (FLUX.2-style packed outputs): rows at a larger stride.
    attn, _ = heads_and_mlp(2, 77, 6, 128, torch.bfloat16)
    wide = rand((2, 77, 4 * 768 + 512), torch.bfloat16, 3.0)
    check((attn, wide[..., 256:256 + 4 * 768]))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_nan_inf_and_extremes(dtype):
    attn, mlp = heads_and_mlp(1, 257, 24, 128, dtype, nan_every=97)
    finfo = torch.finfo(dtype)
    values = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, finfo.tiny / 4, -finfo.tiny, -20.0, 20.0,
                           finfo.max, -finfo.max], dtype=dtype, device="cuda")
    flat = mlp.view(-1)
    flat[torch.randint(0, flat.numel(), (64 * values.numel(),), device="cuda")] = values.repeat(64)
    check((attn, mlp))


def test_fallbacks_run_the_chain():
    attn, mlp = heads_and_mlp(2, 9, 4, 64, torch.bfloat16)
    check((attn.float(), mlp), fused=False)                      # mixed dtypes: torch promotes
    check((attn.transpose(2, 3), mlp), fused=False)               # head dim not contiguous
    check((attn, mlp.transpose(1, 2).contiguous().transpose(1, 2)), fused=False)  # mlp's last dim strided
    with pytest.raises(RuntimeError):
        dt.gelu_tanh_cat(attn[:, :5], mlp)                        # token counts differ: torch.cat's error


def test_cpu_matches_torch_cpu_chain():
    attn, mlp = heads_and_mlp(2, 33, 4, 64, torch.bfloat16)
    assert_bitwise(dt.gelu_tanh_cat(attn.cpu(), mlp.cpu()), chain(attn.cpu(), mlp.cpu()))


def block_tail(attn, mlp, weight):
    return F.linear(dt.gelu_tanh_cat(attn, mlp), weight)


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph(dynamic):
    torch._dynamo.reset()
    compiled = torch.compile(block_tail, fullgraph=True, dynamic=dynamic)
    for shape in [(1, 512, 8, 128), (2, 7, 8, 128)]:
        attn, mlp = heads_and_mlp(*shape, torch.bfloat16)
        weight = rand((256, 5 * 8 * 128), torch.bfloat16, 0.02)
        ref = F.linear(chain(attn, mlp), weight)
        assert_bitwise(block_tail(attn, mlp, weight), ref)
        assert_bitwise(compiled(attn, mlp, weight), ref)


def test_opcheck():
    attn, mlp = heads_and_mlp(2, 7, 4, 64, torch.bfloat16)
    torch.library.opcheck(torch.ops.dfuse.gelu_tanh_cat.default, (attn, mlp))
    torch.library.opcheck(torch.ops.dfuse.gelu_tanh_cat.default, (attn.cpu(), mlp.cpu()))
