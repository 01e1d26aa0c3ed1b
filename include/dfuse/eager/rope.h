// dfuse eager replicas for the rope family: the aten primitives its chains need beyond the
// same-dtype binary ops (dfuse/eager/binary.h) and copy_ (dfuse/eager/data_movement.h), and
// the chains themselves, composed exactly as model code writes them (every intermediate
// materialized). Host and CUDA; independent of the fused kernels' code.
#pragma once

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"
#include "dfuse/eager/binary.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/rope.h"

namespace dfuse::eager {

// dst.copy_(src) across dtypes (bf16, f16, f32, f64 in any combination), src broadcast to dst:
// aten's cast, which narrows a double through float (double -> float -> bf16/f16, each RNE).
void cast(const TensorView& src, const TensorView& dst, Stream stream = {});
// torch.neg(x) into out (same dtype): -float(x) rounded back, an exact sign flip.
void neg(const TensorView& x, const TensorView& out, Stream stream = {});
// out = a <op> b under type promotion: out's dtype is the promoted dtype (f32 or f64), a and b
// any floating dtype that converts exactly into it; the op runs in out's opmath (float for f32,
// double for f64), one IEEE operation (sub as fma(b, -1, a) = a - b).
void promoted_binary(BinaryOp op, const TensorView& a, const TensorView& b, const TensorView& out,
                     Stream stream = {});

// The rope_rotate_half chain (dfuse/ops/rope.h), with R = cos.size(-1):
//   x_rot, x_pass = x[..., :R], x[..., R:]; x1, x2 = x_rot.chunk(2, -1)
//   x_rotated = torch.cat([-x2, x1], -1)
//   y = (x_rot.float() * cos + x_rotated.float() * sin).to(x.dtype)    fp32_opmath
//   y = x_rot * cos + x_rotated * sin                                  storage_dtype
//   out = torch.cat([y, x_pass], -1)
void rope_rotate_half_chain(const TensorView& x, const TensorView& cos, const TensorView& sin,
                            const TensorView& out, RopeMath math, Workspace& ws, Stream stream = {});

// diffusers' apply_rotary_emb(x, (cos, sin), use_real=True, use_real_unbind_dim=-1), the
// rope_interleaved_pairs chain:
//   x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
//   x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
//   out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
void rope_interleaved_pairs_chain(const TensorView& x, const TensorView& cos, const TensorView& sin,
                                  const TensorView& out, Workspace& ws, Stream stream = {});

// SANA-Video's apply_interleaved_rotary_emb for one tensor x (the fused op applies it to q and k):
//   x1, x2 = x.unflatten(-1, (-1, 2)).unbind(-1)
//   cos, sin = freqs_cos[..., 0::2], freqs_sin[..., 1::2]
//   out[..., 0::2] = x1 * cos - x2 * sin; out[..., 1::2] = x1 * sin + x2 * cos
void interleaved_rope_fp64_chain(const TensorView& x, const TensorView& freqs_cos, const TensorView& freqs_sin,
                                 const TensorView& out, Workspace& ws, Stream stream = {});

// fused_inplace_qknorm_rope's split chain for one of q, k (the result into out, x left as is):
//   h = F.rms_norm(x, (D,), weight, eps)  or diffusers' RMSNorm (chain)    [dfuse/eager/rms_norm.h]
//   out = the rope_rotate_half chain of h
void qknorm_rope_chain(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                       const TensorView& cos, const TensorView& sin, RopeMath math, const TensorView& out,
                       Workspace& ws, Stream stream = {});

}  // namespace dfuse::eager
