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
// F.silu(x + bias)
void bias_silu_chain(const TensorView& x, const TensorView& bias, const TensorView& out, Workspace& ws,
                     Stream stream = {});
// h, g = (x + bias).chunk(2, dim=-1); h * F.silu(g)   (bias null: h, g = x.chunk(2, dim=-1))
void bias_glu_chain(const TensorView& x, const TensorView* bias, const TensorView& out, Workspace& ws,
                    Stream stream = {});

}  // namespace dfuse::eager
