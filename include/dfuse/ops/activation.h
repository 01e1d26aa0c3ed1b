// dfuse ops, activation family: SiLU-gated products, biased SiLU, and tanh-GELU into a cat.
//
// Every op is a pair: can_use_<op>(...) answers for exactly the inputs the kernel accepts
// (and, given `why`, says which guard failed), and <op>(...) re-checks and throws
// dfuse::Unsupported naming the failed guard. The backend is chosen by the device of the
// tensors (host or CUDA). Outputs are caller-owned.
//
// Contract of every op: bit-exact in bf16, f16 and f32 against the eager chain on the same
// backend. SiLU's exp and GELU's tanh are libdevice expf and tanhf on CUDA (as torch 2.11 computes
// them) and the C++ library's on the host; the two agree on most inputs but not all, so host results
// are bit-exact against the host eager replicas (dfuse/eager), CUDA results against torch.
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

// diffusion.gelu_tanh_cat: out = torch.cat([attn, F.gelu(mlp, approximate="tanh")], dim=2), the tail of
// FLUX.1's single-stream block; the GELU rounded once to the storage dtype, the cat a copy.
//   attn: [B, S, Da], or the attention's heads [B, S, H, D] taken as their reshape(B, S, H * D) (Da = H * D,
//         one copy less than the eager reshape + cat); last dim contiguous, any other strides
//   mlp:  [B, S, Dm], last dim contiguous, any outer strides
//   out:  [B, S, Da + Dm], contiguous, overlapping neither input
bool can_use_gelu_tanh_cat(const TensorView& attn, const TensorView& mlp, const TensorView& out,
                           std::string* why = nullptr);
void gelu_tanh_cat(const TensorView& attn, const TensorView& mlp, const TensorView& out, Stream stream = {});

}  // namespace dfuse
