"""dfuse.torch.mount: the dfuse ops mounted into diffusers' FluxTransformer2DModel (FLUX.1).

    handle = dfuse.torch.mount(transformer, quality="lossless")
    with handle.batch():                     # or handle.batch("extra-high")
        noise_pred = transformer(...)
    print(handle.report())
    handle.unmount()

Mounting marks the transformer's fusion sites once (the Python counterpart of dfuse::MountPlan,
include/dfuse/policy/mount_plan.h) and replaces the forwards of FluxTransformerBlock,
FluxSingleTransformerBlock, the output AdaLayerNormContinuous and the FluxAttnProcessor of each
attention with copies of the diffusers code that call a per-site callable where a fusion site is.
Everything else in those forwards is the diffusers code, op for op, so that a site left on its
chain computes exactly what diffusers computes.

Sites (per block; names as in the module tree, e.g. "transformer_blocks.3.norm1"):
  family                     tier        op                                  where
  layernorm_modulate         lossless    diffusion.layernorm_modulate        norm(x) * (1 + scale) + shift of
                                                                             norm1, norm1_context, norm2,
                                                                             norm2_context, the single block's
                                                                             norm and norm_out
  residual_gate_add          lossless    diffusion.residual_gate_add         residual + gate * update (four per
                                                                             double block, one per single block)
  qk_rmsnorm                 lossless    diffusion.qk_rmsnorm (torch.nn.RMSNorm norm_q/norm_k) or
                                         diffusion.qk_rmsnorm_native (diffusers RMSNorm)
                                                                             norm_q/norm_k, norm_added_q/norm_added_k
  rope_interleaved_pairs     lossless    diffusion.rope_interleaved_pairs    apply_rotary_emb on query and key
  gelu_tanh_cat              lossless    diffusion.gelu_tanh_cat             the single block's
                                                                             cat([attn_output, act_mlp(proj_mlp(x))]),
                                                                             attention heads merged by the cat's copy
  layernorm_folded_modulate  extra-high  diffusion.layernorm_folded_modulate the LN sites as
                                                                             layer_norm(weight=1+scale, bias=shift)
  linear_gelu_tanh           extra-high  diffusion.linear_gelu_tanh          the FFN / proj_mlp up-projection with
                                                                             its tanh-GELU
At extra-high the folded LayerNorm replaces layernorm_modulate, and linear_gelu_tanh replaces gelu_tanh_cat's
GELU (the cat stays), at the sites both cover. "high" adds
nothing for FLUX.1 (it has no model-owned high-only optimization) and runs the extra-high set.

Rules (the spec's, as MountPlan implements them): a family is fused on all of its sites or on none
(one site failing its static guard at mount time keeps its whole family off); quality changes only
between batches (set_quality inside an open batch raises); the batch key includes the quality, so
requests of different quality are never batched together; request-gated families cannot run under
captured CUDA graphs (declared with cuda_graphs=True or set_graph_capture, or detected at the
forward): the graph would replay the branches captured at warm-up.

Which callable each site calls is decided when the quality is set, not per call. The first call of
each fused site in each batch is a probe: it reads the op's Gate counters (dfuse::Gate, the ops'
first-sight verification) before and after, and records whether the site ran fused (verified now
or earlier), fell back (bitwise mismatch at first sight, with the Gate's reason) or ran the chain
inside the op (the op's guards refused the inputs). Later calls of that batch only count: a
verified signature stays fused and a disabled one stays on the chain, so the counts are the Gate's
decisions as long as a site's input signature does not change within a batch; report() checks the
sites' fused calls against the Gate's own per-op totals.

On a CPU model the sites are mounted but every bit-exact op runs the aten chain inside the op: dfuse's
host kernels reproduce PyTorch's CUDA arithmetic, not aten's CPU kernels, so a first-sight check on
CPU would not prove the next input (python/dfuse/csrc/gate_runner.h); the report says "chain".
"""

from __future__ import annotations

import contextlib
import functools
import types
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

QUALITIES = ("lossless", "extra-high", "high")
_RANK = {q: i for i, q in enumerate(QUALITIES)}

# Site states in a report.
OFF = "off"              # not fused at this quality; `reason` says why
PENDING = "pending"      # fused at this quality, not called since the quality was set
VERIFIED = "verified"    # fused; the Gate verified this signature bitwise on this site's first call
FUSED = "fused"          # fused; the signature had been verified earlier
FELL_BACK = "fell back"  # the Gate disabled the signature (mismatch or exception): the chain runs
CHAIN = "chain"          # the op's guards refused these inputs: the op ran the chain (no Gate entry)
MIXED = "mixed"          # a site of several op calls where some ran fused and some did not
UNCOUNTED = "uncounted"  # the op has no Gate counters (close-contract op); see reason

HIGH_NOTE = ("high: FLUX.1 has no model-owned high-only optimization, so high mounts the same sites as "
             "extra-high")


def _dfuse_ops():
    import dfuse.torch as dt  # the op library (a function-level import: dfuse.torch imports this module)

    return dt


def _parse_quality(q: str) -> str:
    if q not in _RANK:
        raise ValueError(f"dfuse.torch.mount: unknown quality {q!r}; valid: {', '.join(QUALITIES)}")
    return q


@dataclass
class Site:
    """One fusion site, marked at mount time. Counts are since mount, in calls of the site (a RoPE
    site is one call that runs the op twice, for query and key)."""

    name: str
    family: str
    op: str  # "diffusion.layernorm_modulate"
    tier: str
    contract: str  # "bit-exact" or "close"
    op_calls: int = 1  # op calls per site call
    reject_reason: str = ""  # static guard failure at mount time; empty when eligible
    fused: bool = False  # the family is fused at the current quality
    state: str = OFF
    reason: str = ""
    fused_calls: int = 0  # calls the Gate counted as fused
    chain_calls: int = 0  # calls that ran the eager chain (in the op or in place of it)
    unproven_calls: int = 0  # calls of an op without Gate counters (see UNCOUNTED)
    verifications: int = 0
    fallbacks: int = 0
    through_gate: bool = True  # the op runs through the Gate (first-sight verification, counters)


@dataclass
class OpTotals:
    """An op's Gate counters since mount, and what the sites account for."""

    op: str
    fused_calls: int
    eager_calls: int
    verifications: int
    fallbacks: int
    site_fused_calls: int  # sum over the sites of fused site calls x op calls per site call

    @property
    def consistent(self) -> bool:
        return self.fused_calls == self.site_fused_calls


@dataclass
class Report:
    model: str
    quality: str
    batch_open: bool
    graph_capture: bool
    sites: list[Site]
    ops: list[OpTotals]
    rejected_families: list[tuple[str, str]]
    notes: list[str] = field(default_factory=list)

    def site(self, name: str) -> Site:
        for s in self.sites:
            if s.name == name:
                return s
        raise KeyError(f"no fusion site {name!r}")

    def __str__(self) -> str:
        head = (f'dfuse mount "{self.model}": quality {self.quality}, '
                f'{"batch open" if self.batch_open else "no batch open"}'
                f'{", CUDA graph capture on" if self.graph_capture else ""}')
        rows = [("site", "family", "op", "tier", "contract", "state", "fused", "chain", "uncounted", "verif",
                 "fallb", "reason")]
        for s in self.sites:
            rows.append((s.name, s.family, s.op, s.tier, s.contract, s.state, str(s.fused_calls),
                         str(s.chain_calls), str(s.unproven_calls), str(s.verifications), str(s.fallbacks),
                         s.reason or "-"))
        lines = [head, *_table(rows), ""]
        rows = [("op", "Gate fused", "Gate eager", "verifications", "fallbacks", "fused by sites", "check")]
        for o in self.ops:
            rows.append((o.op, str(o.fused_calls), str(o.eager_calls), str(o.verifications), str(o.fallbacks),
                         str(o.site_fused_calls), "ok" if o.consistent else "MISMATCH"))
        lines += ["Gate counters since mount (all callers of the op in this process):", *_table(rows)]
        for family, why in self.rejected_families:
            lines.append(f"family {family} off: {why}")
        lines += self.notes
        return "\n".join(lines)


def _table(rows):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


# ---- the per-site callables --------------------------------------------------------------------


def _layernorm_modulate_chain(norm: nn.Module) -> Callable:
    # diffusers: self.norm(x) * (1 + scale_msa[:, None]) + shift_msa[:, None]
    def chain(x, scale, shift):
        return norm(x) * (1 + scale) + shift

    return chain


def _residual_gate_chain(residual, gate, update):
    # diffusers: attn_output = gate_msa.unsqueeze(1) * attn_output; hidden_states = hidden_states + attn_output
    return residual + gate * update


def _qk_norm_chain(norm_q: nn.Module, norm_k: nn.Module) -> Callable:
    def chain(query, key):
        return norm_q(query), norm_k(key)

    return chain


def _rope_chain() -> Callable:
    from diffusers.models.transformers.transformer_flux import apply_rotary_emb

    def chain(query, key, image_rotary_emb):
        return (apply_rotary_emb(query, image_rotary_emb, sequence_dim=1),
                apply_rotary_emb(key, image_rotary_emb, sequence_dim=1))

    return chain


def _rope_fused(op) -> Callable:
    # apply_rotary_emb(x, (cos, sin), sequence_dim=1) broadcasts cos[None, :, None, :] over [B, S, H, D].
    def fused(query, key, image_rotary_emb):
        cos, sin = image_rotary_emb
        cos = cos[None, :, None, :]
        sin = sin[None, :, None, :]
        return op(query, cos, sin), op(key, cos, sin)

    return fused


def _gelu_up_fused(op, proj: nn.Linear, tail: list[nn.Module]) -> Callable:
    # F.gelu(proj(x), approximate="tanh"), then the modules after it (FeedForward's dropout and down-projection)
    def fused(x):
        x = op(x, proj.weight, proj.bias)
        for module in tail:
            x = module(x)
        return x

    return fused


def _merged_heads(attn_output):
    # The processor's hidden_states.flatten(2, 3) of the attention's [B, S, H, D] heads (a copy); a processor
    # the mount did not replace has already merged them.
    return attn_output.flatten(2, 3) if attn_output.dim() == 4 else attn_output


def _single_mlp_cat_chain(proj_mlp: nn.Module, act_mlp: nn.Module) -> Callable:
    # The single block's torch.cat([attn_output, act_mlp(proj_mlp(x))], dim=2)
    def chain(attn_output, x):
        return torch.cat([_merged_heads(attn_output), act_mlp(proj_mlp(x))], dim=2)

    return chain


def _single_mlp_cat_fused(op, proj_mlp: nn.Linear) -> Callable:
    # GELU and cat in one op, the heads merged by the copy into the cat (lossless)
    def fused(attn_output, x):
        return op(attn_output, proj_mlp(x))

    return fused


def _single_mlp_gelu_up_fused(op, proj_mlp: nn.Linear) -> Callable:
    # The up-projection with its GELU in the GEMM epilogue, then the cat (extra-high)
    def fused(attn_output, x):
        return torch.cat([_merged_heads(attn_output), op(x, proj_mlp.weight, proj_mlp.bias)], dim=2)

    return fused


# ---- the mounted forwards: the diffusers code with the sites' callables -------------------------


def _double_block_forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None,
                          joint_attention_kwargs=None):
    s = self._dfuse_sites
    # self.norm1(hidden_states, emb=temb), AdaLayerNormZero, with its LayerNorm + modulate as a site
    emb = self.norm1.linear(self.norm1.silu(temb))
    shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp = emb.chunk(6, dim=1)
    norm_hidden_states = s.norm1(hidden_states, scale_msa[:, None], shift_msa[:, None])

    emb = self.norm1_context.linear(self.norm1_context.silu(temb))
    c_shift_msa, c_scale_msa, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = emb.chunk(6, dim=1)
    norm_encoder_hidden_states = s.norm1_context(encoder_hidden_states, c_scale_msa[:, None], c_shift_msa[:, None])
    joint_attention_kwargs = joint_attention_kwargs or {}

    # Attention.
    attention_outputs = self.attn(
        hidden_states=norm_hidden_states,
        encoder_hidden_states=norm_encoder_hidden_states,
        image_rotary_emb=image_rotary_emb,
        **joint_attention_kwargs,
    )

    if len(attention_outputs) == 2:
        attn_output, context_attn_output = attention_outputs
    elif len(attention_outputs) == 3:
        attn_output, context_attn_output, ip_attn_output = attention_outputs

    # Process attention outputs for the `hidden_states`.
    hidden_states = s.attn_residual(hidden_states, gate_msa.unsqueeze(1), attn_output)

    norm_hidden_states = s.norm2(hidden_states, scale_mlp[:, None], shift_mlp[:, None])

    ff_output = s.ff(norm_hidden_states)
    hidden_states = s.ff_residual(hidden_states, gate_mlp.unsqueeze(1), ff_output)
    if len(attention_outputs) == 3:
        hidden_states = hidden_states + ip_attn_output

    # Process attention outputs for the `encoder_hidden_states`.
    encoder_hidden_states = s.context_attn_residual(encoder_hidden_states, c_gate_msa.unsqueeze(1),
                                                    context_attn_output)

    norm_encoder_hidden_states = s.norm2_context(encoder_hidden_states, c_scale_mlp[:, None], c_shift_mlp[:, None])

    context_ff_output = s.ff_context(norm_encoder_hidden_states)
    encoder_hidden_states = s.context_ff_residual(encoder_hidden_states, c_gate_mlp.unsqueeze(1), context_ff_output)
    if encoder_hidden_states.dtype == torch.float16:
        encoder_hidden_states = encoder_hidden_states.clip(-65504, 65504)

    return encoder_hidden_states, hidden_states


def _single_block_forward(self, hidden_states, encoder_hidden_states, temb, image_rotary_emb=None,
                          joint_attention_kwargs=None):
    s = self._dfuse_sites
    text_seq_len = encoder_hidden_states.shape[1]
    hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

    residual = hidden_states
    # self.norm(hidden_states, emb=temb), AdaLayerNormZeroSingle
    emb = self.norm.linear(self.norm.silu(temb))
    shift_msa, scale_msa, gate = emb.chunk(3, dim=1)
    norm_hidden_states = s.norm(hidden_states, scale_msa[:, None], shift_msa[:, None])
    joint_attention_kwargs = joint_attention_kwargs or {}
    attn_output = self.attn(
        hidden_states=norm_hidden_states,
        image_rotary_emb=image_rotary_emb,
        **joint_attention_kwargs,
    )

    # torch.cat([attn_output, self.act_mlp(self.proj_mlp(norm_hidden_states))], dim=2); the mounted processor
    # leaves the attention's heads unmerged for this site.
    hidden_states = s.mlp_cat(attn_output, norm_hidden_states)
    gate = gate.unsqueeze(1)
    hidden_states = s.residual(residual, gate, self.proj_out(hidden_states))
    if hidden_states.dtype == torch.float16:
        hidden_states = hidden_states.clip(-65504, 65504)

    encoder_hidden_states, hidden_states = hidden_states[:, :text_seq_len], hidden_states[:, text_seq_len:]
    return encoder_hidden_states, hidden_states


def _norm_out_forward(self, x, conditioning_embedding):
    # AdaLayerNormContinuous: x = self.norm(x) * (1 + scale)[:, None, :] + shift[:, None, :]
    emb = self.linear(self.silu(conditioning_embedding).to(x.dtype))
    scale, shift = torch.chunk(emb, 2, dim=1)
    return self._dfuse_sites.norm_out(x, scale[:, None, :], shift[:, None, :])


class MountedFluxAttnProcessor:
    """diffusers' FluxAttnProcessor with its QK RMSNorm and RoPE as fusion sites."""

    def __init__(self, original, sites, unmerged_heads=False):
        from diffusers.models.transformers import transformer_flux

        self.original = original
        self.sites = sites
        # A single block's attention (no encoder states) returns its [B, S, H, D] heads to the mounted block
        # forward, whose mlp_cat site merges them.
        self.unmerged_heads = unmerged_heads
        self._attention_backend = original._attention_backend
        self._parallel_config = original._parallel_config
        # The functions FluxAttnProcessor calls, bound once rather than imported per call.
        self._get_qkv_projections = transformer_flux._get_qkv_projections
        self._dispatch_attention_fn = transformer_flux.dispatch_attention_fn

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None, image_rotary_emb=None):
        s = self.sites
        query, key, value, encoder_query, encoder_key, encoder_value = self._get_qkv_projections(
            attn, hidden_states, encoder_hidden_states
        )

        query = query.unflatten(-1, (-1, attn.head_dim))
        key = key.unflatten(-1, (-1, attn.head_dim))
        value = value.unflatten(-1, (-1, attn.head_dim))

        query, key = s.norm_qk(query, key)

        if attn.added_kv_proj_dim is not None:
            encoder_query = encoder_query.unflatten(-1, (-1, attn.head_dim))
            encoder_key = encoder_key.unflatten(-1, (-1, attn.head_dim))
            encoder_value = encoder_value.unflatten(-1, (-1, attn.head_dim))

            encoder_query, encoder_key = s.norm_added_qk(encoder_query, encoder_key)

            query = torch.cat([encoder_query, query], dim=1)
            key = torch.cat([encoder_key, key], dim=1)
            value = torch.cat([encoder_value, value], dim=1)

        if image_rotary_emb is not None:
            query, key = s.rope(query, key, image_rotary_emb)

        hidden_states = self._dispatch_attention_fn(
            query,
            key,
            value,
            attn_mask=attention_mask,
            backend=self._attention_backend,
            parallel_config=self._parallel_config,
        )
        if encoder_hidden_states is None and self.unmerged_heads:
            return hidden_states.to(query.dtype)
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)

        if encoder_hidden_states is not None:
            encoder_hidden_states, hidden_states = hidden_states.split_with_sizes(
                [encoder_hidden_states.shape[1], hidden_states.shape[1] - encoder_hidden_states.shape[1]], dim=1
            )
            hidden_states = attn.to_out[0](hidden_states.contiguous())
            hidden_states = attn.to_out[1](hidden_states)
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states.contiguous())

            return hidden_states, encoder_hidden_states
        else:
            return hidden_states


# ---- static guards (mount time) ----------------------------------------------------------------


def _module_guard(module, expected_cls) -> str:
    """A module whose forward the mount replaces: exactly the diffusers class, forward not already patched."""
    if type(module) is not expected_cls:
        return f"{type(module).__name__} is not diffusers' {expected_cls.__name__}"
    if "forward" in vars(module):
        return "its forward is already replaced on the instance (a diffusers hook or another patch)"
    return ""


def _affine_free_layernorm(norm) -> str:
    if not isinstance(norm, nn.LayerNorm):
        return f"the norm is {type(norm).__name__}, not nn.LayerNorm"
    if norm.weight is not None or norm.bias is not None:
        return "the LayerNorm has an affine weight or bias"
    if len(norm.normalized_shape) != 1:
        return f"the LayerNorm normalizes over {tuple(norm.normalized_shape)}, not the last dim"
    return ""


def _ada_layernorm_zero(ada, expected_cls) -> str:
    if type(ada) is not expected_cls:
        return f"{type(ada).__name__} is not diffusers' {expected_cls.__name__}"
    if getattr(ada, "emb", None) is not None:
        return "AdaLayerNormZero with its own class-label embedding"
    return _affine_free_layernorm(ada.norm)


def _qk_norm_op(norm_q, norm_k, head_dim) -> tuple[str, str]:
    """(op, reject reason) for a pair of per-head RMSNorms."""
    from diffusers.models.normalization import RMSNorm as DiffusersRMSNorm

    if type(norm_q) is not type(norm_k):
        return "", f"norm_q is {type(norm_q).__name__} and norm_k {type(norm_k).__name__}"
    if type(norm_q) is nn.RMSNorm:
        op = "diffusion.qk_rmsnorm"
        if tuple(norm_q.normalized_shape) != (head_dim,) or tuple(norm_k.normalized_shape) != (head_dim,):
            return op, "the RMSNorms do not normalize over head_dim"
    elif type(norm_q) is DiffusersRMSNorm:
        op = "diffusion.qk_rmsnorm_native"
        if norm_q.bias is not None or norm_k.bias is not None:
            return op, "diffusers RMSNorm with a bias"
    else:
        return "", f"norm_q is {type(norm_q).__name__}, neither torch.nn.RMSNorm nor diffusers' RMSNorm"
    if norm_q.eps is None or norm_q.eps != norm_k.eps:
        return op, f"norm_q and norm_k need one explicit eps (got {norm_q.eps} and {norm_k.eps})"
    if (norm_q.weight is None) != (norm_k.weight is None):
        return op, "only one of norm_q and norm_k has a weight"
    return op, ""


def _processor_guard(attn) -> str:
    from diffusers.models.transformers.transformer_flux import FluxAttnProcessor

    if type(attn.processor) is not FluxAttnProcessor:
        return f"the attention processor is {type(attn.processor).__name__}, not FluxAttnProcessor"
    return ""


def _gelu_tanh_up_guard(ff) -> str:
    from diffusers.models.activations import GELU

    first = ff.net[0]
    if type(first) is not GELU or first.approximate != "tanh":
        return f"the FeedForward's first module is {type(first).__name__}, not GELU(approximate='tanh')"
    if not isinstance(first.proj, nn.Linear):
        return "the GELU's projection is not nn.Linear"
    return ""


# ---- the plan ----------------------------------------------------------------------------------


@dataclass
class _Slot:
    """A call site in a mounted forward: `ns.<attr>` is what the forward calls there. `candidates`
    are (site, fused callable) in preference order (highest tier first); `chain` runs otherwise."""

    ns: types.SimpleNamespace
    attr: str
    chain: Callable
    candidates: list


class FluxMount:
    """The handle `mount` returns."""

    def __init__(self, transformer, quality: str, name: str | None, cuda_graphs: bool, exclude=()):
        from diffusers.models.transformers.transformer_flux import FluxTransformer2DModel

        if not isinstance(transformer, FluxTransformer2DModel):
            raise TypeError(f"dfuse.torch.mount: expected diffusers' FluxTransformer2DModel, got "
                            f"{type(transformer).__name__}")
        if getattr(transformer, "_dfuse_mount", None) is not None:
            raise RuntimeError("dfuse.torch.mount: this transformer is already mounted; unmount() it first")
        self._ops = _dfuse_ops()
        self.transformer = transformer
        self.model = name or getattr(transformer.config, "_name_or_path", "") or type(transformer).__name__
        self._quality = _parse_quality(quality)
        self._graph_capture = bool(cuda_graphs)
        self._batch_open = False
        self._mounted = True
        self._sites: list[Site] = []
        self._slots: list[_Slot] = []
        self._restore: list[Callable] = []  # undo actions, run in reverse by unmount()
        self._capture_hook = None
        self._gate_at_mount: dict[str, list[int]] = {}
        self._excluded = tuple(exclude)
        try:
            self._mark_sites()
            families = sorted({s.family for s in self._sites})
            unknown = [f for f in self._excluded if f not in families]
            if unknown:
                raise ValueError(f"dfuse.torch.mount: unknown families to exclude {unknown}; this model's families: "
                                 f"{', '.join(families)}")
            for op in sorted({s.op for s in self._sites}):
                self._gate_at_mount[op] = list(self._ops.op_counters(op))
            transformer._dfuse_mount = self
            self._restore.append(lambda: delattr(transformer, "_dfuse_mount"))
            self._apply(self._quality)
        except BaseException:
            self._undo()  # a refused mount leaves the model as it was
            raise

    # -- marking -------------------------------------------------------------------------------

    def _site(self, name, family, op, tier, contract, reject_reason, op_calls=1, through_gate=True) -> Site:
        if any(s.name == name for s in self._sites):
            raise ValueError(f"dfuse.torch.mount: duplicate fusion site {name!r}")
        for s in self._sites:
            if s.family == family and s.tier != tier:
                raise ValueError(f"dfuse.torch.mount: family {family} at tiers {s.tier} and {tier}")
        site = Site(name, family, op, tier, contract, op_calls, reject_reason, through_gate=through_gate)
        self._sites.append(site)
        return site

    def _ln_slot(self, ns, attr, site_name, norm, reject):
        ops = self._ops
        eps = float(norm.eps) if isinstance(norm, nn.LayerNorm) else 0.0
        lossless = self._site(site_name, "layernorm_modulate", "diffusion.layernorm_modulate", "lossless",
                              "bit-exact", reject)
        folded = self._site(site_name + " [folded]", "layernorm_folded_modulate",
                            "diffusion.layernorm_folded_modulate", "extra-high", "close", reject)
        self._slots.append(_Slot(ns, attr, _layernorm_modulate_chain(norm), [
            (folded, functools.partial(ops.layernorm_folded_modulate, eps=eps)),
            (lossless, functools.partial(ops.layernorm_modulate, eps=eps)),
        ]))

    def _residual_slot(self, ns, attr, site_name, reject):
        site = self._site(site_name, "residual_gate_add", "diffusion.residual_gate_add", "lossless", "bit-exact",
                          reject)
        self._slots.append(_Slot(ns, attr, _residual_gate_chain, [(site, self._ops.residual_gate_add)]))

    def _qk_slot(self, ns, attr, site_name, norm_q, norm_k, head_dim, reject):
        op, why = _qk_norm_op(norm_q, norm_k, head_dim)
        site = self._site(site_name, "qk_rmsnorm", op or "diffusion.qk_rmsnorm", "lossless", "bit-exact",
                          reject or why)
        candidates = []
        if op and not (reject or why):
            fn = self._ops.qk_rmsnorm if op == "diffusion.qk_rmsnorm" else self._ops.qk_rmsnorm_native
            candidates.append((site, functools.partial(fn, q_weight=norm_q.weight, k_weight=norm_k.weight,
                                                       eps=float(norm_q.eps))))
        self._slots.append(_Slot(ns, attr, _qk_norm_chain(norm_q, norm_k), candidates))

    def _attention_sites(self, prefix, attn, block_reject, unmerged_heads=False):
        reject = block_reject or _processor_guard(attn)
        ns = types.SimpleNamespace()
        self._qk_slot(ns, "norm_qk", prefix + "attn.norm_qk", attn.norm_q, attn.norm_k, attn.head_dim, reject)
        if attn.added_kv_proj_dim is not None:
            self._qk_slot(ns, "norm_added_qk", prefix + "attn.norm_added_qk", attn.norm_added_q,
                          attn.norm_added_k, attn.head_dim, reject)
        rope = self._site(prefix + "attn.rope", "rope_interleaved_pairs", "diffusion.rope_interleaved_pairs",
                          "lossless", "bit-exact", reject, op_calls=2)
        self._slots.append(_Slot(ns, "rope", _rope_chain(), [(rope, _rope_fused(self._ops.rope_interleaved_pairs))]))
        if not reject:
            original = attn.processor
            attn.set_processor(MountedFluxAttnProcessor(original, ns, unmerged_heads))
            self._restore.append(lambda: attn.set_processor(original))

    def _mount_forward(self, module, forward, ns):
        module._dfuse_sites = ns
        module.forward = types.MethodType(forward, module)

        def restore():
            del module.forward
            del module._dfuse_sites

        self._restore.append(restore)

    def _mark_sites(self):
        from diffusers.models.normalization import AdaLayerNormContinuous, AdaLayerNormZero, AdaLayerNormZeroSingle
        from diffusers.models.transformers.transformer_flux import FluxSingleTransformerBlock, FluxTransformerBlock

        ops = self._ops
        for i, block in enumerate(self.transformer.transformer_blocks):
            p = f"transformer_blocks.{i}."
            block_reject = _module_guard(block, FluxTransformerBlock)
            ns = types.SimpleNamespace()
            for attr in ("norm1", "norm1_context"):
                ada = getattr(block, attr)
                self._ln_slot(ns, attr, p + attr, ada.norm,
                              block_reject or _ada_layernorm_zero(ada, AdaLayerNormZero))
            for attr in ("norm2", "norm2_context"):
                norm = getattr(block, attr)
                self._ln_slot(ns, attr, p + attr, norm, block_reject or _affine_free_layernorm(norm))
            for attr in ("attn_residual", "ff_residual", "context_attn_residual", "context_ff_residual"):
                self._residual_slot(ns, attr, p + attr, block_reject)
            for attr in ("ff", "ff_context"):
                ff = getattr(block, attr)
                why = block_reject or _gelu_tanh_up_guard(ff)
                site = self._site(p + attr + ".net.0", "linear_gelu_tanh", "diffusion.linear_gelu_tanh",
                                  "extra-high", "close", why, through_gate=False)
                candidates = [] if why else [
                    (site, _gelu_up_fused(ops.linear_gelu_tanh, ff.net[0].proj, list(ff.net[1:])))]
                self._slots.append(_Slot(ns, attr, ff, candidates))
            self._attention_sites(p, block.attn, block_reject)
            if not block_reject:
                self._mount_forward(block, _double_block_forward, ns)

        for i, block in enumerate(self.transformer.single_transformer_blocks):
            p = f"single_transformer_blocks.{i}."
            block_reject = _module_guard(block, FluxSingleTransformerBlock)
            ns = types.SimpleNamespace()
            self._ln_slot(ns, "norm", p + "norm", block.norm.norm,
                          block_reject or _ada_layernorm_zero(block.norm, AdaLayerNormZeroSingle))
            self._residual_slot(ns, "residual", p + "residual", block_reject)
            why = block_reject
            if not why and not (type(block.act_mlp) is nn.GELU and block.act_mlp.approximate == "tanh"):
                why = f"act_mlp is {block.act_mlp!r}, not nn.GELU(approximate='tanh')"
            if not why and not isinstance(block.proj_mlp, nn.Linear):
                why = "proj_mlp is not nn.Linear"
            gelu_up = self._site(p + "proj_mlp", "linear_gelu_tanh", "diffusion.linear_gelu_tanh", "extra-high",
                                 "close", why, through_gate=False)
            mlp_cat = self._site(p + "mlp_cat", "gelu_tanh_cat", "diffusion.gelu_tanh_cat", "lossless", "bit-exact",
                                 why)
            candidates = [] if why else [
                (gelu_up, _single_mlp_gelu_up_fused(ops.linear_gelu_tanh, block.proj_mlp)),
                (mlp_cat, _single_mlp_cat_fused(ops.gelu_tanh_cat, block.proj_mlp)),
            ]
            self._slots.append(_Slot(ns, "mlp_cat", _single_mlp_cat_chain(block.proj_mlp, block.act_mlp),
                                     candidates))
            self._attention_sites(p, block.attn, block_reject, unmerged_heads=not block_reject)
            if not block_reject:
                self._mount_forward(block, _single_block_forward, ns)

        norm_out = self.transformer.norm_out
        why = _module_guard(norm_out, AdaLayerNormContinuous)
        ns = types.SimpleNamespace()
        self._ln_slot(ns, "norm_out", "norm_out", norm_out.norm, why or _affine_free_layernorm(norm_out.norm))
        if not why:
            self._mount_forward(norm_out, _norm_out_forward, ns)

    # -- switching -----------------------------------------------------------------------------

    def _check_mounted(self):
        if not self._mounted:
            raise RuntimeError("dfuse.torch.mount: this handle was unmounted")

    def _device(self) -> torch.device:
        return next(self.transformer.parameters()).device

    def _family_off(self) -> dict[str, str]:
        """Why each family that cannot be fused is off, whatever the quality: a site failed its static guard
        (all-or-nothing)."""
        off = {family: "excluded at mount" for family in self._excluded}
        for s in self._sites:
            if s.reject_reason and s.family not in off:
                off[s.family] = f"site {s.name} failed ({s.reject_reason})"
        return off

    def _fused_families(self, quality: str) -> tuple[set, list]:
        """Families fused at `quality` and the request-gated ones among them (MountPlan::begin_batch)."""
        off = self._family_off()
        fused, request_gated = set(), []
        for s in self._sites:
            if s.family in fused or s.family in off or _RANK[s.tier] > _RANK[quality]:
                continue
            fused.add(s.family)
            if s.tier != "lossless":
                request_gated.append(s.family)
        return fused, request_gated

    def _graph_error(self, quality: str, request_gated: list) -> str:
        return (f'dfuse mount "{self.model}": quality {quality} cannot be used with captured CUDA graphs: its '
                f"request-gated fusions ({', '.join(request_gated)}) would be bypassed, since the graph replays the "
                f"branches captured at warm-up; use quality lossless or disable graph capture")

    def _apply(self, quality: str):
        """Decides every site for `quality` (nothing changes if it is refused) and installs the callables."""
        fused, request_gated = self._fused_families(quality)
        if self._graph_capture and request_gated:
            raise ValueError(self._graph_error(quality, request_gated))
        off = self._family_off()
        for s in self._sites:
            s.fused = s.family in fused
            if s.fused:
                s.state, s.reason = PENDING, "not called since the quality was set"
            elif s.reject_reason:
                s.state, s.reason = OFF, s.reject_reason
            elif _RANK[s.tier] > _RANK[quality]:
                s.state, s.reason = OFF, f"tier {s.tier} is above quality {quality}"
            else:
                s.state, s.reason = OFF, "family off: " + off[s.family]
        for slot in self._slots:
            chosen = next(((site, fn) for site, fn in slot.candidates if site.fused), None)
            if chosen is None:
                setattr(slot.ns, slot.attr, slot.chain)
            else:
                setattr(slot.ns, slot.attr, self._probe(slot, *chosen))
                # The preferred site runs here; a lower-tier site covering the same call does not.
                for site, _ in slot.candidates:
                    if site is not chosen[0] and site.fused:
                        site.state, site.reason = OFF, f"superseded by {chosen[0].name} ({chosen[0].family})"
        if self._capture_hook is not None:
            self._capture_hook.remove()
            self._capture_hook = None
        if request_gated and torch.cuda.is_available():
            self._capture_hook = self.transformer.register_forward_pre_hook(
                self._refuse_capture(quality, request_gated))
        self._quality = quality

    def _refuse_capture(self, quality, request_gated):
        message = self._graph_error(quality, request_gated)

        def hook(module, args):
            if torch.cuda.is_current_stream_capturing():
                raise RuntimeError(message)

        return hook

    # -- first-sight probe and counting --------------------------------------------------------

    def _probe(self, slot: _Slot, site: Site, fn: Callable) -> Callable:
        ops = self._ops

        def probe(*args):
            before = ops.op_counters(site.op)
            out = fn(*args)
            after = ops.op_counters(site.op)
            self._observe(site, [a - b for a, b in zip(after, before)], args)
            setattr(slot.ns, slot.attr, _counting(fn, site, _COUNTED_AS[site.state]))
            return out

        return probe

    def _observe(self, site: Site, delta: list, args):
        fused, eager, verifications, fallbacks = delta
        n = site.op_calls
        site.verifications += verifications
        site.fallbacks += fallbacks
        if not site.through_gate:
            on_cuda = isinstance(args[0], torch.Tensor) and args[0].is_cuda
            site.state = UNCOUNTED if on_cuda else CHAIN
            site.reason = ("close-contract op without Gate counters: its cuBLASLt kernel runs when its guards "
                           "accept the inputs, else the aten chain" if on_cuda
                           else "the op runs the aten chain for CPU inputs")
            setattr(site, _COUNTED_AS[site.state], getattr(site, _COUNTED_AS[site.state]) + 1)
            return
        if fused == n:
            site.state = VERIFIED if verifications else FUSED
            reference = "the eager chain" if site.contract == "bit-exact" else "the op's torch reference"
            site.reason = (f"verified bitwise against {reference} on this signature's first call" if verifications
                           else "signature verified earlier")
            site.fused_calls += 1
        elif fused == 0 and eager == 0:
            site.state = CHAIN
            site.reason = ("CPU tensors: the op runs the aten chain (dfuse's host kernels reproduce PyTorch's CUDA "
                           "arithmetic, not aten's CPU kernels)" if self._device().type == "cpu" else
                           "the op's guards refused these inputs; the op ran the eager chain (no Gate entry)")
            site.chain_calls += 1
        elif fused == 0:
            site.state = FELL_BACK
            why = _gate_disabled_reasons(self._ops.gate_report(), site.op)
            site.reason = ("signature disabled by the Gate: " + "; ".join(why) if why else
                           "the Gate ran the chain (signature disabled earlier, an op named in DFUSE_DISABLE_OPS, "
                           "or an unverified signature during CUDA graph capture)")
            site.chain_calls += 1
        else:
            site.state = MIXED
            site.reason = f"{fused} of {n} op calls ran fused; see gate_report()"
            site.chain_calls += 1

    # -- public API ----------------------------------------------------------------------------

    @property
    def quality(self) -> str:
        return self._quality

    @property
    def batch_open(self) -> bool:
        return self._batch_open

    def set_quality(self, quality: str) -> None:
        """Switches the sites to `quality`. Only between batches."""
        self._check_mounted()
        quality = _parse_quality(quality)
        if self._batch_open:
            raise RuntimeError(f'dfuse mount "{self.model}": cannot switch to quality {quality} while the batch at '
                               f"quality {self._quality} is open; quality changes only between batches")
        self._apply(quality)

    def set_graph_capture(self, captured: bool) -> None:
        """Declares that the transformer runs under captured CUDA graphs. Only between batches."""
        self._check_mounted()
        if self._batch_open:
            raise RuntimeError(f'dfuse mount "{self.model}": graph capture is declared between batches')
        if captured:
            _, request_gated = self._fused_families(self._quality)
            if request_gated:
                raise ValueError(self._graph_error(self._quality, request_gated))
        self._graph_capture = bool(captured)

    def begin_batch(self, quality: str | None = None) -> None:
        """Opens a batch at `quality` (default: the current quality); every fused site probes its first call."""
        self._check_mounted()
        if self._batch_open:
            raise RuntimeError(f'dfuse mount "{self.model}": a batch at quality {self._quality} is already open')
        self._apply(_parse_quality(quality) if quality is not None else self._quality)
        self._batch_open = True

    def end_batch(self) -> None:
        self._check_mounted()
        if not self._batch_open:
            raise RuntimeError(f'dfuse mount "{self.model}": end_batch without an open batch')
        self._batch_open = False

    @contextlib.contextmanager
    def batch(self, quality: str | None = None):
        self.begin_batch(quality)
        try:
            yield self
        finally:
            self.end_batch()

    def batch_key(self, quality: str | None = None) -> str:
        """Requests with different keys are never batched together (MountPlan::batch_key)."""
        q = _parse_quality(quality) if quality is not None else self._quality
        return f"model={self.model};quality={q}"

    def sites(self) -> list[Site]:
        return [Site(**vars(s)) for s in self._sites]

    def report(self) -> Report:
        sites = self.sites()
        ops = []
        for op, at_mount in self._gate_at_mount.items():
            now = self._ops.op_counters(op)
            d = [a - b for a, b in zip(now, at_mount)]
            by_sites = sum(s.fused_calls * s.op_calls for s in sites if s.op == op and s.through_gate)
            ops.append(OpTotals(op, d[0], d[1], d[2], d[3], by_sites))
        tiers = {s.family: s.tier for s in self._sites}
        rejected = [(family, why) for family, why in self._family_off().items()
                    if _RANK[tiers[family]] <= _RANK[self._quality]]
        notes = [HIGH_NOTE] if self._quality == "high" else []
        return Report(self.model, self._quality, self._batch_open, self._graph_capture, sites, ops, rejected, notes)

    def unmount(self) -> None:
        """Restores the original forwards and processors. The handle is unusable afterwards."""
        self._check_mounted()
        if self._batch_open:
            raise RuntimeError(f'dfuse mount "{self.model}": unmount between batches, not inside one')
        self._undo()

    def _undo(self) -> None:
        if self._capture_hook is not None:
            self._capture_hook.remove()
            self._capture_hook = None
        for undo in reversed(self._restore):
            undo()
        self._restore.clear()
        self._mounted = False


# The Site counter a probed state's later calls go to.
_COUNTED_AS = {VERIFIED: "fused_calls", FUSED: "fused_calls", FELL_BACK: "chain_calls", CHAIN: "chain_calls",
               MIXED: "chain_calls", UNCOUNTED: "unproven_calls"}


def _counting(fn: Callable, site: Site, counter: str) -> Callable:
    if counter == "fused_calls":
        def call(*args):
            site.fused_calls += 1
            return fn(*args)
    elif counter == "chain_calls":
        def call(*args):
            site.chain_calls += 1
            return fn(*args)
    else:
        def call(*args):
            site.unproven_calls += 1
            return fn(*args)
    return call


def _gate_disabled_reasons(report: str, op: str) -> list[str]:
    """The reasons of the Gate report's disabled rows for `op` (columns: op state fused eager reason signature)."""
    lines = report.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("op ") and " reason " in line), None)
    if at is None:  # lines before the header say e.g. that a kill switch is on
        return []
    header = lines[at]
    start, end = header.index(" reason ") + 1, header.index(" signature") + 1
    reasons = []
    for line in lines[at + 2:]:
        cells = line.split()
        if len(cells) >= 2 and cells[0] == op and cells[1] == "disabled":
            reason = line[start:end].strip()
            if reason and reason not in reasons:
                reasons.append(reason)
    return reasons


def mount(transformer, quality: str = "lossless", *, name: str | None = None, cuda_graphs: bool = False,
          exclude=()) -> FluxMount:
    """Mounts dfuse into a diffusers FluxTransformer2DModel at `quality` ("lossless", "extra-high", "high").

    name: the model name in batch keys and reports (default: the config's _name_or_path, else the class).
    cuda_graphs: the transformer runs under captured CUDA graphs; request-gated qualities are refused.
    exclude: families (the report's family column) kept on the model's own chain at every quality, e.g. to
        measure what one family buys; an unknown name is an error listing the model's families.
    """
    return FluxMount(transformer, _parse_quality(quality), name, cuda_graphs, exclude)
