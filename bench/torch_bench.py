"""dfuse torch ops vs the PyTorch eager chain vs torch.compile of the chain, side by side in one run.

    python3 bench/torch_bench.py [--json OUT.json] [--iters 100] [--ops NAME ...]

Per op and model shape (bf16, eps 1e-6; FLUX.1 and Wan 2.1 14B [B, S, D] activations unless an op names its own
model shape), against the eager chain written as the model code writes it:
  elementwise: scale/shift per batch, [B,1,D]; silu_mul with separate and packed gate/up inputs; bias_silu/bias_glu
    channels last with a per-channel bias, bias_glu's x twice as wide; linear_gelu_tanh as the FFN up-projection
    D -> 4D at FLUX.1's shape; gelu_tanh_cat as FLUX.1's single-stream block tail;
  norm family: layernorm_modulate / rmsnorm_scale_shift with per-batch scale/shift; Z-Image's RMSNorm times a
    per-batch scale and as a tanh-gated residual (rmsnorm_tanh_residual, and its fp32 form); diffusers' decomposed
    RMSNorm then modulate; the gated residual then LayerNorm then modulate; the fp32 LayerNorm of a bf16 x; a
    LayerNorm per packed q/k head; norm_scale_shift (LayerNorm without and with weight and bias, RMSNorm without
    and with weight), rmsnorm_modulate_fp32 (LTX-2) and layernorm_folded_modulate against their definitions (the
    chains their Gate verifies against); qk_rmsnorm, qk_rmsnorm_native and qk_rmsnorm_storage_dtype on the q/k
    heads of 128 of one packed [B, S, 3 D] projection; temb_table_slices at Wan 2.2 TI2V's per-token temb,
    ltx2_ada_values at LTX-2's nine per-token values, scaled_residual_bf16 at Wan 2.1 14B's 21 frames with the
    fp32 per-frame gate chunked from the modulation;
  rope family: rope_rotate_half on the q heads [B, S, D/128, 128] and rope_interleaved_pairs on [B, D/128, S, 128]
    (FLUX's layout), fp32 tables; fused_qknorm_rope and the exact in-place fused_inplace_qknorm_rope on q and k
    heads of 128 sliced from one packed [B, S, 3 D] projection, F.rms_norm then the fp32 rotate-half RoPE; the
    joint-QKV epilogues of Qwen-Image (4096 + 512 tokens, complex64 tables), HunyuanVideo (720p: 32760 + 256
    tokens) and FLUX.2 klein (4096 + 512 tokens), 24 heads of 128 from separate projections; FLUX.2 klein's
    single-stream q/k views of the packed to_qkv_mlp_proj output; LTX-2's QK RMSNorm + split RoPE (6144 tokens,
    32 x 128); the LTX-2.5 decoder's 3D RoPE (16 x 32 x 48, 8 x 64); Helios' in-place q/k RoPE (8190 tokens,
    40 x 128); SANA-Video's fp64-table RoPE (480p: 2 x 8190 tokens, 20 x 112).
In-place ops (fused_inplace_qknorm_rope, helios_qk_rope) are timed overwriting their inputs, against the model's
out-of-place chain. Each (op, shape) reports the median kernel time from CUDA events, the bytes the op must move
at least (each input read once, the output written once) per second, that rate as a share of the device copy
bandwidth measured in the same run, the time of a copy moving the same bytes against the op's (the ceiling at
small sizes, where a copy itself falls short of the large copy's rate), and the speedup over eager and over
torch.compile. Inputs rotate over sets larger than twice the L2 cache so no call hits warm L2; before each timed
round the GPU sleeps while the host queues the round, so host launch cost stays out of the GPU times. The host
overhead per call is measured separately at a tiny shape with time.perf_counter. An (op, shape) that raises is
recorded as failed with its error and the run goes on; the exit status is non-zero when any failed its contract,
did not run its fused kernel, or raised.
"""

import argparse
import json
import math
import statistics
import sys
import time
import traceback
from collections import namedtuple
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python" / "tests"))

import dfuse.torch as dt  # noqa: E402
import rope_chains  # noqa: E402  the model chains the torch op tests check against
from rope_chains import (  # noqa: E402
    apply_interleaved_rotary_emb, apply_rotary_emb_transposed, decoder_chain, decoder_tables, split_rotary)

SHAPES = {"FLUX.1": (1, 4608, 3072), "Wan2.1-14B": (1, 75600, 5120)}
DTYPE = torch.bfloat16
SLEEP_CYCLES = 20_000_000  # ~10 ms at H200 clocks: ample time to queue a round
HEAD_DIM = 128


def modulate_chain(x, scale, shift):
    return x * (1 + scale) + shift


def residual_chain(residual, gate, update):
    return residual + gate * update


def silu_mul_chain(a, b):
    return F.silu(a) * b


def bias_silu_chain(x, bias):
    return F.silu(x + bias)


def bias_glu_chain(x, bias):
    h, g = (x + bias).chunk(2, dim=-1)
    return h * F.silu(g)


def rand(shape, amplitude):
    return (torch.randn(shape, device="cuda") * amplitude).to(DTYPE)


def modulate_inputs(shape):
    b, _, d = shape
    return rand(shape, 3.0), rand((b, 1, d), 0.5), rand((b, 1, d), 1.0)


def residual_inputs(shape):
    b, _, d = shape
    return rand(shape, 2.0), rand((b, 1, d), 0.5), rand(shape, 2.0)


def silu_mul_inputs(shape):
    return rand(shape, 3.0), rand(shape, 1.0)


def silu_mul_packed_inputs(shape):
    """FLUX.2's SwiGLU: the gate and up halves of one packed [.., 2D] projection, as strided views."""
    return tuple(rand(shape[:-1] + (2 * shape[-1],), 3.0).chunk(2, dim=-1))


def bias_silu_inputs(shape):
    return rand(shape, 3.0), rand(shape[-1:], 1.0)


def bias_glu_inputs(shape):
    """x [.., 2D] and bias [2D]; the output has `shape`."""
    return rand(shape[:-1] + (2 * shape[-1],), 3.0), rand((2 * shape[-1],), 1.0)


def linear_gelu_chain(x, weight, bias):
    return F.gelu(F.linear(x, weight, bias), approximate="tanh")


def linear_gelu_inputs(shape):
    """The FFN up-projection of a block with hidden size D: x [B, S, D], weight [4D, D], bias [4D]."""
    d = shape[-1]
    return rand(shape, 1.0), rand((4 * d, d), 1 / math.sqrt(d)), rand((4 * d,), 0.5)


EPS = 1e-6


def eps_after(op, count):
    """op(*tensors[:count], EPS, *tensors[count:]): a dfuse op called with EPS where its schema puts eps."""
    return lambda *tensors: op(*tensors[:count], EPS, *tensors[count:])


def layernorm_modulate_chain(x, scale, shift):
    return F.layer_norm(x, (x.shape[-1],), eps=EPS) * (1 + scale) + shift


def layernorm_folded_chain(x, scale, shift):
    """layernorm_folded_modulate's definition: LayerNorm's affine step does the modulate."""
    d = x.shape[-1]
    return F.layer_norm(x, (d,), (1 + scale).reshape(d), shift.reshape(d), EPS)


def rmsnorm_scale_shift_chain(x, weight, scale, shift):
    return F.rms_norm(x, (x.shape[-1],), weight, EPS) * (1 + scale) + shift


def rmsnorm_inputs(shape):
    b, _, d = shape
    return rand(shape, 3.0), rand((d,), 1.0), rand((b, 1, d), 0.5), rand((b, 1, d), 1.0)


def torch_rms_norm(x, weight):
    """torch.nn.RMSNorm (F.rms_norm)."""
    return F.rms_norm(x, (x.shape[-1],), weight, EPS)


def diffusers_rms_norm(x, weight):
    """diffusers.models.normalization.RMSNorm.forward (not on NPU)."""
    return rope_chains.diffusers_rms_norm(x, weight, EPS)


def zimage_rms_norm(x, weight):
    """Z-Image's RMSNorm (rmsnorm_scale, rmsnorm_tanh_residual): every op in x's dtype."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def rmsnorm_scale_chain(x, weight, scale):
    return zimage_rms_norm(x, weight) * scale


def rmsnorm_tanh_residual_chain(residual, gate, y, weight):
    return residual + torch.tanh(gate) * zimage_rms_norm(y, weight)


def rmsnorm_tanh_residual_inputs(shape):
    b, _, d = shape
    return rand(shape, 2.0), rand((b, 1, d), 1.0), rand(shape, 3.0), rand((d,), 1.0)


def rmsnorm_scale_inputs(shape):
    b, _, d = shape
    return rand(shape, 3.0), rand((d,), 1.0), rand((b, 1, d), 1.0)


def rmsnorm_decomposed_chain(x, weight, scale, shift):
    """diffusers' RMSNorm (x.float().pow(2).mean(-1), rsqrt, cast to the weight's dtype, * weight), then modulate."""
    return diffusers_rms_norm(x, weight) * (1 + scale) + shift


def scale_residual_chain(residual, gate, update, scale, shift):
    r = residual + gate * update
    return r, F.layer_norm(r, (r.shape[-1],), eps=EPS) * (1 + scale) + shift


def scale_residual_inputs(shape):
    b, _, d = shape
    return rand(shape, 2.0), rand((b, 1, d), 0.5), rand(shape, 2.0), rand((b, 1, d), 0.5), rand((b, 1, d), 1.0)


def fp32_layernorm_chain(x, weight, bias):
    return F.layer_norm(x.float(), (x.shape[-1],), weight, bias, EPS).to(x.dtype)


def fp32_layernorm_inputs(shape):
    d = shape[-1]
    return rand(shape, 3.0), torch.randn((d,), device="cuda"), torch.randn((d,), device="cuda")


# ---- the request-gated norms with fp32 internals, against their definitions (the chains on float copies, rounded
# once: what their Gate verifies against) -----------------------------------------------------------------------


def float_copy(t):
    return None if t is None else t.float()


def fp32_modulate(n, x, scale, shift):
    """(n * (1 + scale.float()) + shift.float()).type_as(x) for a float n."""
    return (n * (1 + scale.float()) + shift.float()).type_as(x)


def fp32_layer_norm_scale_shift_chain(x, scale, shift, weight=None, bias=None):
    """norm_scale_shift's definition for norm="layer_norm": Wan's (self.norm1(x.float()) * (1 + scale) + shift)
    .type_as(x), the affine as float copies."""
    n = F.layer_norm(x.float(), (x.shape[-1],), float_copy(weight), float_copy(bias), EPS)
    return fp32_modulate(n, x, scale, shift)


def fp32_rms_norm_scale_shift_chain(x, scale, shift, weight=None):
    """norm_scale_shift's definition for norm="rms_norm": the same with F.rms_norm."""
    return fp32_modulate(F.rms_norm(x.float(), (x.shape[-1],), float_copy(weight), EPS), x, scale, shift)


def norm_scale_shift_op(norm):
    """dt.norm_scale_shift with `norm`, the affine (weight, then bias) after scale and shift."""
    def op(x, scale, shift, weight=None, bias=None):
        return dt.norm_scale_shift(x, scale, shift, norm, weight, bias, EPS)
    return op


def affine_modulate_inputs(count):
    """modulate_inputs, then the norm's weight [D] (count 1) and bias [D] (count 2)."""
    def inputs(shape):
        d = shape[-1]
        affine = (rand((d,), 0.3) + 1.0, rand((d,), 0.5))
        return modulate_inputs(shape) + affine[:count]
    return inputs


def ltx2_rmsnorm_modulate_fp32_chain(x, scale, shift, weight):
    """rmsnorm_modulate_fp32's definition: LTX-2's self.norm1(x) * (1 + scale) + shift, diffusers' RMSNorm, on float
    copies, rounded once."""
    return fp32_modulate(diffusers_rms_norm(x.float(), weight.float()), x, scale, shift)


def rmsnorm_tanh_residual_fp32_chain(residual, gate, y, weight):
    """rmsnorm_tanh_residual_fp32's definition: Z-Image's residual + tanh(gate) * RMSNorm(y) on float copies,
    rounded once."""
    return (residual.float() + torch.tanh(gate.float()) * zimage_rms_norm(y.float(), weight.float())).to(y.dtype)


# ---- per-head norms on q and k -------------------------------------------------------------------------------


def packed_qk(shape):
    """q and k as the [B, S, H, 128] slots of one packed [B, S, 3 D] projection (strided views)."""
    b, s, d = shape
    q, k, _ = rand((b, s, 3 * d), 3.0).view(b, s, 3, d // HEAD_DIM, HEAD_DIM).unbind(2)
    return q, k


def qk_head_layernorm_chain(q, k, q_weight, q_bias, k_weight, k_bias):
    return (F.layer_norm(q, (q.shape[-1],), q_weight, q_bias, EPS),
            F.layer_norm(k, (k.shape[-1],), k_weight, k_bias, EPS))


def qk_head_layernorm_inputs(shape):
    """packed_qk, affine weights and biases [128]."""
    return (*packed_qk(shape), rand((HEAD_DIM,), 1.0), rand((HEAD_DIM,), 0.5), rand((HEAD_DIM,), 1.0),
            rand((HEAD_DIM,), 0.5))


def qk_rmsnorm_chain(q, k, q_weight, k_weight):
    """norm_q(q), norm_k(k) with torch.nn.RMSNorm(head_dim)."""
    return torch_rms_norm(q, q_weight), torch_rms_norm(k, k_weight)


def qk_rmsnorm_native_chain(q, k, q_weight, k_weight):
    """norm_q(q), norm_k(k) with diffusers' RMSNorm(head_dim)."""
    return diffusers_rms_norm(q, q_weight), diffusers_rms_norm(k, k_weight)


def qk_rmsnorm_storage_dtype_chain(q, k, q_weight, k_weight):
    """norm_q(q), norm_k(k) with Z-Image's RMSNorm."""
    return zimage_rms_norm(q, q_weight), zimage_rms_norm(k, k_weight)


def qk_rmsnorm_inputs(shape):
    """packed_qk, norm weights [128]."""
    return (*packed_qk(shape), rand((HEAD_DIM,), 0.3) + 1.0, rand((HEAD_DIM,), 0.3) + 1.0)


# ---- adaLN values -----------------------------------------------------------------------------------------------


def temb_table_slices_chain(scale_shift_table, temb):
    """diffusers WanTransformerBlock with a per-token temb [B, S, 6, D] (Wan 2.2 TI2V)."""
    return (scale_shift_table.unsqueeze(0) + temb.float()).chunk(6, dim=2)


def temb_table_slices_op(scale_shift_table, temb):
    """The op takes the table as the block unsqueezes it, [1, 1, 6, D]."""
    return dt.temb_table_slices(scale_shift_table.unsqueeze(0), temb)


def temb_table_slices_inputs(shape):
    """The fp32 scale_shift_table [1, 6, D] and a per-token temb [B, S, 6, D] for shape (B, S, D)."""
    b, s, d = shape
    return torch.randn((1, 6, d), device="cuda") / math.sqrt(d), rand((b, s, 6 * d), 1.0).unflatten(2, (6, -1))


def ltx2_ada_values_chain(scale_shift_table, timestep):
    """ltx_core BasicAVTransformerBlock.get_ada_values with indices = slice(None)."""
    batch_size = timestep.shape[0]
    num_ada_params = scale_shift_table.shape[0]
    return (scale_shift_table.unsqueeze(0).unsqueeze(0).to(device=timestep.device, dtype=timestep.dtype)
            + timestep.reshape(batch_size, timestep.shape[1], num_ada_params, -1)).unbind(dim=2)


def ltx2_ada_values_inputs(shape):
    """The table [n, D] in the timestep's dtype and the per-token timestep [B, T, n D] for shape (B, T, n, D)."""
    b, t, n, d = shape
    return (torch.randn((n, d), device="cuda") / math.sqrt(d)).to(DTYPE), rand((b, t, n * d), 1.0)


def scaled_residual_bf16_chain(x, update, gate):
    """A Wan-style block residual (LingBot World): bf16 hidden states, fp32 gate, cast back."""
    return (x.float() + update * gate).type_as(x)


def scaled_residual_bf16_inputs(shape):
    """x, update [B, F, HW, D] and the fp32 per-frame gate [B, F, 1, D] as the block hands it over: chunk 2 of
    (modulation + e).chunk(6, dim=2), a strided view."""
    b, f, _, d = shape
    modulation = torch.randn((1, 1, 6, d), device="cuda") + torch.randn((b, f, 6, d), device="cuda")
    return rand(shape, 3.0), rand(shape, 1.0), modulation.chunk(6, dim=2)[2]


# ---- rope family --------------------------------------------------------------------------------------------------


def rope_chain(x, cos, sin):
    """diffusers apply_rotary_emb(use_real=True, use_real_unbind_dim=-2) on x [B, S, H, D], with fp32 tables
    already broadcast as [1, S, 1, D]."""
    x_real, x_imag = x.reshape(*x.shape[:-1], 2, -1).unbind(-2)
    x_rotated = torch.cat([-x_imag, x_real], dim=-1)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def rope_inputs(shape):
    """q of a [B, S, H * 128] projection as [B, S, H, 128], with fp32 cos/sin tables [1, S, 1, 128]."""
    b, s, d = shape
    angles = torch.rand((1, s, 1, HEAD_DIM), device="cuda") * 6.28
    return rand((b, s, d // HEAD_DIM, HEAD_DIM), 1.0), angles.cos(), angles.sin()


def flux_rope_chain(x, cos, sin):
    """diffusers apply_rotary_emb(use_real=True, use_real_unbind_dim=-1) (FLUX.1) on x [B, H, S, D], with fp32
    tables already broadcast as [1, 1, S, D]."""
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def flux_rope_inputs(shape):
    """q as FLUX's attention holds it, [B, H, S, 128] (transposed from a [B, S, H * 128] projection)."""
    b, s, d = shape
    angles = torch.rand((1, 1, s, HEAD_DIM // 2), device="cuda").repeat_interleave(2, dim=-1) * 6.28
    return rand((b, s, d // HEAD_DIM, HEAD_DIM), 1.0).transpose(1, 2), angles.cos(), angles.sin()


def sequence_dim_1_rope(x, cos, sin):
    """diffusers apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-1, sequence_dim=1) on
    x [B, S, H, D] with tables [S, D] (HunyuanVideo, FLUX.2)."""
    return flux_rope_chain(x, cos[None, :, None, :], sin[None, :, None, :])


def gelu_tanh_cat_chain(attn, mlp):
    """FLUX.1's single-stream block tail: the processor's reshape of the attention heads, then the cat with the
    tanh-GELU of the MLP projection."""
    return torch.cat([attn.reshape(attn.shape[0], attn.shape[1], -1), F.gelu(mlp, approximate="tanh")], dim=2)


def gelu_tanh_cat_inputs(shape):
    """The attention output [B, H, S, 128] as the processor holds it ([B, S, H, 128], transposed) and the
    [B, S, 4 D] MLP projection."""
    b, s, d = shape
    return rand((b, d // HEAD_DIM, s, HEAD_DIM), 1.0).transpose(1, 2), rand((b, s, 4 * d), 2.0)


def qknorm_rope_chain(q, k, q_weight, k_weight, cos, sin):
    """QK RMSNorm (torch.nn.RMSNorm, F.rms_norm) then the rotate-half RoPE in fp32 (diffusers' x.float() * cos
    + rotate_half(x).float() * sin, rounded once), on q and k: fused_qknorm_rope's exact chain."""
    def one(x, w):
        n = torch_rms_norm(x, w)
        n1, n2 = n.chunk(2, dim=-1)
        return (n.float() * cos + torch.cat((-n2, n1), dim=-1).float() * sin).to(n.dtype)
    return one(q, q_weight), one(k, k_weight)


def qknorm_rope_op(q, k, q_weight, k_weight, cos, sin):
    return dt.fused_qknorm_rope(q, k, q_weight, k_weight, EPS, cos, sin, "torch_rms_norm", "fp32_opmath")


def inplace_qknorm_rope_op(q, k, q_weight, k_weight, cos, sin):
    """The exact in-place form, q and k overwritten with qknorm_rope_chain's result. Repeated calls keep them
    finite: the RMSNorm rescales every head row on each call."""
    dt.fused_inplace_qknorm_rope(q, k, q_weight, k_weight, EPS, cos, sin, "torch_rms_norm", "fp32_opmath",
                                 round_norm_before_rope=True)
    return q, k


def qknorm_rope_inputs(shape):
    """packed_qk, weights [128], fp32 rotate-half tables [S, 1, 128]."""
    s = shape[1]
    angles = (torch.rand((s, 1, HEAD_DIM // 2), device="cuda") * 6.28).repeat(1, 1, 2)
    return (*packed_qk(shape), rand((HEAD_DIM,), 1.0), rand((HEAD_DIM,), 1.0), angles.cos(), angles.sin())


def rope_angles(tokens):
    return torch.rand((tokens, HEAD_DIM // 2), device="cuda") * 6.28


def pair_tables(tokens):
    """cos, sin fp32 [S, 128], each frequency repeated for its pair (HunyuanVideo's and FLUX.2's tables)."""
    angles = rope_angles(tokens)
    return angles.cos().repeat_interleave(2, dim=-1), angles.sin().repeat_interleave(2, dim=-1)


def qwen_freqs(tokens):
    """complex64 [S, 64] of unit magnitude, as QwenEmbedRope builds them (torch.polar of the angles)."""
    angles = rope_angles(tokens)
    return torch.polar(torch.ones_like(angles), angles)


def projection_heads(b, s, h):
    """q, k, v [B, S, H, 128] of separate projections (to_q, to_k, to_v), unflattened to heads."""
    return tuple(rand((b, s, h, HEAD_DIM), 3.0) for _ in range(3))


def joint_qkv_inputs(tables):
    """Inputs of a joint-QKV epilogue at shape (B, image tokens, text tokens, heads): image q, k, v, text q, k, v,
    the four RMSNorm weights [128] (norm_q, norm_k, norm_added_q, norm_added_k), then tables(image tokens, text
    tokens)."""
    def inputs(shape):
        b, s_img, s_txt, h = shape
        weights = tuple(rand((HEAD_DIM,), 0.5) + 1.0 for _ in range(4))
        return (*projection_heads(b, s_img, h), *projection_heads(b, s_txt, h), *weights, *tables(s_img, s_txt))
    return inputs


def apply_rotary_emb_qwen(x, freqs_cis):
    """transformer_qwenimage.apply_rotary_emb_qwen(x, freqs_cis, use_real=False)."""
    x_rotated = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    freqs_cis = freqs_cis.unsqueeze(1)
    x_out = torch.view_as_real(x_rotated * freqs_cis).flatten(3)
    return x_out.type_as(x)


def qwen_qkv_chain(img_q, img_k, img_v, txt_q, txt_k, txt_v, wq, wk, waq, wak, img_freqs, txt_freqs):
    """QwenDoubleStreamAttnProcessor2_0 between the projections and attention."""
    img_q, img_k = diffusers_rms_norm(img_q, wq), diffusers_rms_norm(img_k, wk)
    txt_q, txt_k = diffusers_rms_norm(txt_q, waq), diffusers_rms_norm(txt_k, wak)
    img_q, img_k = apply_rotary_emb_qwen(img_q, img_freqs), apply_rotary_emb_qwen(img_k, img_freqs)
    txt_q, txt_k = apply_rotary_emb_qwen(txt_q, txt_freqs), apply_rotary_emb_qwen(txt_k, txt_freqs)
    return torch.cat([txt_q, img_q], dim=1), torch.cat([txt_k, img_k], dim=1), torch.cat([txt_v, img_v], dim=1)


def qwen_tables(s_img, s_txt):
    return qwen_freqs(s_img), qwen_freqs(s_txt)


def hunyuan_qkv_chain(img_q, img_k, img_v, txt_q, txt_k, txt_v, wq, wk, waq, wak, cos, sin):
    """HunyuanVideoAttnProcessor2_0 between the projections and attention: RoPE on the image q and k only."""
    img_q, img_k = diffusers_rms_norm(img_q, wq), diffusers_rms_norm(img_k, wk)
    img_q, img_k = sequence_dim_1_rope(img_q, cos, sin), sequence_dim_1_rope(img_k, cos, sin)
    txt_q, txt_k = diffusers_rms_norm(txt_q, waq), diffusers_rms_norm(txt_k, wak)
    return torch.cat([img_q, txt_q], dim=1), torch.cat([img_k, txt_k], dim=1), torch.cat([img_v, txt_v], dim=1)


def hunyuan_tables(s_img, s_txt):
    """cos, sin of the image tokens."""
    return pair_tables(s_img)


def flux2_qkv_chain(query, key, value, encoder_query, encoder_key, encoder_value, q_weight, k_weight,
                    added_q_weight, added_k_weight, cos, sin):
    """Flux2AttnProcessor (double-stream block) after the projections."""
    query, key = torch_rms_norm(query, q_weight), torch_rms_norm(key, k_weight)
    encoder_query = torch_rms_norm(encoder_query, added_q_weight)
    encoder_key = torch_rms_norm(encoder_key, added_k_weight)
    query = torch.cat([encoder_query, query], dim=1)
    key = torch.cat([encoder_key, key], dim=1)
    value = torch.cat([encoder_value, value], dim=1)
    return sequence_dim_1_rope(query, cos, sin), sequence_dim_1_rope(key, cos, sin), value


def flux2_joint_tables(s_img, s_txt):
    """cos, sin of the joint text + image tokens."""
    return pair_tables(s_txt + s_img)


def flux2_strided_chain(query, key, q_weight, k_weight, cos, sin):
    """Flux2ParallelSelfAttnProcessor (single-stream block): norm_q / norm_k (torch.nn.RMSNorm), then the RoPE."""
    query, key = torch_rms_norm(query, q_weight), torch_rms_norm(key, k_weight)
    return sequence_dim_1_rope(query, cos, sin), sequence_dim_1_rope(key, cos, sin)


def flux2_strided_inputs(shape):
    """query and key at shape (B, S, heads, MLP columns): [B, S, H, 128] views of the packed to_qkv_mlp_proj
    output [B, S, 3 H 128 + MLP] (the processor's split into qkv and mlp, qkv.chunk(3, -1), unflatten to
    heads), weights [128], cos, sin [S, 128]."""
    b, s, h, mlp = shape
    qkv_dim = 3 * h * HEAD_DIM
    qkv, _ = rand((b, s, qkv_dim + mlp), 3.0).split([qkv_dim, mlp], dim=-1)
    query, key, _ = (t.unflatten(-1, (-1, HEAD_DIM)) for t in qkv.chunk(3, dim=-1))
    return (query, key, rand((HEAD_DIM,), 1.0), rand((HEAD_DIM,), 1.0), *pair_tables(s))


def ltx2_split_rope_chain(q, k, q_weight, k_weight, cos, sin):
    """LTX2AudioVideoAttnProcessor (rope_type="split", self-attention): norm_q / norm_k (torch.nn.RMSNorm over
    heads * head_dim), then apply_split_rotary_emb with q's tables on both."""
    return (split_rotary(torch_rms_norm(q, q_weight), (cos, sin)),
            split_rotary(torch_rms_norm(k, k_weight), (cos, sin)))


def ltx2_split_rope_inputs(shape):
    """q, k [B, S, H * D] at shape (B, S, H, D), the norms' weights [H * D], and cos, sin as
    LTX2AudioVideoRotaryPosEmbed returns them for rope_type="split": fp32 [B, H, S, D/2] swapaxes(1, 2) views."""
    b, s, h, d = shape
    freqs = torch.rand((b, s, h * (d // 2)), device="cuda") * 6.0 - 3.0
    cos, sin = (t.reshape(b, s, h, -1).swapaxes(1, 2) for t in (freqs.cos(), freqs.sin()))
    c = h * d
    return rand((b, s, c), 3.0), rand((b, s, c), 3.0), rand((c,), 0.5) + 1.0, rand((c,), 0.5) + 1.0, cos, sin


def ltx25_decoder_chain(q, k, *tables):
    return decoder_chain(q, tables), decoder_chain(k, tables)


def ltx25_decoder_inputs(shape):
    """q, k [B, T, H, W, heads, D] and the six per-axis tables (cos_t, sin_t, cos_h, sin_h, cos_w, sin_w)."""
    _, t, h, w, _, d = shape
    return (rand(shape, 3.0), rand(shape, 3.0), *decoder_tables(t, h, w, d))


def helios_chain(q, k, freqs):
    return apply_rotary_emb_transposed(q, freqs), apply_rotary_emb_transposed(k, freqs)


def helios_op(q, k, freqs):
    """q and k overwritten with helios_chain's result. Repeated calls rotate them again by the same angles, which
    keeps their magnitudes."""
    dt.helios_qk_rope(q, k, freqs)
    return q, k


def helios_inputs(shape):
    """q, k [B, S, heads, D] and the [B, S, 2D] cos|sin table, each frequency repeated twice, as HeliosRotaryPosEmbed
    builds it and the model hands it to the blocks (contiguous)."""
    b, s, _, d = shape
    freqs = (torch.rand((b, d // 2, s), device="cuda") * 50.0).repeat_interleave(2, dim=1)
    table = torch.cat([freqs.cos(), freqs.sin()], dim=1).transpose(1, 2).contiguous()
    return rand(shape, 3.0), rand(shape, 3.0), table


def interleaved_rope_fp64_chain(q, k, freqs_cos, freqs_sin):
    return apply_interleaved_rotary_emb(q, freqs_cos, freqs_sin), apply_interleaved_rotary_emb(k, freqs_cos, freqs_sin)


def sana_inputs(shape):
    """q, k [B, S, H, D] and SANA-Video style fp64 tables [1, S, 1, D], each frequency repeated for its pair."""
    _, s, _, d = shape
    inv = 1.0 / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64, device="cuda") / d)
    freqs = torch.outer(torch.arange(s, dtype=torch.float64, device="cuda") * 0.37, inv)
    cos, sin = (t.repeat_interleave(2, dim=-1)[None, :, None, :] for t in (freqs.cos(), freqs.sin()))
    return rand(shape, 3.0), rand(shape, 3.0), cos, sin


# Same-size integer dtypes, to compare bits (-0/+0 and NaN payloads count).
BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bitwise_equal(out, ref):
    if isinstance(out, (tuple, list)):
        return all(bitwise_equal(o, r) for o, r in zip(out, ref, strict=True))
    if out.dtype != ref.dtype or out.shape != ref.shape:
        return False
    bits = BITS[out.element_size()]
    return bool(torch.equal(out.view(bits), ref.view(bits)))


def within_linear_gelu_bound(out, ref, x, weight, bias):
    """linear_gelu_tanh's close contract (dfuse/ops/gemm.h): |out - eager| <= 2^-7 |eager| + 2^-8 |h| +
    3 K 2^-24 a + tiny, h = x W^T + b and a = |x| |W|^T + |b| in fp32."""
    h = F.linear(x.float(), weight.float(), bias.float())
    a = F.linear(x.float().abs(), weight.float().abs(), bias.float().abs())
    tiny = torch.finfo(out.dtype).smallest_normal * torch.finfo(out.dtype).eps  # the smallest subnormal
    bound = ref.float().abs() * 2**-7 + h.abs() * 2**-8 + a * (3 * x.shape[-1] * 2**-24) + tiny
    return bool(((out.float() - ref.float()).abs() <= bound).all())


# An op's benchmark: the dfuse op, its eager chain, inputs for a shape, the contract check
# (out, ref, *inputs) -> bool, and the shapes it runs at. A name's first word is the op. An in-place op's entry
# returns the tensors it overwrote; its chain is the model's out-of-place chain, which writes fresh outputs and
# leaves the inputs as they are (bench_op takes the chain's reference before the op's first call).
Op = namedtuple("Op", "op chain inputs check shapes", defaults=(None, None))
FLUX1 = {"FLUX.1": SHAPES["FLUX.1"]}
OPS = {
    "modulate_scale_shift": Op(dt.modulate_scale_shift, modulate_chain, modulate_inputs),
    "residual_gate_add": Op(dt.residual_gate_add, residual_chain, residual_inputs),
    "silu_mul": Op(dt.silu_mul, silu_mul_chain, silu_mul_inputs),
    "silu_mul packed": Op(dt.silu_mul, silu_mul_chain, silu_mul_packed_inputs),
    "bias_silu": Op(dt.bias_silu, bias_silu_chain, bias_silu_inputs),
    "bias_glu": Op(dt.bias_glu, bias_glu_chain, bias_glu_inputs),
    "layernorm_modulate": Op(dt.layernorm_modulate, layernorm_modulate_chain, modulate_inputs),
    "layernorm_folded_modulate": Op(eps_after(dt.layernorm_folded_modulate, 3), layernorm_folded_chain,
                                    modulate_inputs),
    "rmsnorm_scale_shift": Op(dt.rmsnorm_scale_shift, rmsnorm_scale_shift_chain, rmsnorm_inputs),
    "rmsnorm_scale": Op(dt.rmsnorm_scale, rmsnorm_scale_chain, rmsnorm_scale_inputs),
    "rmsnorm_tanh_residual": Op(dt.rmsnorm_tanh_residual, rmsnorm_tanh_residual_chain, rmsnorm_tanh_residual_inputs),
    "rmsnorm_tanh_residual_fp32": Op(eps_after(dt.rmsnorm_tanh_residual_fp32, 4), rmsnorm_tanh_residual_fp32_chain,
                                     rmsnorm_tanh_residual_inputs),
    "rmsnorm_decomposed_scale_shift": Op(dt.rmsnorm_decomposed_scale_shift, rmsnorm_decomposed_chain, rmsnorm_inputs),
    "norm_scale_shift layer_norm": Op(norm_scale_shift_op("layer_norm"), fp32_layer_norm_scale_shift_chain,
                                      modulate_inputs),
    "norm_scale_shift layer_norm affine": Op(norm_scale_shift_op("layer_norm"), fp32_layer_norm_scale_shift_chain,
                                             affine_modulate_inputs(2)),
    "norm_scale_shift rms_norm": Op(norm_scale_shift_op("rms_norm"), fp32_rms_norm_scale_shift_chain,
                                    modulate_inputs),
    "norm_scale_shift rms_norm weight": Op(norm_scale_shift_op("rms_norm"), fp32_rms_norm_scale_shift_chain,
                                           affine_modulate_inputs(1)),
    "rmsnorm_modulate_fp32": Op(eps_after(dt.rmsnorm_modulate_fp32, 4), ltx2_rmsnorm_modulate_fp32_chain,
                                affine_modulate_inputs(1)),
    "scale_residual_norm_scale_shift": Op(dt.scale_residual_norm_scale_shift, scale_residual_chain,
                                          scale_residual_inputs),
    "fp32_layernorm_bf16": Op(eps_after(dt.fp32_layernorm_bf16, 3), fp32_layernorm_chain, fp32_layernorm_inputs),
    "qk_head_layernorm": Op(eps_after(dt.qk_head_layernorm, 6), qk_head_layernorm_chain, qk_head_layernorm_inputs),
    "qk_rmsnorm": Op(eps_after(dt.qk_rmsnorm, 4), qk_rmsnorm_chain, qk_rmsnorm_inputs),
    "qk_rmsnorm_native": Op(eps_after(dt.qk_rmsnorm_native, 4), qk_rmsnorm_native_chain, qk_rmsnorm_inputs),
    "qk_rmsnorm_storage_dtype": Op(eps_after(dt.qk_rmsnorm_storage_dtype, 4), qk_rmsnorm_storage_dtype_chain,
                                   qk_rmsnorm_inputs),
    # (B, S, D): Wan 2.2 TI2V 5B at 704p, 121 frames, its per-token temb.
    "temb_table_slices": Op(temb_table_slices_op, temb_table_slices_chain, temb_table_slices_inputs, None,
                            {"Wan2.2-TI2V-5B": (1, 27280, 3072)}),
    # (B, T, n, D): LTX-2's nine values per token at 768x512, 121 frames.
    "ltx2_ada_values": Op(dt.ltx2_ada_values, ltx2_ada_values_chain, ltx2_ada_values_inputs, None,
                          {"LTX-2": (1, 6144, 9, 4096)}),
    # (B, F, HW, D): SHAPES' Wan 2.1 14B tokens as its 21 latent frames of 45 x 80.
    "scaled_residual_bf16": Op(dt.scaled_residual_bf16, scaled_residual_bf16_chain, scaled_residual_bf16_inputs,
                               None, {"Wan2.1-14B": (1, 21, 3600, 5120)}),
    "rope_rotate_half": Op(dt.rope_rotate_half, rope_chain, rope_inputs),
    "rope_interleaved_pairs": Op(dt.rope_interleaved_pairs, flux_rope_chain, flux_rope_inputs),
    "fused_qknorm_rope": Op(qknorm_rope_op, qknorm_rope_chain, qknorm_rope_inputs),
    "fused_inplace_qknorm_rope": Op(inplace_qknorm_rope_op, qknorm_rope_chain, qknorm_rope_inputs),
    # (B, image tokens, text tokens, heads)
    "qwen_qkv_epilogue": Op(eps_after(dt.qwen_qkv_epilogue, 10), qwen_qkv_chain, joint_qkv_inputs(qwen_tables),
                            None, {"Qwen-Image": (1, 4096, 512, 24)}),
    "hunyuan_qkv_rope_pack": Op(eps_after(dt.hunyuan_qkv_rope_pack, 10), hunyuan_qkv_chain,
                                joint_qkv_inputs(hunyuan_tables), None, {"HunyuanVideo-720p": (1, 32760, 256, 24)}),
    "flux2_qkv_epilogue": Op(eps_after(dt.flux2_qkv_epilogue, 10), flux2_qkv_chain,
                             joint_qkv_inputs(flux2_joint_tables), None, {"FLUX.2-klein": (1, 4096, 512, 24)}),
    # (B, S, heads, MLP columns): 4096 image + 512 text tokens, the MLP input 2 x mlp_ratio 3 x 3072.
    "flux2_strided_qknorm_rope": Op(eps_after(dt.flux2_strided_qknorm_rope, 4), flux2_strided_chain,
                                    flux2_strided_inputs, None, {"FLUX.2-klein": (1, 4608, 24, 18432)}),
    # (B, S, heads, head dim)
    "ltx2_qknorm_split_rope": Op(eps_after(dt.ltx2_qknorm_split_rope, 4), ltx2_split_rope_chain,
                                 ltx2_split_rope_inputs, None, {"LTX-2": (1, 6144, 32, 128)}),
    # (B, T, H, W, heads, head dim)
    "ltx25_decoder_rope": Op(dt.ltx25_decoder_rope, ltx25_decoder_chain, ltx25_decoder_inputs, None,
                             {"LTX-2.5-decoder": (1, 16, 32, 48, 8, 64)}),
    "helios_qk_rope": Op(helios_op, helios_chain, helios_inputs, None, {"Helios": (1, 8190, 40, 128)}),
    "interleaved_rope_fp64": Op(dt.interleaved_rope_fp64, interleaved_rope_fp64_chain, sana_inputs, None,
                                {"SANA-Video-480p": (2, 8190, 20, 112)}),
    "gelu_tanh_cat": Op(dt.gelu_tanh_cat, gelu_tanh_cat_chain, gelu_tanh_cat_inputs, None, FLUX1),
    # A GEMM: its GB/s column is not a roofline; its time is.
    "linear_gelu_tanh": Op(dt.linear_gelu_tanh, linear_gelu_chain, linear_gelu_inputs, within_linear_gelu_bound,
                           FLUX1),
}
# Ops that run through the first-sight Gate, which counts their fused calls.
GATED = {"modulate_scale_shift", "residual_gate_add", "silu_mul", "bias_silu", "bias_glu", "layernorm_modulate",
         "rmsnorm_scale_shift", "rope_rotate_half", "rope_interleaved_pairs", "gelu_tanh_cat", "fused_qknorm_rope",
         "rmsnorm_scale", "rmsnorm_tanh_residual", "rmsnorm_decomposed_scale_shift", "scale_residual_norm_scale_shift",
         "fp32_layernorm_bf16", "qk_head_layernorm", "layernorm_folded_modulate", "rmsnorm_tanh_residual_fp32",
         "norm_scale_shift", "rmsnorm_modulate_fp32", "qk_rmsnorm", "qk_rmsnorm_native", "qk_rmsnorm_storage_dtype",
         "temb_table_slices", "ltx2_ada_values", "scaled_residual_bf16", "fused_inplace_qknorm_rope",
         "qwen_qkv_epilogue", "hunyuan_qkv_rope_pack", "flux2_qkv_epilogue", "flux2_strided_qknorm_rope",
         "ltx2_qknorm_split_rope", "ltx25_decoder_rope", "helios_qk_rope", "interleaved_rope_fp64"}


def nbytes(t):
    """Bytes of a tensor, or of each tensor of a tuple of outputs."""
    if isinstance(t, (tuple, list)):
        return sum(nbytes(x) for x in t)
    return t.numel() * t.element_size()


def time_calls(fn, arg_sets, iters):
    """Median GPU microseconds of one fn(*args) call, rotating over arg_sets."""
    for args in arg_sets:  # warm-up: first-sight verification, compilation, allocator
        fn(*args)
    torch.cuda.synchronize()
    times = []
    per_round = max(len(arg_sets), 16)
    for _ in range(math.ceil(iters / per_round)):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(per_round)]
        torch.cuda._sleep(SLEEP_CYCLES)
        for i, (start, stop) in enumerate(events):
            args = arg_sets[i % len(arg_sets)]
            start.record()
            fn(*args)
            stop.record()
        torch.cuda.synchronize()
        times += [start.elapsed_time(stop) * 1e3 for start, stop in events]
    return statistics.median(times)


def copy_bandwidth(l2_bytes, iters):
    """Device copy bandwidth in GB/s: bytes read plus written by dst.copy_(src), src far larger than L2."""
    n = max(1 << 30, 8 * l2_bytes)
    src = torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1)
    dst = torch.empty_like(src)
    us = time_calls(lambda: dst.copy_(src), [()], iters)
    return 2 * n / (us * 1e3), us


def same_size_copy_us(moved, l2_bytes, iters):
    """Median us of a device copy moving `moved` bytes (half read, half written), over buffer pairs larger than
    2x L2 together: what a copy achieves at the op's own size, where launch and ramp-up weigh more."""
    half = max(1, moved // 2)
    count = max(1, math.ceil(2 * l2_bytes / moved))
    pairs = [(torch.empty(half, dtype=torch.uint8, device="cuda"), torch.empty(half, dtype=torch.uint8, device="cuda"))
             for _ in range(count)]
    return time_calls(lambda dst, src: dst.copy_(src), pairs, iters)


def bench_op(name, shape_name, shape, l2_bytes, copy_gbs, iters):
    op, chain, make_inputs, check, _ = OPS[name]
    first = make_inputs(shape)
    ref = chain(*first)  # before the op: an in-place op overwrites its inputs
    out = op(*first)
    meets_contract = check(out, ref, *first) if check else bitwise_equal(out, ref)
    moved = sum(nbytes(t) for t in first) + nbytes(out)
    input_bytes = sum(nbytes(t) for t in first)
    sets = [first] + [make_inputs(shape) for _ in range(max(1, math.ceil(2 * l2_bytes / input_bytes)))]
    op_name = name.split()[0]
    fused_before = dt.op_counters(op_name)[0] if op_name in GATED else 0
    compiled = torch.compile(chain, fullgraph=True, dynamic=False)
    us = {
        "dfuse": time_calls(op, sets, iters),
        "eager": time_calls(chain, sets, iters),
        "compile": time_calls(compiled, sets, iters),
    }
    copy_us = same_size_copy_us(moved, l2_bytes, iters)
    rows = []
    for impl, t in us.items():
        gbs = moved / (t * 1e3)
        rows.append({
            "op": name, "shape": shape_name, "dims": list(shape), "impl": impl, "median_us": t, "gb_s": gbs,
            "pct_copy_bw": 100 * gbs / copy_gbs, "same_size_copy_us": copy_us,
            "pct_same_size_copy": 100 * copy_us / t, "speedup_vs_eager": us["eager"] / t,
            "speedup_vs_compile": us["compile"] / t, "bytes": moved, "input_sets": len(sets),
        })
    # Ops without a Gate (close contracts) have no counters: they ran fused when the result differs
    # from the chain's, which the fallback would reproduce bit for bit.
    gated = op_name in GATED
    fused_ran = dt.op_counters(op_name)[0] > fused_before if gated else not bitwise_equal(out, ref)
    return rows, {"op": name, "shape": shape_name, "meets_contract": meets_contract, "fused_kernel_ran": fused_ran}


def host_overhead(calls):
    """Host microseconds per back-to-back call (no sync inside the loop) at a tiny shape."""
    x, scale, shift = (torch.randn((1, 8, 64), device="cuda").to(DTYPE) for _ in range(3))
    candidates = {
        "torch.ops.dfuse.modulate_scale_shift": lambda: torch.ops.dfuse.modulate_scale_shift(x, scale, shift),
        "torch.ops.aten.add.Tensor": lambda: torch.ops.aten.add.Tensor(x, scale),
        "eager chain x*(1+scale)+shift": lambda: modulate_chain(x, scale, shift),
    }
    result = {}
    for label, fn in candidates.items():
        for _ in range(200):
            fn()
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        result[label] = (time.perf_counter() - start) / calls * 1e6
        torch.cuda.synchronize()
    return result


def markdown(rows, copy_gbs, overhead):
    lines = [f"device copy bandwidth: {copy_gbs:.0f} GB/s (read + write)", "",
             "| op | shape | impl | median us | GB/s | % copy BW | % same-size copy | vs eager | vs compile |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['shape']} {tuple(r['dims'])} | {r['impl']} | {r['median_us']:.1f} | "
                     f"{r['gb_s']:.0f} | {r['pct_copy_bw']:.1f} | {r['pct_same_size_copy']:.1f} | {r['speedup_vs_eager']:.2f}x | "
                     f"{r['speedup_vs_compile']:.2f}x |")
    lines += ["", "| host overhead per call (1x8x64 bf16) | us |", "|---|---:|"]
    lines += [f"| {label} | {us:.2f} |" for label, us in overhead.items()]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--iters", type=int, default=100, help="timed calls per implementation and shape")
    parser.add_argument("--host-calls", type=int, default=20000, help="calls for the host overhead loop")
    parser.add_argument("--ops", nargs="+", choices=list(OPS), default=list(OPS), metavar="NAME",
                        help="benchmark only these (default: all of " + ", ".join(OPS) + ")")
    args = parser.parse_args()

    props = torch.cuda.get_device_properties(0)
    l2_bytes = props.L2_cache_size
    copy_gbs, copy_us = copy_bandwidth(l2_bytes, args.iters)
    rows, checks = [], []
    for name in args.ops:
        for shape_name, shape in (OPS[name].shapes or SHAPES).items():
            # One (op, shape) that raises is recorded as failed; the others' results stay.
            try:
                op_rows, op_check = bench_op(name, shape_name, shape, l2_bytes, copy_gbs, args.iters)
            except Exception as error:
                traceback.print_exc()
                op_rows = []
                op_check = {"op": name, "shape": shape_name, "meets_contract": False, "fused_kernel_ran": False,
                            "error": f"{type(error).__name__}: {error}"}
                print(f"{name} {shape_name}: raised {op_check['error']}")
            rows += op_rows
            checks.append(op_check)
            torch.cuda.empty_cache()
    overhead = host_overhead(args.host_calls)

    for c in checks:
        if "error" in c:
            print(f"{c['op']} {c['shape']}: failed: {c['error']}")
            continue
        print(f"{c['op']} {c['shape']}: meets its contract against eager: {c['meets_contract']}, "
              f"fused kernel ran: {c['fused_kernel_ran']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "device": props.name, "sm": f"{props.major}.{props.minor}", "l2_bytes": l2_bytes,
            "torch": torch.__version__, "dtype": str(DTYPE), "copy_gb_s": copy_gbs, "copy_us": copy_us,
            "results": rows, "checks": checks, "host_overhead_us": overhead, "gate_report": dt.gate_report(),
        }, indent=2))
    print(markdown(rows, copy_gbs, overhead))
    return 0 if all(c["meets_contract"] and c["fused_kernel_ran"] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
