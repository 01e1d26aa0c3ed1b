// diffusion.ltx25_decoder_rope — replaces the LTX-2.5 diffusion decoder's 3D RoPE of q and k
// (diffusers 0.42.1 models/autoencoders/ltx2_diffusion_decoder.py, LTX2VideoVaeRotaryPosEmbed3D
// applied by LTX2VideoVaeNeighborhoodAttention.project_qkv to the normed query and key), with the
// per-axis cos/sin computed once and cached instead of per call. For x [B, T, H, W, heads, D] with D
// split into (dt, dh, dw) channels for the frame, row and column axes:
//   for each axis a with channels [c0, c0 + da) and positions p_a (t, h or w of the token):
//     pairs = x[..., c0:c0+da].reshape(..., da/2, 2)
//     even, odd = pairs[..., 0].float(), pairs[..., 1].float()
//     cos, sin = cos_a[p_a], sin_a[p_a]          # fp32 tables [N_a, da/2] (angles.cos(), .sin())
//     rotated_a = torch.stack([even * cos - odd * sin, even * sin + odd * cos], -1).reshape(...).to(x.dtype)
//   out = torch.cat([rotated_t, rotated_h, rotated_w], -1)
// About 12 eager kernels per axis and tensor (casts, four muls, sub, add, stack, cast, cat copy).
// Contract: bit-exact against that chain. Pair j of the axis (e = x[c0 + 2j], o = x[c0 + 2j + 1]):
//   out[c0 + 2j]     = T((e * c) - (o * s))
//   out[c0 + 2j + 1] = T((e * s) + (o * c))
// each product one fp32 rounding (aten's mul), the difference/sum one more (aten's sub is
// fma(b, -1, a) = a - b, add is a + b), then one rounding to T.
#pragma once

#include <cstdint>

#include "common/arith.h"
#include "dfuse/core/device.h"
#include "ops/rope/rope_interleaved_pairs.h"

namespace dfuse::detail {

// One pair (e, o) rotated by (c, s) with every fp32 product, difference and sum rounded, as separate
// aten ops compute it; e, o, c, s are the exact float values of the stored operands. Shared with
// helios_qk_rope, whose chain has the same four products.
template <typename T>
DFUSE_HD RotatedPair<T> rope_pair_rounded_each(float e, float o, float c, float s) {
  return {Storage<T>::store(sub_rn(mul_rn(e, c), mul_rn(o, s))), Storage<T>::store(add_rn(mul_rn(e, s), mul_rn(o, c)))};
}

struct Ltx25AxisTable {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t cos_stride = 0, sin_stride = 0;  // elements from position p to p + 1
  int64_t pairs = 0;                       // da / 2
};

struct Ltx25DecoderRopeParams {
  DType dtype = DType::bf16;
  int device = 0;
  int64_t sizes[5] = {1, 1, 1, 1, 1};  // B, T, H, W, heads
  int64_t head_dim = 0;                // D
  const void* x[2] = {nullptr, nullptr};  // q, k
  void* out[2] = {nullptr, nullptr};      // q_out, k_out
  int64_t x_strides[2][5] = {}, out_strides[2][5] = {};  // elements, dims 0..4 (the last dim is contiguous)
  Ltx25AxisTable axis[3];                 // frame, row, column

  // The axis of pair j of a head and the pair's index within that axis, in the caller's index type I (a
  // head's pairs fit any).
  template <typename I>
  DFUSE_HD int axis_of(I j, I& local) const {
    for (int a = 0; a < 2; ++a) {
      if (j < I(axis[a].pairs)) {
        local = j;
        return a;
      }
      j -= I(axis[a].pairs);
    }
    local = j;
    return 2;
  }
};

using Ltx25DecoderRopeEntry = void (*)(const Ltx25DecoderRopeParams& p, Stream stream);

}  // namespace dfuse::detail
