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

}  // namespace

void register_inventory(Registry& r) {
  register_adaln(r);
  register_activation(r);
}

}  // namespace dfuse
