// dfuse ops, activation family: SiLU-gated products and biased SiLU.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts
// (and, given `why`, says which guard failed), and <op>(...) re-checks and throws
// dfuse::Unsupported naming the failed guard. The backend is chosen by the device of the
// tensors (host or CUDA). Outputs are caller-owned.
//
// Contract of every op: bit-exact in bf16, f16 and f32 against the eager chain on the same
// backend. SiLU's exp is libdevice expf on CUDA (as torch 2.11 computes it) and std::exp(float)
// on the host; the two agree on most inputs but not all, so host results are bit-exact against
// the host eager replicas (dfuse/eager), CUDA results against torch.
#pragma once

#include <string>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse {

// diffusion.silu_mul: out = F.silu(a) * b, rounded to the storage dtype after the silu and after
// the mul.
//   a:    [..., D], rank 1..4, last dim contiguous, any outer strides (e.g. p[..., :D] of a
//         packed [..., 2D] gate/up projection)
//   b:    a's shape, last dim contiguous (e.g. p[..., D:])
//   out:  a's shape, last dim contiguous; may be a or b itself
bool can_use_silu_mul(const TensorView& a, const TensorView& b, const TensorView& out,
                      std::string* why = nullptr);
void silu_mul(const TensorView& a, const TensorView& b, const TensorView& out, Stream stream = {});

// diffusion.bias_silu: out = F.silu(x + bias), rounded after the add and after the silu.
//   x:    rank 1..4, last dim contiguous, any outer strides
//   bias: broadcastable to x (right-aligned), last dim contiguous or of size 1: [C] against
//         channels-last x [B, N, C]; [C, 1, 1] or [C, 1] against channel-first x [B, C, H, W] or
//         [B, C, HW] (one bias value per row)
//   out:  x's shape, last dim contiguous; may be x itself
bool can_use_bias_silu(const TensorView& x, const TensorView& bias, const TensorView& out,
                       std::string* why = nullptr);
void bias_silu(const TensorView& x, const TensorView& bias, const TensorView& out, Stream stream = {});

// diffusion.bias_glu: h, g = (x + bias).chunk(2, dim=-1); out = h * F.silu(g), rounded after the
// add, the silu and the mul. Channels last: the 2C channels of x are its last dim.
//   x:    [..., 2C], rank 1..4, last dim contiguous and even
//   bias: null (x is already biased: out = h * F.silu(g)) or a tensor broadcastable to x whose
//         last dim is x's 2C, contiguous: [2C] per channel
//   out:  [..., C], last dim contiguous; never overlaps x
bool can_use_bias_glu(const TensorView& x, const TensorView* bias, const TensorView& out,
                      std::string* why = nullptr);
void bias_glu(const TensorView& x, const TensorView* bias, const TensorView& out, Stream stream = {});

}  // namespace dfuse
