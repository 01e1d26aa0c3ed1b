// Eager chains of the fused ops, composed from the binary and activation replicas with every
// intermediate materialized (contiguous, storage dtype) as eager PyTorch does.
#include "dfuse/eager/chains.h"

#include "dfuse/core/error.h"
#include "dfuse/eager/activation.h"
#include "dfuse/eager/binary.h"
#include "dfuse/eager/data_movement.h"

namespace dfuse::eager {

namespace {

constexpr size_t kScratchAlign = 256;

size_t aligned_bytes(const TensorView& like) {
  size_t b = size_t(like.numel()) * dtype_size(like.dtype());
  return (b + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// A contiguous intermediate of `like`'s shape and dtype, in the workspace.
TensorView intermediate(Workspace& ws, const TensorView& like) {
  return TensorView::contiguous(ws.take(aligned_bytes(like)), like.dtype(), like.sizes(), like.dim(),
                                like.device());
}

}  // namespace

void Workspace::reset(size_t bytes) {
  if (buffer_.bytes() < bytes) buffer_ = DeviceBuffer(device_, bytes);
  used_ = 0;
}

void* Workspace::take(size_t bytes) {
  bytes = (bytes + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
  if (used_ + bytes > buffer_.bytes()) throw InvalidArgument("eager workspace: take() beyond reset()");
  void* p = static_cast<char*>(buffer_.data()) + used_;
  used_ += bytes;
  return p;
}

void modulate_scale_shift_chain(const TensorView& x, const TensorView& scale, const TensorView& shift,
                                const TensorView& out, Workspace& ws, Stream stream) {
  ws.reset(aligned_bytes(scale) + aligned_bytes(out));
  TensorView one_plus_scale = intermediate(ws, scale);
  TensorView scaled = intermediate(ws, out);
  scalar_binary(BinaryOp::add, 1.0, scale, one_plus_scale, stream);  // 1 + scale
  binary(BinaryOp::mul, x, one_plus_scale, scaled, 1.0, stream);     // x * (1 + scale)
  binary(BinaryOp::add, scaled, shift, out, 1.0, stream);            // ... + shift
}

void residual_gate_add_chain(const TensorView& residual, const TensorView& gate, const TensorView& update,
                             const TensorView& out, Workspace& ws, Stream stream) {
  ws.reset(aligned_bytes(out));
  TensorView gated = intermediate(ws, out);
  binary(BinaryOp::mul, gate, update, gated, 1.0, stream);       // gate * update
  binary(BinaryOp::add, residual, gated, out, 1.0, stream);      // residual + ...
}

void silu_mul_chain(const TensorView& a, const TensorView& b, const TensorView& out, Workspace& ws,
                    Stream stream) {
  ws.reset(aligned_bytes(a));
  TensorView activated = intermediate(ws, a);
  activation(ActivationOp::silu, a, activated, stream);  // F.silu(a)
  binary(BinaryOp::mul, activated, b, out, 1.0, stream);  // ... * b
}

void gelu_tanh_cat_chain(const TensorView& attn, const TensorView& mlp, const TensorView& out, Workspace& ws,
                         Stream stream) {
  const int64_t b = mlp.size(0), s = mlp.size(1);
  const int64_t width = attn.dim() == 4 ? attn.size(2) * attn.size(3) : attn.size(2);
  const int64_t merged_sizes[] = {b, s, width};
  const TensorView merged_like = TensorView::contiguous(nullptr, attn.dtype(), merged_sizes, 3, attn.device());
  ws.reset(aligned_bytes(mlp) + aligned_bytes(merged_like));
  TensorView activated = intermediate(ws, mlp);
  activation(ActivationOp::gelu_tanh, mlp, activated, stream);  // F.gelu(mlp, approximate="tanh")
  TensorView merged = attn;
  if (attn.dim() == 4) {  // attn.reshape(B, S, H * D) of the attention's heads: a copy
    merged = intermediate(ws, merged_like);
    const int64_t heads_sizes[] = {b, s, attn.size(2), attn.size(3)};
    copy(attn, TensorView::contiguous(merged.data(), attn.dtype(), heads_sizes, 4, attn.device()), stream);
  }
  copy(merged, out.narrow(2, 0, width), stream);  // torch.cat: both halves copied
  copy(activated, out.narrow(2, width, mlp.size(2)), stream);
}

void bias_silu_chain(const TensorView& x, const TensorView& bias, const TensorView& out, Workspace& ws,
                     Stream stream) {
  ws.reset(aligned_bytes(out));
  TensorView biased = intermediate(ws, out);
  binary(BinaryOp::add, x, bias, biased, 1.0, stream);  // x + bias
  activation(ActivationOp::silu, biased, out, stream);  // F.silu(...)
}

void bias_glu_chain(const TensorView& x, const TensorView* bias, const TensorView& out, Workspace& ws,
                    Stream stream) {
  ws.reset((bias ? aligned_bytes(x) : 0) + aligned_bytes(out));
  TensorView biased = x;
  if (bias) {
    biased = intermediate(ws, x);
    binary(BinaryOp::add, x, *bias, biased, 1.0, stream);  // x + bias
  }
  const int64_t c = x.size(-1) / 2;
  const TensorView h = biased.narrow(-1, 0, c), g = biased.narrow(-1, c, c);  // chunk(2, dim=-1)
  TensorView activated = intermediate(ws, out);
  activation(ActivationOp::silu, g, activated, stream);  // F.silu(g)
  binary(BinaryOp::mul, h, activated, out, 1.0, stream);  // h * ...
}

}  // namespace dfuse::eager
