"""torch.ops.dfuse data-movement ops against the real PyTorch chains they replace, bit for bit.

    usp_merge_heads(x)                      x.permute(2, 1, 0, 3, 4).contiguous()
    joint_qkv_cat(iq, ik, iv, tq, tk, tv)   torch.cat([i*, t*], dim=1) for q, k and v (image first)
    pack_qkv_destination_major(q, k, v, W)  torch.stack([torch.cat([q[:, wL:(w+1)L], k[..], v[..]], -1)])

The ops move values and compute none, so they run without the first-sight Gate (no op counters); inputs are
random bit patterns (every NaN payload, -0, subnormals) and outputs are compared as integers.
"""

import pytest
from conftest import require_cuda

require_cuda()

import torch  # noqa: E402

import dfuse.torch as dt  # noqa: E402
from bitwise import assert_bitwise, bits, poison_allocator  # noqa: E402

ALL = [torch.bfloat16, torch.float16, torch.float32]
INT_OF = {2: torch.int16, 4: torch.int32}


def random_bits(shape, dtype, device="cuda"):
    """Uniformly random bit patterns of `dtype` (NaNs with payloads, infinities, -0 and subnormals included)."""
    size = torch.empty((), dtype=dtype).element_size()
    info = torch.iinfo(INT_OF[size])
    return torch.randint(info.min, info.max, shape, dtype=INT_OF[size], device=device).view(dtype)


def check(op, chain, args):
    """Op vs chain, bitwise, into a poisoned allocator block; returns the chain's result."""
    ref = chain(*args)
    refs = ref if isinstance(ref, tuple) else (ref,)
    poison_allocator(sum(r.numel() * r.element_size() for r in refs), refs[0].device)
    out = op(*args)
    outs = out if isinstance(out, tuple) else (out,)
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert_bitwise(o, r)
    return ref


# ---- usp_merge_heads ----------------------------------------------------------------------------------------

USP_SHAPES = [(4, 7936, 1, 14, 128), (2, 64, 3, 4, 64), (4, 33, 2, 4, 100)]  # H3 768p Ulysses-4; scalar tail


def usp_chain(x):
    return x.permute(2, 1, 0, 3, 4).contiguous()


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", USP_SHAPES, ids=str)
def test_usp_merge_heads(shape, dtype):
    check(dt.usp_merge_heads, usp_chain, (random_bits(shape, dtype),))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_usp_merge_heads_strided_and_misaligned(dtype):
    w, s, b, h, d = 4, 129, 2, 6, 128
    padded = random_bits((w, s, b, h, d + 8), dtype)[..., :d]  # rows of d + 8: strided
    check(dt.usp_merge_heads, usp_chain, (padded,))
    flat = random_bits((w * s * b * h * d + 1,), dtype)[1:].view(w, s, b, h, d)  # one element in: misaligned
    check(dt.usp_merge_heads, usp_chain, (flat,))


def test_usp_merge_heads_on_cpu():
    check(dt.usp_merge_heads, usp_chain, (random_bits((3, 17, 2, 4, 40), torch.bfloat16, "cpu"),))


# ---- joint_qkv_cat ------------------------------------------------------------------------------------------


def joint_chain(iq, ik, iv, tq, tk, tv):
    return torch.cat([iq, tq], dim=1), torch.cat([ik, tk], dim=1), torch.cat([iv, tv], dim=1)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("image,text,heads,head_dim", [(4096, 512, 24, 128), (37, 5, 3, 72)], ids=str)
def test_joint_qkv_cat(image, text, heads, head_dim, dtype):
    img = [random_bits((1, image, heads, head_dim), dtype) for _ in range(3)]
    txt = [random_bits((1, text, heads, head_dim), dtype) for _ in range(3)]
    check(dt.joint_qkv_cat, joint_chain, (*img, *txt))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_joint_qkv_cat_packed_projections(dtype):
    # qkv = proj(x).view(B, S, 3, H, D).unbind(2): strided q, k, v views of one projection
    b, image, text, heads, head_dim = 2, 4096, 512, 24, 128
    img = random_bits((b, image, 3, heads, head_dim), dtype).unbind(2)
    txt = random_bits((b, text, 3, heads, head_dim), dtype).unbind(2)
    assert img[2].stride(1) == 3 * heads * head_dim
    check(dt.joint_qkv_cat, joint_chain, (*img, *txt))


def test_joint_qkv_cat_falls_back_to_cat():
    # mixed dtypes are refused by the kernel: the op returns what torch.cat returns (promoted)
    img = [random_bits((1, 9, 2, 16), torch.bfloat16) for _ in range(3)]
    txt = [random_bits((1, 4, 2, 16), torch.float32) for _ in range(3)]
    check(dt.joint_qkv_cat, joint_chain, (*img, *txt))


# ---- pack_qkv_destination_major -----------------------------------------------------------------------------


def pack_chain(q, k, v, world):
    local = q.shape[1] // world
    shards = [torch.cat([t[:, w * local:(w + 1) * local] for t in (q, k, v)], dim=-1) for w in range(world)]
    return torch.stack(shards)


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("world", [2, 4])
def test_pack_qkv_destination_major(world, dtype):
    q, k, v = (random_bits((4096, 24, 128), dtype) for _ in range(3))
    check(dt.pack_qkv_destination_major, pack_chain, (q, k, v, world))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_pack_qkv_destination_major_strided(dtype):
    # q, k, v of one packed [rows, 3, G, hs] projection (strided rows), and an odd head size
    q, k, v = random_bits((1031, 3, 12, 72), dtype).unbind(1)
    check(dt.pack_qkv_destination_major, pack_chain, (q, k, v, 3))


def test_pack_qkv_destination_major_rejects_bad_world():
    q = random_bits((8, 6, 16), torch.float16)
    with pytest.raises(RuntimeError):
        dt.pack_qkv_destination_major(q, q, q, 4)


def test_data_movement_is_bitwise_not_numeric():
    # a permute that went through float arithmetic would canonicalize NaN payloads; the op must not
    x = random_bits((2, 64, 3, 4, 64), torch.float32)
    assert torch.equal(bits(dt.usp_merge_heads(x)), bits(usp_chain(x)))


# ---- varlen packing -----------------------------------------------------------------------------------------


def varlen_indices(batch, seq, valid, index_dtype):
    """Flat indices of `valid` random tokens of each batch, in a random order."""
    rows = [b * seq + torch.randperm(seq, device="cuda")[:valid] for b in range(batch)]
    flat = torch.cat(rows)
    return flat[torch.randperm(flat.numel(), device="cuda")].to(index_dtype)


def varlen_pack_chain(q, k, v, indices):
    return tuple(x.reshape(-1, x.shape[2], x.shape[3]).index_select(0, indices) for x in (q, k, v))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("shape", [(2, 4096, 24, 128), (3, 77, 5, 40)], ids=str)
def test_varlen_pack_qkv(shape, index_dtype, dtype):
    b, s, h, d = shape
    q, k, v = (random_bits(shape, dtype) for _ in range(3))
    check(dt.varlen_pack_qkv, varlen_pack_chain, (q, k, v, varlen_indices(b, s, s * 3 // 4, index_dtype)))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_varlen_pack_segmented_qkv(dtype):
    b, sp, sm, h, d = 2, 512, 4096, 24, 128
    prefix = [random_bits((b, sp, h, d), dtype) for _ in range(3)]
    main = [random_bits((b, sm, h, d), dtype) for _ in range(3)]
    indices = varlen_indices(b, sp + sm, 3000, torch.int64)

    def chain(pq, pk, pv, mq, mk, mv, idx):
        return varlen_pack_chain(torch.cat([pq, mq], 1), torch.cat([pk, mk], 1), torch.cat([pv, mv], 1), idx)

    check(dt.varlen_pack_segmented_qkv, chain, (*prefix, *main, indices))


@pytest.mark.parametrize("dtype", ALL, ids=str)
@pytest.mark.parametrize("shape", [(2, 4096, 24, 128), (3, 77, 5, 40)], ids=str)
def test_varlen_scatter_to_padded(shape, dtype):
    b, s, h, d = shape
    indices = varlen_indices(b, s, s // 2, torch.int64)
    packed = random_bits((indices.numel(), h, d), dtype)
    inv = torch.full((b * s,), -1, dtype=torch.int32, device="cuda")
    inv[indices] = torch.arange(indices.numel(), dtype=torch.int32, device="cuda")

    def chain(x, inv_indices, batch, seq):
        # the model's chain, from the forward indices: zeros, then index_copy_ of the packed rows
        return torch.zeros(batch * seq, h, d, dtype=x.dtype, device=x.device).index_copy_(0, indices, x).view(
            batch, seq, h, d)

    check(dt.varlen_scatter_to_padded, chain, (packed, inv, b, s))
