// The inventory: one KernelSpec per (op, backend) that dfuse ships. Metadata only; each spec's
// `symbol` names the entry its backend registers (DFUSE_REGISTER_ENTRY beside the kernel).
#include "dfuse/registry/registry.h"

namespace dfuse {

namespace {

const std::vector<DType> kFloat16And32 = {DType::bf16, DType::f16, DType::f32};

// Host and CUDA specs of an op sharing its metadata. The CUDA kernels are built for sm_90a.
void add_host_and_cuda(Registry& r, KernelSpec base) {
  KernelSpec host = base;
  host.backend = Backend::host;
  host.capabilities.devices = {DeviceKind::host};
  r.add(std::move(host));

  KernelSpec cuda = std::move(base);
  cuda.backend = Backend::cuda;
  cuda.capabilities.devices = {DeviceKind::cuda};
  cuda.capabilities.min_sm = SmVersion{9, 0};
  cuda.capabilities.max_sm = SmVersion{9, 0};
  r.add(std::move(cuda));
}

void register_adaln(Registry& r) {
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.modulate_scale_shift",
                           .symbol = "modulate_scale_shift",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous |
                                                       layout_broadcast},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "x * (1 + scale) + shift",
                           .models = {"FLUX.1", "FLUX.2", "Wan 2.1", "LTX-2", "Ideogram 4", "LingBot World"},
                           .family = "adaln",
                           .description = "adaLN modulate; scale/shift per batch, per token or per frame, "
                                          "strided chunk(6) slices",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.residual_gate_add",
                           .symbol = "residual_gate_add",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous |
                                                       layout_broadcast},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "residual + gate * update",
                           .models = {"FLUX.1", "FLUX.2", "GLM-Image", "ERNIE-Image", "Sana", "LTX-2"},
                           .family = "adaln",
                           .description = "gated residual; gate per batch [B,1,D], per token [B,S,1] or full",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.temb_table_slices",
                           .symbol = "temb_table_slices",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "(scale_shift_table + temb.float()).chunk(6, dim=2)",
                           .models = {"Wan 2.1", "Wan 2.2"},
                           .family = "adaln",
                           .description = "fp32 table [1,6,D] + temb [B,6,D] or per token [B,S,6,D] (dtype "
                                          "listed) as six dense fp32 slices in one pass",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.ltx2_ada_values",
                           .symbol = "ltx2_ada_values",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "(table[None, None].to(timestep.dtype) + "
                                       "timestep.reshape(B, T, n, D)).unbind(2)",
                           .models = {"LTX-2"},
                           .family = "adaln",
                           .description = "n-way (9 with cross-attention adaLN) ada value split as n dense slices",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.scaled_residual_bf16",
                           .symbol = "scaled_residual_bf16",
                           .capabilities = {.dtypes = {DType::bf16},
                                            .layouts = layout_contiguous | layout_last_dim_contiguous |
                                                       layout_broadcast},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "(x.float() + y * gate).type_as(x)",
                           .models = {"LingBot World"},
                           .family = "adaln",
                           .description = "spec's try_fused_scaled_residual_bf16: bf16 residual, fp32 gate per "
                                          "frame [B,F,1,D], per batch or per token",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.timestep_embedding",
                           .symbol = "timestep_embedding",
                           .capabilities = {.dtypes = {DType::f32, DType::bf16, DType::f16, DType::i64},
                                            .layouts = layout_contiguous | layout_last_dim_contiguous},
                           .contract = Contract::close,
                           .tier = Quality::extra_high,
                           .replaces = "get_timestep_embedding(timesteps, dim, flip_sin_to_cos, "
                                       "downscale_freq_shift, scale, max_period)",
                           .models = {"FLUX.1", "SD3", "Wan 2.1", "LTX-2"},
                           .family = "adaln",
                           .description = "sinusoidal timestep embedding, fp32 [N, dim]; within "
                                          "2^-20 * max(1, |scale * t|) of torch's fp32 chain",
                       });
}

void register_activation(Registry& r) {
  const auto layouts = layout_contiguous | layout_last_dim_contiguous | layout_broadcast;
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.silu_mul",
                           .symbol = "silu_mul",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "F.silu(a) * b",
                           .models = {"FLUX.2", "Ideogram 4", "Cosmos3"},
                           .family = "activation",
                           .description = "SwiGLU gate; a and b separate or the halves of a packed [.., 2D] "
                                          "projection",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.bias_silu",
                           .symbol = "bias_silu",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "F.silu(x + bias)",
                           .models = {"Sana", "SANA-Video"},
                           .family = "activation",
                           .description = "per-channel bias + SiLU; channels last [B, N, C] with bias "
                                          "[C], or channel first [B, C, H, W] with bias [C, 1, 1]",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.bias_glu",
                           .symbol = "bias_glu",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "h, g = (x + bias).chunk(2, dim=-1); h * F.silu(g)",
                           .models = {"Sana", "SANA-Video"},
                           .family = "activation",
                           .description = "GLUMBConv gate on channels-last [.., 2C] rows, bias [2C] or none",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.gelu_tanh_cat",
                           .symbol = "gelu_tanh_cat",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "torch.cat([attn_output, F.gelu(mlp_hidden_states, approximate=\"tanh\")], "
                                       "dim=2)",
                           .models = {"FLUX.1"},
                           .family = "activation",
                           .description = "single-stream block tail: attention heads [B, S, H, D] copied into the "
                                          "cat, tanh-GELU written into its half",
                       });
}

// Data movement: values are copied, never computed (bitwise identical by construction).
void register_data_movement(Registry& r) {
  const auto layouts = layout_contiguous | layout_last_dim_contiguous;
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.usp_merge_heads",
                           .symbol = "usp_merge_heads",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "x.permute(2, 1, 0, 3, 4).contiguous()",
                           .models = {"MiniMax-H3"},
                           .family = "data_movement",
                           .description = "Ulysses head merge [W, S, B, h, D] -> [B, S, W, h, D]; strided x",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.joint_qkv_cat",
                           .symbol = "joint_qkv_cat",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "torch.cat([img, txt], dim=1) for each of q, k, v",
                           .models = {"Joy Image Edit"},
                           .family = "data_movement",
                           .description = "image-first joint Q/K/V token concat in one launch; strided "
                                          "(packed projection) inputs",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.pack_qkv_destination_major",
                           .symbol = "pack_qkv_destination_major",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "per-destination head shards of q, k, v before the Ulysses all-to-all",
                           .models = {"MiniMax-H3"},
                           .family = "data_movement",
                           .description = "q, k, v [rows, G, hs] -> [W, rows, G/W, 3hs], head slots [q|k|v]",
                       });
  const auto varlen = [&](const char* name, const char* replaces, const char* description) {
    add_host_and_cuda(r, KernelSpec{
                             .op = std::string("diffusion.") + name,
                             .symbol = name,
                             .capabilities = {.dtypes = kFloat16And32, .layouts = layout_contiguous},
                             .contract = Contract::bit_exact,
                             .tier = Quality::lossless,
                             .replaces = replaces,
                             .models = {"masked attention paths (varlen)"},
                             .family = "data_movement",
                             .description = description,
                         });
  };
  varlen("varlen_pack_qkv", "x.reshape(B * S, H, D).index_select(0, indices) for each of q, k, v",
         "valid-token pack of q, k, v [B, S, H, D] -> [n, H, D] in one launch; int32/int64 indices");
  varlen("varlen_pack_segmented_qkv",
         "torch.cat([prefix, main], dim=1).reshape(B * S, H, D).index_select(0, indices) for q, k, v",
         "valid-token pack of the virtual prefix|main token concat, no cat; int32/int64 indices");
  varlen("varlen_scatter_to_padded", "torch.zeros(B * S, H, D).index_copy_(0, indices, x)",
         "packed [n, H, D] -> padded [B, S, H, D] by inverse indices (-1 = padding, +0.0 rows)");
}

void register_routing(Registry& r) {
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.group_limited_topk",
                           .symbol = "group_limited_topk",
                           .capabilities = {.dtypes = {DType::f32}, .layouts = layout_last_dim_contiguous},
                           .contract = Contract::selection_equivalent,
                           .tier = Quality::lossless,
                           .replaces = "group top-2 sum, group topk, masked_fill(-inf), "
                                       "topk(top_k, sorted=False)",
                           .models = {"LingBot Video MoE"},
                           .family = "routing",
                           .description = "group-limited MoE expert choice; scores [T, E] f32 (E <= 1024), "
                                          "ids [T, top_k] int64, same set per row",
                       });
}

void register_gemm(Registry& r) {
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.linear_gelu_tanh",
                           .symbol = "linear_gelu_tanh",
                           .capabilities = {.dtypes = {DType::bf16, DType::f16},
                                            .layouts = layout_contiguous | layout_last_dim_contiguous},
                           .contract = Contract::close,
                           .tier = Quality::extra_high,
                           .replaces = "F.gelu(F.linear(x, weight, bias), approximate=\"tanh\")",
                           .models = {"FLUX.1", "SD3", "GLM-Image"},
                           .family = "gemm",
                           .description = "FFN up-projection with bias + tanh-GELU in the cuBLASLt epilogue; "
                                          "|out - eager| <= 2^-7 |eager| + 2^-8 |x W^T + b| + 3 K 2^-24 (|x| |W|^T + |b|) + the dtype's "
                                          "smallest subnormal",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.qkv_projection_into",
                           .symbol = "qkv_projection_into",
                           .capabilities = {.dtypes = {DType::bf16, DType::f16},
                                            .layouts = layout_contiguous | layout_last_dim_contiguous},
                           .contract = Contract::close,
                           .tier = Quality::extra_high,
                           .replaces = "add_q_proj(txt), add_k_proj(txt), add_v_proj(txt), then "
                                       "torch.cat([txt_q, img_q], dim=1) (and k, v)",
                           .models = {"Qwen-Image"},
                           .family = "gemm",
                           .description = "added Q/K/V projections as one GEMM of the concatenated weight, written "
                                          "into the text rows of the joint QKV buffer; same bound",
                       });
}

// LayerNorm ops of the normalization family ("norm").
void register_layernorm(Registry& r) {
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.layernorm_modulate",
                           .symbol = "layernorm_modulate",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous |
                                                       layout_broadcast},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift",
                           .models = {"FLUX.1", "FLUX.2", "Wan 2.1", "GLM-Image", "Sana"},
                           .family = "norm",
                           .description = "affine-free LayerNorm + adaLN modulate in one pass; aten's "
                                          "vectorized or generic LayerNorm path as torch picks it; scale/shift "
                                          "per batch, per token, strided chunk(6) slices",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.qk_head_layernorm",
                           .symbol = "qk_head_layernorm",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "F.layer_norm(q, (Dh,), q_weight, q_bias, eps); "
                                       "F.layer_norm(k, (Dh,), k_weight, k_bias, eps)",
                           .models = {"GLM-Image"},
                           .family = "norm",
                           .description = "per-head LayerNorm of q and k in one launch, one warp per head in "
                                          "aten's block reduction order; views of a packed projection",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.layernorm_folded_modulate",
                           .symbol = "layernorm_folded_modulate",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous |
                                                       layout_broadcast},
                           .contract = Contract::close,
                           .tier = Quality::extra_high,
                           .replaces = "F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift",
                           .models = {"FLUX.1", "FLUX.2", "Sana"},
                           .family = "norm",
                           .description = "request-gated: F.layer_norm(x, (D,), weight=1 + scale, bias=shift, eps) "
                                          "in one pass; |out - chain| <= 4u(|n(1 + scale)| + |shift|) + "
                                          "2eta(|1 + scale| + 2) (eta half the smallest subnormal); one "
                                          "scale/shift row (B == 1)",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.fp32_layernorm_bf16",
                           .symbol = "fp32_layernorm_bf16",
                           .capabilities = {.dtypes = {DType::bf16, DType::f16},
                                            .layouts = layout_contiguous | layout_last_dim_contiguous},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "F.layer_norm(x.float(), (D,), weight, bias, eps).to(x.dtype)",
                           .models = {"LingBot World"},
                           .family = "norm",
                           .description = "FP32LayerNorm of a bf16/f16 activation with f32 weight/bias, no fp32 "
                                          "intermediate in memory (the spec's try_fused_fp32_layernorm_bf16)",
                       });
}

// RMSNorm ops of the normalization family ("norm"), one spec per eager RMSNorm chain they match.
void register_rmsnorm(Registry& r) {
  const auto layouts = layout_contiguous | layout_last_dim_contiguous | layout_broadcast;
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.rmsnorm_scale_shift",
                           .symbol = "rmsnorm_scale_shift",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "F.rms_norm(x, (D,), weight, eps) * (1 + scale) + shift",
                           .models = {"LTX-2", "ERNIE-Image", "LingBot Video", "Wan 2.1"},
                           .family = "norm",
                           .description = "F.rms_norm (aten's vectorized or generic path as torch picks it) + "
                                          "adaLN modulate in one pass; scale/shift per batch, per token, strided "
                                          "chunk(6) slices; D <= 8192",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.rmsnorm_decomposed_scale_shift",
                           .symbol = "rmsnorm_decomposed_scale_shift",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "v = x.float().pow(2).mean(-1, keepdim=True); "
                                       "h = (x.float() * torch.rsqrt(v + eps)).to(dtype) * weight; "
                                       "h * (1 + scale) + shift",
                           .models = {"LTX-2", "ERNIE-Image"},
                           .family = "norm",
                           .description = "diffusers RMSNorm module (mean in Reduce.cuh's order for the row "
                                          "count) + adaLN modulate in one pass; D <= 8192",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.qk_rmsnorm_native",
                           .symbol = "qk_rmsnorm_native",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts | layout_strided},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "attn.norm_q(query), attn.norm_k(key) with diffusers RMSNorm(head_dim)",
                           .models = {"FLUX.1", "FLUX.2", "Qwen-Image", "HunyuanVideo"},
                           .family = "norm",
                           .description = "per-head QK RMSNorm (diffusers decomposed chain) of q and k in one "
                                          "launch, a warp per row; q/k strided views of a packed QKV "
                                          "projection; head dim 128..512 (multiple of 128), >= 16 rows",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.qk_rmsnorm",
                           .symbol = "qk_rmsnorm",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts | layout_strided},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "F.rms_norm(q, (Dh,), q_weight, eps), F.rms_norm(k, (Dh,), k_weight, eps)",
                           .models = {"Wan 2.1", "LTX-2"},
                           .family = "norm",
                           .description = "per-head QK RMSNorm (torch.nn.RMSNorm, aten's vectorized path) of q "
                                          "and k in one launch, a warp per row; head dim 128..512 (multiple of 128)",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.qk_rmsnorm_storage_dtype",
                           .symbol = "qk_rmsnorm_storage_dtype",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts | layout_strided},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "norm_q(q), norm_k(k) with Z-Image's RMSNorm: x * torch.rsqrt(x.pow(2)"
                                       ".mean(-1, keepdim=True) + eps) * weight in x's dtype",
                           .models = {"Z-Image"},
                           .family = "norm",
                           .description = "per-head QK RMSNorm with storage-dtype (bf16-native) statistics of q "
                                          "and k in one launch, a warp per row; head dim 128",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.rmsnorm_scale",
                           .symbol = "rmsnorm_scale",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight * scale "
                                       "(every op in x's dtype)",
                           .models = {"Z-Image"},
                           .family = "norm",
                           .description = "RMSNorm with storage-dtype (bf16-native) statistics times a scale, one "
                                          "pass; D <= 8192",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.rmsnorm_tanh_residual",
                           .symbol = "rmsnorm_tanh_residual",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "residual + torch.tanh(gate) * RMSNorm(y), RMSNorm(y) = y * torch.rsqrt("
                                       "y.pow(2).mean(-1, keepdim=True) + eps) * weight (every op in y's dtype)",
                           .models = {"Z-Image"},
                           .family = "norm",
                           .description = "gated residual after an RMSNorm with storage-dtype (bf16-native) "
                                          "statistics, one pass; D <= 8192",
                       });
  // Request-gated (quality extra-high): fp32 internals, one rounding (ops/norm/norm_fp32_rows.h).
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.norm_scale_shift",
                           .symbol = "norm_scale_shift",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::close,
                           .tier = Quality::extra_high,
                           .replaces = "F.layer_norm(x, (D,), weight, bias, eps) or F.rms_norm(x, (D,), weight, "
                                       "eps); * (1 + scale) + shift",
                           .models = {"FLUX.1", "Wan 2.1", "Qwen-Image", "LTX-2"},
                           .family = "norm",
                           .description = "request-gated: LayerNorm or RMSNorm + modulate with fp32 internals, one "
                                          "rounding; |out - chain| <= 6u(|n(1 + scale)| + |shift|) + 2eta(|1 + "
                                          "scale| + 2) (eta half the smallest subnormal); bit-exact vs the chain "
                                          "on float copies; scale/shift per batch, token, frame, scalar, chunk(6); "
                                          "D <= 8192",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.rmsnorm_modulate_fp32",
                           .symbol = "rmsnorm_modulate_fp32",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::close,
                           .tier = Quality::extra_high,
                           .replaces = "v = x.float().pow(2).mean(-1, keepdim=True); "
                                       "h = (x * torch.rsqrt(v + eps)).to(dtype) * weight; "
                                       "h * (1 + scale) + shift",
                           .models = {"LTX-2"},
                           .family = "norm",
                           .description = "request-gated LTX-2 RMSNorm (diffusers module) + modulate in one launch, "
                                          "fp32 internals, one rounding (norm_scale_shift's kernel); |out - chain| "
                                          "<= 7u(|n(1 + scale)| + |shift|) + 2eta((|weight| + 1)|1 + scale| + 2) "
                                          "(eta half the smallest subnormal); bit-exact vs the chain on float "
                                          "copies; D <= ~8160",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.rmsnorm_tanh_residual_fp32",
                           .symbol = "rmsnorm_tanh_residual_fp32",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::close,
                           .tier = Quality::extra_high,
                           .replaces = "residual + torch.tanh(gate) * RMSNorm(y), RMSNorm(y) = y * torch.rsqrt("
                                       "y.pow(2).mean(-1, keepdim=True) + eps) * weight (every op in y's dtype)",
                           .models = {"Z-Image", "Ideogram 4"},
                           .family = "norm",
                           .description = "request-gated BF16-native gate RMSNorm (RMSNorm + tanh + mul + add) in "
                                          "one pass with fp32 internals, one rounding; |out - chain| <= "
                                          "10u(|tanh(gate) n| + |residual|) + eta(3|tanh(gate) n| / (mean(y^2) + "
                                          "eps) + 2|tanh(gate)|(|weight| + 1) + 2|n| + 4) (eta half the smallest "
                                          "subnormal; rows with mean(y^2) + eps >= 16 eta); bit-exact vs the "
                                          "chain on float copies; D <= ~8160",
                       });
}

// RoPE ops of the rope family.
void register_rope(Registry& r) {
  const auto layouts = layout_contiguous | layout_last_dim_contiguous | layout_broadcast;
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.rope_rotate_half",
                           .symbol = "rope_rotate_half",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "x1, x2 = x[..., :R].chunk(2, -1); cat([-x2, x1]); "
                                       "(x.float() * cos + x_rot.float() * sin).to(x.dtype) or x * cos + "
                                       "x_rot * sin in x's dtype; cat([y, x[..., R:]])",
                           .models = {"ERNIE-Image", "Ideogram 4", "CogView4", "Cosmos", "Stable Audio"},
                           .family = "rope",
                           .description = "rotate-half RoPE over the first R channels of each head, tail "
                                          "copied; x [B, S, H, D] or [B, H, S, D] incl. packed-QKV views, "
                                          "cos/sin [S, R] broadcast over heads, fp32 or x's dtype",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.rope_interleaved_pairs",
                           .symbol = "rope_interleaved_pairs",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1); "
                                       "x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3); "
                                       "(x.float() * cos + x_rotated.float() * sin).to(x.dtype)",
                           .models = {"FLUX.1", "FLUX.2", "HunyuanVideo", "LTX-Video", "CogVideoX"},
                           .family = "rope",
                           .description = "diffusers apply_rotary_emb(use_real_unbind_dim=-1): RoPE over "
                                          "adjacent pairs, x [B, H, S, D] or [B, S, H, D] incl. packed-QKV "
                                          "views, cos/sin [S, D] fp32 (or x's dtype) broadcast over heads",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.interleaved_rope_fp64",
                           .symbol = "interleaved_rope_fp64",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "out[..., 0::2] = x1 * cos - x2 * sin; out[..., 1::2] = x1 * sin + "
                                       "x2 * cos with fp64 tables, for q and k",
                           .models = {"SANA-Video"},
                           .family = "rope",
                           .description = "paired Q/K interleaved-pair RoPE with fp64 cos/sin tables "
                                          "[1, S, 1, D]; fp64 math, stored double -> float -> dtype",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.fused_inplace_qknorm_rope",
                           .symbol = "fused_inplace_qknorm_rope",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "q = norm_q(q); k = norm_k(k) (F.rms_norm or diffusers RMSNorm), then "
                                       "the rope_rotate_half chain on each, in place",
                           .models = {"ERNIE-Image", "Cosmos3", "Krea2", "MiniMax-H3"},
                           .family = "rope",
                           .description = "exact form (norm rounded before RoPE): per-head QK RMSNorm + "
                                          "rotate-half RoPE in place, D 128 or 256, one warp per head",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.fused_inplace_qknorm_rope_one_rounding",
                           .symbol = "fused_inplace_qknorm_rope_one_rounding",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::close,
                           .tier = Quality::extra_high,
                           .replaces = "q = norm_q(q); k = norm_k(k) (F.rms_norm or diffusers RMSNorm), then "
                                       "the fp32-opmath rope_rotate_half chain on each, in place",
                           .models = {"ERNIE-Image", "Cosmos3", "Krea2", "MiniMax-H3"},
                           .family = "rope",
                           .description = "default form (round_norm_before_rope=False): the normalized value "
                                          "stays fp32 into the RoPE, one rounding; within (u + 2^-21)(|c n_e| + "
                                          "|s n_p|) + u(|fused| + |split|) + (|c| + |s| + 2)d of the split chain "
                                          "(u = 2^-8 bf16, d half the smallest subnormal)",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.fused_qknorm_rope",
                           .symbol = "fused_qknorm_rope",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "norm_q(q), norm_k(k), then the rope_rotate_half chain on each, as new "
                                       "tensors",
                           .models = {"ERNIE-Image", "Cosmos3", "Krea2", "MiniMax-H3"},
                           .family = "rope",
                           .description = "out-of-place form of fused_inplace_qknorm_rope (exact): q, k read, "
                                          "results into q_out, k_out",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.fused_qknorm_rope_pack_kv",
                           .symbol = "fused_qknorm_rope_pack_kv",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "q = rope(norm_q(q)) in place; torch.stack([rope(norm_k(k)), v], dim=-3) "
                                       "into a KV buffer",
                           .models = {"Cosmos3"},
                           .family = "rope",
                           .description = "pack-KV form of fused_inplace_qknorm_rope (exact): q in place, rotated "
                                          "k and a bit copy of v into kv [..., 2, H, D], one launch",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.flux2_strided_qknorm_rope",
                           .symbol = "flux2_strided_qknorm_rope",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "query, key = attn.norm_q(query), attn.norm_k(key) (torch.nn.RMSNorm on "
                                       "qkv.chunk(3, -1) views of to_qkv_mlp_proj), then apply_rotary_emb(..., "
                                       "sequence_dim=1) on each",
                           .models = {"FLUX.2", "FLUX.2 Klein"},
                           .family = "rope",
                           .description = "single-stream block: QK RMSNorm (rounded, signed zeros kept) + "
                                          "interleaved-pair RoPE from strided packed Q/K views into contiguous "
                                          "q, k; V and MLP columns never written; D 128 or 256",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.flux2_qkv_epilogue",
                           .symbol = "flux2_qkv_epilogue",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "norm_q/norm_k on image q/k, norm_added_q/norm_added_k on text q/k, "
                                       "torch.cat([text, image], dim=1) for q, k, v, apply_rotary_emb on joint q, k",
                           .models = {"FLUX.2", "FLUX.2 Klein"},
                           .family = "rope",
                           .description = "double-stream block: QK RMSNorm + joint text/image QKV packing + "
                                          "interleaved-pair RoPE, joint q, k, v written in one launch",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.ltx2_qknorm_split_rope",
                           .symbol = "ltx2_qknorm_split_rope",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "query = attn.norm_q(query); key = attn.norm_k(key) (torch.nn.RMSNorm over "
                                       "heads * head_dim); apply_split_rotary_emb(x, (cos, sin)) on each: "
                                       "x.reshape(b, t, h, -1).swapaxes(1, 2), split_x = x.reshape(..., 2, r)"
                                       ".float(), out = split_x * cos_u, first_out.addcmul_(-sin_u, second_x), "
                                       "second_out.addcmul_(sin_u, first_x), swapaxes back, .to(x_dtype)",
                           .models = {"LTX-2"},
                           .family = "rope",
                           .description = "diffusers 0.42.1 LTX2AudioVideoAttnProcessor, rope_type=\"split\": "
                                          "F.rms_norm over the whole inner dim of q and k, then split RoPE "
                                          "with fp32 [B, H, S, D/2] tables, one launch (block per token); "
                                          "bit-exact incl. torch 2.11's fma in addcmul_",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.ltx25_decoder_rope",
                           .symbol = "ltx25_decoder_rope",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "LTX2VideoVaeRotaryPosEmbed3D(query), (key) with cached per-axis "
                                       "cos/sin: per axis (frame, row, column) even, odd = pairs.float(); "
                                       "torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1)"
                                       ".to(x.dtype); torch.cat over the axes",
                           .models = {"LTX-2.5 decoder"},
                           .family = "rope",
                           .description = "diffusers 0.42.1 ltx2_diffusion_decoder: paired q/k 3D RoPE on "
                                          "[B, T, H, W, heads, D], compact fp32 tables [T|H|W, d/2] expanded "
                                          "per token in the kernel (no [tokens, D] table)",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.helios_qk_rope",
                           .symbol = "helios_qk_rope",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "apply_rotary_emb_transposed(query), (key): x_1, x_2 = x.unflatten(-1, "
                                       "(-1, 2)).unbind(-1); cos, sin = freqs_cis.unsqueeze(-2).chunk(2, -1); "
                                       "out[..., 0::2] = x_1 * cos[..., 0::2] - x_2 * sin[..., 1::2]; "
                                       "out[..., 1::2] = x_1 * sin[..., 1::2] + x_2 * cos[..., 0::2]",
                           .models = {"Helios"},
                           .family = "rope",
                           .description = "diffusers 0.42.1 HeliosAttnProcessor: paired q/k RoPE, in place, "
                                          "from the [B, S, 2D] cos|sin table (any strides: also its transposed "
                                          "view before .contiguous())",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.qwen_qkv_epilogue",
                           .symbol = "qwen_qkv_epilogue",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "img_q, img_k = norm_q(img_q), norm_k(img_k); txt_q, txt_k = "
                                       "norm_added_q(txt_q), norm_added_k(txt_k) (diffusers RMSNorm); each x = "
                                       "apply_rotary_emb_qwen(x, freqs, use_real=False): view_as_real("
                                       "view_as_complex(x.float().reshape(..., -1, 2)) * freqs.unsqueeze(1))"
                                       ".flatten(3).type_as(x); torch.cat([txt, img], dim=1) for q, k, v",
                           .models = {"Qwen-Image"},
                           .family = "rope",
                           .description = "QwenDoubleStreamAttnProcessor2_0's QK RMSNorm + complex RoPE + joint "
                                          "[txt, img] QKV writes in one launch; heads of 128, strided inputs; "
                                          "torch 2.11's contracted complex<float> multiply",
                       });
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.hunyuan_qkv_rope_pack",
                           .symbol = "hunyuan_qkv_rope_pack",
                           .capabilities = {.dtypes = kFloat16And32, .layouts = layouts},
                           .contract = Contract::bit_exact,
                           .tier = Quality::lossless,
                           .replaces = "img_q, img_k = norm_q(img_q), norm_k(img_k); txt_q, txt_k = "
                                       "norm_added_q(txt_q), norm_added_k(txt_k) (diffusers RMSNorm); img_q, img_k = "
                                       "apply_rotary_emb(x, (cos, sin), sequence_dim=1) (use_real_unbind_dim=-1); "
                                       "torch.cat([img, txt], dim=1) for q, k, v",
                           .models = {"HunyuanVideo"},
                           .family = "rope",
                           .description = "HunyuanVideoAttnProcessor2_0's QK RMSNorm + interleaved-pair RoPE on "
                                          "the image tokens + joint [img, txt] QKV pack in one launch; heads of "
                                          "128, strided inputs (packed-QKV views, single-stream token ranges)",
                       });
}

// The gated residual step fused with the next block's modulated norm (normalization family).
void register_residual_norm(Registry& r) {
  add_host_and_cuda(r, KernelSpec{
                           .op = "diffusion.scale_residual_norm_scale_shift",
                           .symbol = "scale_residual_norm_scale_shift",
                           .capabilities = {.dtypes = kFloat16And32,
                                            .layouts = layout_contiguous | layout_last_dim_contiguous |
                                                       layout_broadcast},
                           .contract = Contract::bit_exact_verified,
                           .tier = Quality::lossless,
                           .replaces = "r = residual + gate * update; "
                                       "F.layer_norm(r, (D,), eps=eps) or F.rms_norm(r, (D,), weight, eps); "
                                       "* (1 + scale) + shift; returns r and the modulated value",
                           .models = {"LingBot Video", "Qwen-Image", "Wan 2.1"},
                           .family = "norm",
                           .description = "gated residual add + LayerNorm or RMSNorm + adaLN modulate in one "
                                          "pass, r written once and never re-read from HBM; aten's norm path "
                                          "for the fresh r; gate/scale/shift per batch, per token, chunk(6) "
                                          "slices; D <= 8192",
                       });
}

}  // namespace

void register_inventory(Registry& r) {
  register_adaln(r);
  register_activation(r);
  register_data_movement(r);
  register_routing(r);
  register_gemm(r);
  register_layernorm(r);
  register_rmsnorm(r);
  register_rope(r);
  register_residual_norm(r);
}

}  // namespace dfuse
