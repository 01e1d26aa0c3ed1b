"""Model chains as model code writes them (the QK norms; the rotate-half, LTX-2 split, Helios, SANA-Video and
LTX-2.5 decoder RoPEs), shared by the torch op tests (imported after conftest.require_cuda() where a module needs CUDA)
and by bench/torch_bench.py."""

import torch
import torch.nn.functional as F


def torch_rms_norm(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)  # torch.nn.RMSNorm


def diffusers_rms_norm(hidden_states, weight, eps):
    """diffusers.models.normalization.RMSNorm.forward."""
    input_dtype = hidden_states.dtype
    variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + eps)
    if weight is not None:
        if weight.dtype in [torch.float16, torch.bfloat16]:
            hidden_states = hidden_states.to(weight.dtype)
        hidden_states = hidden_states * weight
    else:
        hidden_states = hidden_states.to(input_dtype)
    return hidden_states


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def partial_rope_storage_dtype(x, cos, sin):
    """x * cos + rotate_half(x) * sin over the first R channels, cos/sin in x's dtype; tail concatenated."""
    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    x_rot = x_rot * cos + rotate_half(x_rot) * sin
    return torch.cat([x_rot, x_pass], dim=-1)


def partial_rope_fp32_opmath(x, cos, sin):
    """The same in fp32 (diffusers' x.float() * cos + ...), rounded once to x's dtype."""
    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    x_rot = (x_rot.float() * cos + rotate_half(x_rot).float() * sin).to(x.dtype)
    return torch.cat([x_rot, x_pass], dim=-1)



def apply_interleaved_rotary_emb(hidden_states, freqs_cos, freqs_sin):
    """SANA-Video's RoPE ([B, N, H, D], fp64 tables [1, N, 1, D])."""
    x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
    cos = freqs_cos[..., 0::2].to(device=hidden_states.device)
    sin = freqs_sin[..., 1::2].to(device=hidden_states.device)
    output = torch.empty_like(hidden_states)
    output[..., 0::2] = x1 * cos - x2 * sin
    output[..., 1::2] = x1 * sin + x2 * cos
    return output


def decoder_dim_split(head_dim):
    """LTX2VideoVaeRotaryPosEmbed3D.__init__'s rope_dim_split."""
    dim_t = (head_dim // 4) // 2 * 2
    dim_hw = (head_dim - dim_t) // 2
    if dim_hw % 2 != 0:
        dim_t -= 2
        dim_hw = (head_dim - dim_t) // 2
    return dim_t, dim_hw, dim_hw


def decoder_tables(t, h, w, head_dim, base=10000.0, device="cuda"):
    """The per-axis cos/sin the module computes on every call, computed once: angles = positions x inv_freqs."""
    tables = []
    for n, dim in zip((t, h, w), decoder_dim_split(head_dim)):
        exponents = torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim
        inv_freqs = (1.0 / base**exponents).to(torch.float32)
        angles = torch.arange(n, dtype=torch.float32, device=device)[:, None] * inv_freqs[None, :]
        tables += [angles.cos(), angles.sin()]
    return tables


def rotate_axis(x, cos, sin, axis):
    """LTX2VideoVaeRotaryPosEmbed3D._rotate_axis with its cos/sin given (broadcast along `axis`)."""
    out_dtype = x.dtype
    pairs = x.reshape(*x.shape[:-1], x.shape[-1] // 2, 2)
    even = pairs[..., 0].float()
    odd = pairs[..., 1].float()
    shape = [1, 1, 1, 1, 1, cos.shape[1]]
    shape[axis] = cos.shape[0]
    cos, sin = cos.reshape(shape), sin.reshape(shape)
    rotated = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)
    return rotated.reshape(x.shape).to(out_dtype)


def decoder_chain(x, tables):
    """LTX2VideoVaeRotaryPosEmbed3D.forward: rotate the (T, H, W) channel chunks, concatenate."""
    dim_t, dim_h, _ = decoder_dim_split(x.shape[-1])
    rotated_t = rotate_axis(x[..., :dim_t], tables[0], tables[1], axis=1)
    rotated_h = rotate_axis(x[..., dim_t : dim_t + dim_h], tables[2], tables[3], axis=2)
    rotated_w = rotate_axis(x[..., dim_t + dim_h :], tables[4], tables[5], axis=3)
    return torch.cat([rotated_t, rotated_h, rotated_w], dim=-1)


def split_rotary(x, freqs):
    """transformer_ltx2.apply_split_rotary_emb for x [B, S, H*D] and cos/sin [B, H, S, D/2]."""
    cos, sin = freqs
    x_dtype = x.dtype
    b, h, t, _ = cos.shape
    x = x.reshape(b, t, h, -1).swapaxes(1, 2)
    last = x.shape[-1]
    r = last // 2
    split_x = x.reshape(*x.shape[:-1], 2, r).float()
    first_x = split_x[..., :1, :]
    second_x = split_x[..., 1:, :]
    cos_u = cos.unsqueeze(-2)
    sin_u = sin.unsqueeze(-2)
    out = split_x * cos_u
    first_out = out[..., :1, :]
    second_out = out[..., 1:, :]
    first_out.addcmul_(-sin_u, second_x)
    second_out.addcmul_(sin_u, first_x)
    out = out.reshape(*out.shape[:-2], last)
    out = out.swapaxes(1, 2).reshape(b, t, -1)
    return out.to(dtype=x_dtype)


def apply_rotary_emb_transposed(hidden_states, freqs_cis):
    """transformer_helios.apply_rotary_emb_transposed, as the processor applies it to query and key."""
    x_1, x_2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
    cos, sin = freqs_cis.unsqueeze(-2).chunk(2, dim=-1)
    out = torch.empty_like(hidden_states)
    out[..., 0::2] = x_1 * cos[..., 0::2] - x_2 * sin[..., 1::2]
    out[..., 1::2] = x_1 * sin[..., 1::2] + x_2 * cos[..., 0::2]
    return out.type_as(hidden_states)

NORMS = {"torch_rms_norm": torch_rms_norm, "diffusers_decomposed": diffusers_rms_norm}
ROPES = {"fp32_opmath": partial_rope_fp32_opmath, "storage_dtype": partial_rope_storage_dtype}
