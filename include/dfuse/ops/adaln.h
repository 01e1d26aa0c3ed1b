// dfuse ops, adaLN modulation and gating family.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts
// (and, given `why`, says which guard failed), and <op>(...) re-checks and throws
// dfuse::Unsupported naming the failed guard. The backend is chosen by the device of the
// tensors: host tensors run the host backend, CUDA tensors the CUDA backend (loaded on first
// use). Outputs are caller-owned; `out` may alias `x` (in place) only where stated.
#pragma once

#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

// diffusion.modulate_scale_shift: out = x * (1 + scale) + shift, rounded to the storage dtype
// after each of the three eager ops (bit-exact in bf16, f16 and f32).
//   x:      [..., D], rank 1..4, last dim contiguous, any outer strides
//   scale:  broadcastable to x (right-aligned), last dim contiguous or size 1 broadcast;
//           per batch [B,1,D], per token [B,S,D], per frame [B,F,1,D] against x [B,F,HW,D],
//           strided chunk(6) slices
//   shift:  same rules as scale
//   out:    x's shape, last dim contiguous; may be x itself
// All operands share one dtype (bf16, f16, f32) and one device.
bool can_use_modulate_scale_shift(const TensorView& x, const TensorView& scale, const TensorView& shift,
                                  const TensorView& out, std::string* why = nullptr);
void modulate_scale_shift(const TensorView& x, const TensorView& scale, const TensorView& shift,
                          const TensorView& out, Stream stream = {});

// diffusion.residual_gate_add: out = residual + gate * update, two roundings to the storage
// dtype (the mul, then the add), bit-exact in bf16, f16 and f32.
//   residual: [..., D], rank 1..4, last dim contiguous
//   update:   same shape as residual, last dim contiguous
//   gate:     broadcastable to residual: per batch [B,1,D], per token [B,S,1], or full
//   out:      residual's shape, last dim contiguous; may be residual itself
bool can_use_residual_gate_add(const TensorView& residual, const TensorView& gate, const TensorView& update,
                               const TensorView& out, std::string* why = nullptr);
void residual_gate_add(const TensorView& residual, const TensorView& gate, const TensorView& update,
                       const TensorView& out, Stream stream = {});

}  // namespace dfuse
