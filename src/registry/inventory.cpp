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
                                          "|out - eager| <= 2^-7 |eager| + 2^-8 |x W^T + b|",
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

}  // namespace

void register_inventory(Registry& r) {
  register_adaln(r);
  register_activation(r);
  register_data_movement(r);
  register_routing(r);
  register_gemm(r);
}

}  // namespace dfuse
