// Eager chains of the LayerNorm ops, composed from the layer_norm and binary replicas with every
// intermediate materialized (contiguous, storage dtype) as eager PyTorch does.
#include "dfuse/eager/binary.h"
#include "dfuse/eager/chains.h"
#include "dfuse/eager/layer_norm.h"
#include "dfuse/eager/rope.h"

namespace dfuse::eager {

namespace {

constexpr size_t kScratchAlign = 256;

size_t aligned_bytes(const TensorView& like) {
  size_t b = size_t(like.numel()) * dtype_size(like.dtype());
  return (b + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

TensorView intermediate(Workspace& ws, const TensorView& like) {
  return TensorView::contiguous(ws.take(aligned_bytes(like)), like.dtype(), like.sizes(), like.dim(),
                                like.device());
}

}  // namespace

void layernorm_modulate_chain(const TensorView& x, const TensorView& scale, const TensorView& shift, double eps,
                              const TensorView& out, Workspace& ws, Stream stream) {
  ws.reset(aligned_bytes(x) + aligned_bytes(scale) + aligned_bytes(out));
  TensorView normalized = intermediate(ws, x);
  TensorView one_plus_scale = intermediate(ws, scale);
  TensorView scaled = intermediate(ws, out);
  layer_norm(x, nullptr, nullptr, eps, normalized, stream);                 // F.layer_norm(x, (D,), eps=eps)
  scalar_binary(BinaryOp::add, 1.0, scale, one_plus_scale, stream);         // 1 + scale
  binary(BinaryOp::mul, normalized, one_plus_scale, scaled, 1.0, stream);  // ... * (1 + scale)
  binary(BinaryOp::add, scaled, shift, out, 1.0, stream);                   // ... + shift
}

void qk_head_layernorm_chain(const TensorView& q, const TensorView& k, const TensorView* q_weight,
                             const TensorView* q_bias, const TensorView* k_weight, const TensorView* k_bias,
                             double eps, const TensorView& q_out, const TensorView& k_out, Stream stream) {
  layer_norm(q, q_weight, q_bias, eps, q_out, stream);  // norm_q(q)
  layer_norm(k, k_weight, k_bias, eps, k_out, stream);  // norm_k(k)
}

void layernorm_folded_modulate_chain(const TensorView& x, const TensorView& scale, const TensorView& shift,
                                     double eps, const TensorView& out, Workspace& ws, Stream stream) {
  ws.reset(aligned_bytes(scale));
  const TensorView one_plus_scale = intermediate(ws, scale);
  scalar_binary(BinaryOp::add, 1.0, scale, one_plus_scale, stream);  // 1 + scale
  const int64_t d = x.size(-1), unit = 1, shift_stride = shift.stride(-1);
  const TensorView weight = one_plus_scale.restrided(&d, &unit, 1);   // .reshape(D)
  const TensorView bias = shift.restrided(&d, &shift_stride, 1);     // shift.reshape(D)
  layer_norm(x, &weight, &bias, eps, out, stream);                   // F.layer_norm(x, (D,), weight, bias, eps)
}

void fp32_layernorm_chain(const TensorView& x, const TensorView* weight, const TensorView* bias, double eps,
                          const TensorView& out, Workspace& ws, Stream stream) {
  const size_t f32_bytes = (size_t(x.numel()) * sizeof(float) + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  ws.reset(2 * f32_bytes);
  const TensorView widened = TensorView::contiguous(ws.take(f32_bytes), DType::f32, x.sizes(), x.dim(), x.device());
  const TensorView normalized = TensorView::contiguous(ws.take(f32_bytes), DType::f32, x.sizes(), x.dim(), x.device());
  cast(x, widened, stream);                                        // x.float()
  layer_norm(widened, weight, bias, eps, normalized, stream);      // F.layer_norm(..., weight, bias, eps)
  cast(normalized, out, stream);                                   // .to(x.dtype)
}

}  // namespace dfuse::eager
