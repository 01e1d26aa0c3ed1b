// diffusion.rope_interleaved_pairs — replaces diffusers' apply_rotary_emb(x, (cos, sin),
// use_real=True, use_real_unbind_dim=-1) (FLUX.1, FLUX.2, HunyuanVideo, LTX-Video, CogVideoX),
// about 8 eager kernels (the reshape/unbind views, neg, stack, the two .float() casts, mul, mul,
// add, .to(x.dtype)):
//   cos, sin = freqs_cis  # [S, D]                        (fp32, each frequency repeated twice)
//   if sequence_dim == 2:
//       cos = cos[None, None, :, :]
//       sin = sin[None, None, :, :]
//   elif sequence_dim == 1:
//       cos = cos[None, :, None, :]
//       sin = sin[None, :, None, :]
//   cos, sin = cos.to(x.device), sin.to(x.device)
//   x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)  # [B, H, S, D//2]
//   x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
//   out = (x.float() * cos + x_rotated.float() * sin).to(x.dtype)
// (LTX-Video's own copy: x [B, S, H*D], x.unflatten(2, (-1, 2)) and .flatten(2), tables
// [B, S, H*D]: the same pairs over one wide "head".)
// Contract: bit-exact against that chain. Pair p of a head, x1 = x[2p], x2 = x[2p+1]:
//   out[2p]   = T(x1 * cos[2p]   + (-x2) * sin[2p])
//   out[2p+1] = T(x2 * cos[2p+1] +   x1  * sin[2p+1])
// Products and sum in fp32 (aten's mul and add of fp32 tensors: IEEE mul, add as fma(b, 1, a) =
// a + b), one rounding to T: rope_rotate_half's fp32_opmath element, with the partner taken from
// the same pair instead of the other half. The negation is exact. Tables in x's dtype (bf16/f16)
// are promoted exactly by x.float() * cos, so the same arithmetic holds for them.
#pragma once

#include "common/rows.h"
#include "dfuse/core/device.h"
#include "ops/rope/rope_rotate_half.h"

namespace dfuse::detail {

template <typename T>
struct RotatedPair {
  T even, odd;
};

// One pair; x1, x2, c0, c1, s0, s1 are the exact float values of the stored operands.
template <typename T>
DFUSE_HD RotatedPair<T> rope_interleaved_pair(float x1, float x2, float c0, float c1, float s0, float s1) {
  return {rotate_half_element<T, RopeMath::fp32_opmath>(x1, -x2, c0, s0),
          rotate_half_element<T, RopeMath::fp32_opmath>(x2, x1, c1, s1)};
}

struct RopeInterleavedPairsParams {
  DType dtype = DType::bf16;        // x and out
  DType table_dtype = DType::f32;   // cos and sin: f32 or x's dtype
  int device = 0;
  RowGeometry geom;  // rows are heads of x: cols = D
  RowOperand x, cos, sin, out;
};

using RopeInterleavedPairsEntry = void (*)(const RopeInterleavedPairsParams& p, Stream stream);

}  // namespace dfuse::detail
