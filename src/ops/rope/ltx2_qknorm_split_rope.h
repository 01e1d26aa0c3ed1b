// diffusion.ltx2_qknorm_split_rope — replaces LTX-2's attention QK-norm and split RoPE
// (diffusers 0.42.1 transformer_ltx2.py, LTX2AudioVideoAttnProcessor with rope_type="split"), for
// x in (query, key):
//   x = attn.norm_q(x)       torch.nn.RMSNorm(heads * head_dim): F.rms_norm over the whole inner
//                            dim C = H * D of each token, weight [C], rounded to x's dtype
//   x = apply_split_rotary_emb(x, (cos, sin))       cos, sin: fp32 [B, H, S, D/2]
//     b, h, t, _ = cos.shape
//     x = x.reshape(b, t, h, -1).swapaxes(1, 2)     # [B, H, S, D]
//     split_x = x.reshape(*x.shape[:-1], 2, r).float()   # r = D / 2
//     first_x, second_x = split_x[..., :1, :], split_x[..., 1:, :]
//     out = split_x * cos.unsqueeze(-2)
//     out[..., :1, :].addcmul_(-sin.unsqueeze(-2), second_x)
//     out[..., 1:, :].addcmul_(sin.unsqueeze(-2), first_x)
//     out = out.reshape(..., D).swapaxes(1, 2).reshape(b, t, -1).to(x_dtype)
// About 12 eager kernels per tensor (the norm, the .float() copy, mul, neg, two addcmul_, the
// transposing copy, the cast). Contract: bit-exact against that chain. Element i < r of head h,
// with x1 = normed[h*D + i], x2 = normed[h*D + r + i] (the RMSNorm output, already rounded to T)
// and c, s = cos/sin[b, h, s, i]:
//   out[h*D + i]     = T(fma(-s, x2, x1 * c))
//   out[h*D + r + i] = T(fma( s, x1, x2 * c))
// x1 * c is aten's fp32 mul (one rounding). addcmul with value 1 is torch 2.11's
// pointwise_op_impl (ATen/native/cuda/DeviceAddCmulCdiv.cuh): std::fma(tensor1, tensor2, self),
// one rounding; then one rounding to T. The RMSNorm is F.rms_norm's (common/rms_norm_arith.h),
// shared with the RMSNorm row ops.
#pragma once

#include <cstdint>

#include "common/arith.h"
#include "common/rows.h"
#include "dfuse/core/device.h"
#include "ops/norm/rmsnorm_rows.h"
#include "ops/rope/rope_interleaved_pairs.h"

namespace dfuse::detail {

// One split-RoPE pair from the normalized values x1, x2 (exact floats of T values) and the fp32
// table values c, s.
template <typename T>
DFUSE_HD RotatedPair<T> ltx2_split_rope_pair(float x1, float x2, float c, float s) {
  return {Storage<T>::store(fma_rn(-s, x2, mul_rn(x1, c))), Storage<T>::store(fma_rn(s, x1, mul_rn(x2, c)))};
}

// One of q, k: its tokens are the rows of the RMSNorm (cols = C = heads * 2 * half).
struct Ltx2SplitRopeSide {
  RmsNormRowsParams norm;    // in[0] = x [B, S, C], out
  RowOperand cos, sin;       // head 0's table row of token (b, s): stride per outer dim of x's rows
  int64_t cos_head_stride = 0, sin_head_stride = 0;  // elements from head h to h + 1
  int64_t heads = 1, half = 0;                       // H and r = D / 2
};

struct Ltx2QkNormSplitRopeParams {
  Ltx2SplitRopeSide side[2];  // q, k
};

using Ltx2QkNormSplitRopeEntry = void (*)(const Ltx2QkNormSplitRopeParams& p, Stream stream);

}  // namespace dfuse::detail
