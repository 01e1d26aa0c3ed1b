// dfuse eager chains: each fused op's reference, composed from the eager replicas exactly as
// model code writes it, with every intermediate materialized in the storage dtype. Scratch
// memory for the intermediates is allocated on the operands' device.
#pragma once

#include "dfuse/core/device.h"
#include "dfuse/core/runtime.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::eager {

// Scratch memory for a chain's intermediates on one device, kept between calls so that timing
// a chain does not time allocations. A chain calls reset() with the bytes it needs, then
// take()s its buffers; the previous call's buffers are reused once its work is ordered before
// (same stream).
class Workspace {
 public:
  explicit Workspace(Device d) : device_(d) {}
  void reset(size_t bytes);
  void* take(size_t bytes);  // 256-byte aligned pieces of the reserved buffer

 private:
  Device device_;
  DeviceBuffer buffer_;
  size_t used_ = 0;
};

// x * (1 + scale) + shift
void modulate_scale_shift_chain(const TensorView& x, const TensorView& scale, const TensorView& shift,
                                const TensorView& out, Workspace& ws, Stream stream = {});
// residual + gate * update
void residual_gate_add_chain(const TensorView& residual, const TensorView& gate, const TensorView& update,
                             const TensorView& out, Workspace& ws, Stream stream = {});

// F.silu(a) * b
void silu_mul_chain(const TensorView& a, const TensorView& b, const TensorView& out, Workspace& ws,
                    Stream stream = {});
// torch.cat([attn.reshape(B, S, -1), F.gelu(mlp, approximate="tanh")], dim=2); attn [B, S, Da] or
// its heads [B, S, H, D]
void gelu_tanh_cat_chain(const TensorView& attn, const TensorView& mlp, const TensorView& out, Workspace& ws,
                         Stream stream = {});
// F.silu(x + bias)
void bias_silu_chain(const TensorView& x, const TensorView& bias, const TensorView& out, Workspace& ws,
                     Stream stream = {});
// h, g = (x + bias).chunk(2, dim=-1); h * F.silu(g)   (bias null: h, g = x.chunk(2, dim=-1))
void bias_glu_chain(const TensorView& x, const TensorView* bias, const TensorView& out, Workspace& ws,
                    Stream stream = {});

// F.layer_norm(x, (D,), eps=eps) * (1 + scale) + shift   (defined in eager/layer_norm_chains.cpp)
void layernorm_modulate_chain(const TensorView& x, const TensorView& scale, const TensorView& shift, double eps,
                              const TensorView& out, Workspace& ws, Stream stream = {});
// q = F.layer_norm(q, (Dh,), q_weight, q_bias, eps); k = F.layer_norm(k, (Dh,), k_weight, k_bias, eps)
// (weights/biases may be null; defined in eager/layer_norm_chains.cpp)
void qk_head_layernorm_chain(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                             const TensorView* q_bias, const TensorView* k_weight, const TensorView* k_bias,
                             double eps, const TensorView& q_out, const TensorView& k_out, Stream stream = {});
// F.layer_norm(x, (D,), weight=(1 + scale).reshape(D), bias=shift.reshape(D), eps), scale/shift one
// row of D (defined in eager/layer_norm_chains.cpp)
void layernorm_folded_modulate_chain(const TensorView& x, const TensorView& scale, const TensorView& shift,
                                     double eps, const TensorView& out, Workspace& ws, Stream stream = {});
// F.layer_norm(x.float(), (D,), weight, bias, eps).to(x.dtype)   (f32 weight/bias, may be null;
// defined in eager/layer_norm_chains.cpp)
void fp32_layernorm_chain(const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                          const TensorView& out, Workspace& ws, Stream stream = {});

}  // namespace dfuse::eager
