"""torch.ops.dfuse, loaded from the C++ extension that python/build_torch_ext.py builds.

The library is ``$DFUSE_TORCH_LIB`` when set, else ``dfuse/_lib/dfuse_torch.so`` inside this package (the
build script's default output). The names below are the ops themselves, not Python wrappers, so a call costs
what any C++ op costs.
"""

import os
from pathlib import Path

import torch

LIBRARY_ENV = "DFUSE_TORCH_LIB"
DEFAULT_LIBRARY = Path(__file__).resolve().parent.parent / "_lib" / "dfuse_torch.so"


def library_path() -> Path:
    return Path(os.environ.get(LIBRARY_ENV) or DEFAULT_LIBRARY)


def _load() -> None:
    path = library_path()
    if not path.is_file():
        raise ImportError(
            f"dfuse: torch extension not found at {path}; build it with "
            f"`python3 python/build_torch_ext.py --cmake-build <dir with libdfuse.so>` or set {LIBRARY_ENV}"
        )
    torch.ops.load_library(str(path))


_load()

modulate_scale_shift = torch.ops.dfuse.modulate_scale_shift
residual_gate_add = torch.ops.dfuse.residual_gate_add
silu_mul = torch.ops.dfuse.silu_mul  # F.silu(a) * b
bias_silu = torch.ops.dfuse.bias_silu  # F.silu(x + bias)
bias_glu = torch.ops.dfuse.bias_glu  # h, g = (x + bias).chunk(2, dim=-1); h * F.silu(g)
gelu_tanh_cat = torch.ops.dfuse.gelu_tanh_cat  # torch.cat([attn.reshape(B, S, -1), F.gelu(mlp, approximate="tanh")], 2)
usp_merge_heads = torch.ops.dfuse.usp_merge_heads  # x.permute(2, 1, 0, 3, 4).contiguous()
joint_qkv_cat = torch.ops.dfuse.joint_qkv_cat  # torch.cat([img, txt], dim=1) for each of q, k, v
pack_qkv_destination_major = torch.ops.dfuse.pack_qkv_destination_major  # Ulysses per-destination q|k|v shards
varlen_pack_qkv = torch.ops.dfuse.varlen_pack_qkv  # x.reshape(B*S, H, D).index_select(0, indices), q k v
varlen_pack_segmented_qkv = torch.ops.dfuse.varlen_pack_segmented_qkv  # the same on cat([prefix, main], 1)
varlen_scatter_to_padded = torch.ops.dfuse.varlen_scatter_to_padded  # packed rows back to [B, S, H, D]
group_limited_topk = torch.ops.dfuse.group_limited_topk  # LingBot Video expert selection (id sets)
rope_rotate_half = torch.ops.dfuse.rope_rotate_half  # rotate-half RoPE, tail kept (math: fp32_opmath | storage_dtype)
interleaved_rope_fp64 = torch.ops.dfuse.interleaved_rope_fp64  # SANA-Video paired q/k RoPE, fp64 tables
fused_inplace_qknorm_rope = torch.ops.dfuse.fused_inplace_qknorm_rope  # QK RMSNorm + rotate-half RoPE, in place (default: one rounding, close; round_norm_before_rope=True: exact)
fused_qknorm_rope = torch.ops.dfuse.fused_qknorm_rope  # the exact QK RMSNorm + rotate-half RoPE out of place: (q_out, k_out)
fused_qknorm_rope_pack_kv = torch.ops.dfuse.fused_qknorm_rope_pack_kv  # the same, q in place, kv = stack([k_out, v], dim=-3)
ltx2_qknorm_split_rope = torch.ops.dfuse.ltx2_qknorm_split_rope  # LTX-2 QK RMSNorm over the inner dim + split RoPE, q and k
ltx25_decoder_rope = torch.ops.dfuse.ltx25_decoder_rope  # LTX-2.5 decoder 3D RoPE of q and k from per-axis tables
helios_qk_rope = torch.ops.dfuse.helios_qk_rope  # Helios paired q/k RoPE from the [B, S, 2D] cos|sin table, in place
rope_interleaved_pairs = torch.ops.dfuse.rope_interleaved_pairs  # diffusers apply_rotary_emb(use_real_unbind_dim=-1), FLUX/HunyuanVideo/LTX/CogVideoX
flux2_strided_qknorm_rope = torch.ops.dfuse.flux2_strided_qknorm_rope  # FLUX.2 single-stream norm_q/norm_k + RoPE on packed q, k views
flux2_qkv_epilogue = torch.ops.dfuse.flux2_qkv_epilogue  # FLUX.2 double-stream norms + cat([txt, img]) + RoPE of q, k, v
qwen_qkv_epilogue = torch.ops.dfuse.qwen_qkv_epilogue  # Qwen-Image QK RMSNorm + complex RoPE + cat([txt, img]) of q, k, v
hunyuan_qkv_rope_pack = torch.ops.dfuse.hunyuan_qkv_rope_pack  # HunyuanVideo QK RMSNorm + image RoPE + cat([img, txt]) of q, k, v
layernorm_modulate = torch.ops.dfuse.layernorm_modulate  # F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift
qk_head_layernorm = torch.ops.dfuse.qk_head_layernorm  # F.layer_norm on q and k heads (Dh), one launch
fp32_layernorm_bf16 = torch.ops.dfuse.fp32_layernorm_bf16  # F.layer_norm(x.float(), ...).to(x.dtype)
layernorm_folded_modulate = torch.ops.dfuse.layernorm_folded_modulate  # extra-high: F.layer_norm(x, w=1+scale, b=shift)
temb_table_slices = torch.ops.dfuse.temb_table_slices  # (table + temb.float()).chunk(6, dim=-2), dense slices
ltx2_ada_values = torch.ops.dfuse.ltx2_ada_values  # LTX-2 (table.to(dtype) + timestep.reshape(B, T, n, D)).unbind(2)
scaled_residual_bf16 = torch.ops.dfuse.scaled_residual_bf16  # (x.float() + update * gate).type_as(x)
timestep_embedding = torch.ops.dfuse.timestep_embedding  # diffusers get_timestep_embedding (close contract)
rmsnorm_scale_shift = torch.ops.dfuse.rmsnorm_scale_shift  # F.rms_norm(x, (D,), weight, eps) * (1 + scale) + shift
rmsnorm_decomposed_scale_shift = torch.ops.dfuse.rmsnorm_decomposed_scale_shift  # diffusers RMSNorm(x) * (1 + scale) + shift
qk_rmsnorm_native = torch.ops.dfuse.qk_rmsnorm_native  # (attn.norm_q(q), attn.norm_k(k)), diffusers RMSNorm(head_dim)
qk_rmsnorm = torch.ops.dfuse.qk_rmsnorm  # (F.rms_norm(q, (Dh,), q_weight, eps), F.rms_norm(k, (Dh,), k_weight, eps))
linear_gelu_tanh = torch.ops.dfuse.linear_gelu_tanh  # F.gelu(F.linear(x, w, b), approximate="tanh"), close, extra-high
qkv_projection_into = torch.ops.dfuse.qkv_projection_into  # out.copy_(F.linear(x, w, b)), out rows of the joint QKV buffer
rmsnorm_scale = torch.ops.dfuse.rmsnorm_scale  # RMSNorm(x) * scale, Z-Image's RMSNorm in x's dtype
rmsnorm_tanh_residual = torch.ops.dfuse.rmsnorm_tanh_residual  # residual + torch.tanh(gate) * RMSNorm(y)
qk_rmsnorm_storage_dtype = torch.ops.dfuse.qk_rmsnorm_storage_dtype  # (norm_q(q), norm_k(k)), Z-Image's RMSNorm in q's dtype
scale_residual_norm_scale_shift = torch.ops.dfuse.scale_residual_norm_scale_shift  # r = residual + gate * update; (r, norm(r) * (1 + scale) + shift)
norm_scale_shift = torch.ops.dfuse.norm_scale_shift  # extra-high: LN or RMSNorm + modulate, fp32 internals, one rounding
rmsnorm_modulate_fp32 = torch.ops.dfuse.rmsnorm_modulate_fp32  # extra-high: LTX-2 F.rms_norm(x) * (1 + scale) + shift, one launch
rmsnorm_tanh_residual_fp32 = torch.ops.dfuse.rmsnorm_tanh_residual_fp32  # extra-high: gate RMSNorm, fp32 internals
gate_report = torch.ops.dfuse.gate_report
op_counters = torch.ops.dfuse.op_counters  # [fused_calls, eager_calls, verifications, fallbacks]
gate_reset = torch.ops.dfuse.gate_reset

from .mount import mount  # noqa: E402  dfuse into a diffusers FluxTransformer2DModel at a quality tier

__all__ = ["modulate_scale_shift", "residual_gate_add", "silu_mul", "bias_silu", "bias_glu", "gelu_tanh_cat", "usp_merge_heads",
           "joint_qkv_cat", "pack_qkv_destination_major", "varlen_pack_qkv", "varlen_pack_segmented_qkv",
           "varlen_scatter_to_padded", "group_limited_topk", "rope_rotate_half", "interleaved_rope_fp64",
           "fused_inplace_qknorm_rope", "fused_qknorm_rope", "fused_qknorm_rope_pack_kv", "ltx2_qknorm_split_rope", "ltx25_decoder_rope", "helios_qk_rope", "rope_interleaved_pairs", "flux2_strided_qknorm_rope", "flux2_qkv_epilogue", "qwen_qkv_epilogue", "hunyuan_qkv_rope_pack", "layernorm_modulate",
           "qk_head_layernorm", "fp32_layernorm_bf16",
           "layernorm_folded_modulate",
           "temb_table_slices", "ltx2_ada_values", "scaled_residual_bf16", "timestep_embedding", "rmsnorm_scale_shift", "rmsnorm_decomposed_scale_shift", "qk_rmsnorm_native", "qk_rmsnorm",
           "rmsnorm_scale", "rmsnorm_tanh_residual", "qk_rmsnorm_storage_dtype",
           "norm_scale_shift", "rmsnorm_modulate_fp32", "rmsnorm_tanh_residual_fp32",
           "linear_gelu_tanh", "qkv_projection_into", "scale_residual_norm_scale_shift", "gate_report",
           "op_counters", "gate_reset", "library_path", "mount"]
