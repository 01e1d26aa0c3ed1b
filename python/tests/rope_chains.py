"""The QK-norm + rotate-half RoPE chains as model code writes them, shared by the torch op tests of
fused_inplace_qknorm_rope and its forms (imported after conftest.require_cuda() where a module needs CUDA)."""

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


NORMS = {"torch_rms_norm": torch_rms_norm, "diffusers_decomposed": diffusers_rms_norm}
ROPES = {"fp32_opmath": partial_rope_fp32_opmath, "storage_dtype": partial_rope_storage_dtype}
