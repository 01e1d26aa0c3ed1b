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
usp_merge_heads = torch.ops.dfuse.usp_merge_heads  # x.permute(2, 1, 0, 3, 4).contiguous()
joint_qkv_cat = torch.ops.dfuse.joint_qkv_cat  # torch.cat([img, txt], dim=1) for each of q, k, v
pack_qkv_destination_major = torch.ops.dfuse.pack_qkv_destination_major  # Ulysses per-destination q|k|v shards
varlen_pack_qkv = torch.ops.dfuse.varlen_pack_qkv  # x.reshape(B*S, H, D).index_select(0, indices), q k v
varlen_pack_segmented_qkv = torch.ops.dfuse.varlen_pack_segmented_qkv  # the same on cat([prefix, main], 1)
varlen_scatter_to_padded = torch.ops.dfuse.varlen_scatter_to_padded  # packed rows back to [B, S, H, D]
group_limited_topk = torch.ops.dfuse.group_limited_topk  # LingBot Video expert selection (id sets)
linear_gelu_tanh = torch.ops.dfuse.linear_gelu_tanh  # F.gelu(F.linear(x, w, b), approximate="tanh"), close, extra-high
qkv_projection_into = torch.ops.dfuse.qkv_projection_into  # out.copy_(F.linear(x, w, b)), out rows of the joint QKV buffer
gate_report = torch.ops.dfuse.gate_report
op_counters = torch.ops.dfuse.op_counters  # [fused_calls, eager_calls, verifications, fallbacks]
gate_reset = torch.ops.dfuse.gate_reset

__all__ = ["modulate_scale_shift", "residual_gate_add", "silu_mul", "bias_silu", "bias_glu", "usp_merge_heads",
           "joint_qkv_cat", "pack_qkv_destination_major", "varlen_pack_qkv", "varlen_pack_segmented_qkv",
           "varlen_scatter_to_padded", "group_limited_topk", "linear_gelu_tanh", "qkv_projection_into", "gate_report",
           "op_counters", "gate_reset", "library_path"]
