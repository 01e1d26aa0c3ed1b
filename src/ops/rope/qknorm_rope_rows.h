// The rows shared by the QK-norm + RoPE ops (fused_inplace_qknorm_rope in its exact, one-rounding and
// out-of-place forms, flux2_strided_qknorm_rope, flux2_qkv_epilogue): a head of x is normalized by one
// of the eager RMSNorm chains (ops/norm/rmsnorm_rows.h, common/rms_norm_arith.h), then rotated by a
// RoPE chain, and written to its destination (x itself, or another tensor of x's shape).
//
// Per head (D = 128 or 256 elements), with n[e] the normalized element e:
//   round_norm (the split chain: the norm kernel's output is a T tensor the RoPE reads):
//     n[e] = T(normalized), so the RoPE sees exactly the values the norm module returned
//   !round_norm (the one-rounding form): n[e] is the fp32 value before that rounding
//   out[e] = T(n[e])                                   e >= R (rotate-half tail)
//   out[e] = rotate_half_element<T, M>(n[e], p, c[e], s[e])   otherwise, partner p:
//     rotate_half:        p = -n[e + R/2] (e < R/2), n[e - R/2] (e >= R/2)   rope_rotate_half's chain
//     interleaved_pairs:  p = -n[e + 1] (e even), n[e - 1] (e odd), R = D     rope_interleaved_pairs'
//                         chain (rope_interleaved_pair, fp32 opmath)
// A part may also copy rows of another tensor of x's geometry bit for bit (flux2_qkv_epilogue's v
// rows into the joint buffer), so that one launch writes every output.
#pragma once

#include <cstdint>

#include "common/guards.h"
#include "common/rows.h"
#include "dfuse/core/device.h"
#include "dfuse/ops/rope.h"
#include "ops/norm/rmsnorm_rows.h"
#include "ops/rope/rope_interleaved_pairs.h"
#include "ops/rope/rope_rotate_half.h"

namespace dfuse::detail {

enum class RopePairing : uint8_t {
  rotate_half,        // the partner R/2 away; partial rotary dims (R < D) keep the normalized tail
  interleaved_pairs,  // the partner in the same adjacent pair; R = D, fp32 opmath
};

// One tensor's heads.
struct QkNormRopeRows {
  RmsNormRowsParams norm;  // rows.in[0] = x, rows.out = the destination (may be x: every head is read first)
  DType table_dtype = DType::f32;
  RopeMath math = RopeMath::fp32_opmath;
  RopePairing pairing = RopePairing::rotate_half;
  bool round_norm = true;  // the normalized value rounded to T before the RoPE
  int64_t rot_dim = 0;     // R
  RowOperand cos, sin;     // broadcast against x[..., :R]
  bool copies = false;     // copy_src's head copied bit for bit to copy_dst (both of x's geometry)
  RowOperand copy_src, copy_dst;
};

// Up to four tensors' heads in one launch (q and k; text and image q and k of a joint buffer).
constexpr int kQkNormRopeMaxParts = 4;
struct QkNormRopeLaunch {
  QkNormRopeRows part[kQkNormRopeMaxParts];
  int parts = 0;
};

using QkNormRopeEntry = void (*)(const QkNormRopeLaunch& launch, Stream stream);

// The normalized element as the RoPE reads it: rounded to T (split chain, round_norm) or not (one-rounding
// form). `element`: the chain's RmsNormElement (with_rms_norm_element); `round_norm`: p.round_norm, as a bool or,
// in a kernel specialized on it, a std::bool_constant.
template <typename T, typename Element, typename RoundNorm>
DFUSE_HD float qknorm_rope_normalized(Element element, RoundNorm round_norm, float x, float inv, float weight) {
  const float y = element(x, inv, weight);
  return round_norm ? Storage<T>::round(y) : y;
}

// The same with the chain and the rounding read per call.
template <typename T>
DFUSE_HD float qknorm_rope_normalized(const QkNormRopeRows& p, float x, float inv, float weight) {
  return with_rms_norm_element<T>(
      p.norm, [&](auto element) { return qknorm_rope_normalized<T>(element, p.round_norm, x, inv, weight); });
}

// Output element e < R of a rotate-half head whose normalized values are n(·).
template <typename T, RopeMath M, typename Normalized>
DFUSE_HD T qknorm_rotate_half_output(Normalized n, int e, int rot, float c, float s) {
  const int half = rot / 2;
  return rotate_half_element<T, M>(n(e), e < half ? -n(e + half) : n(e - half), c, s);
}

// Guards on one tensor x of a QK-norm + RoPE op (its own weight and the tables): rank 2..4, the
// RMSNorm input guards, fewer than 2^31 elements, D = 128 or 256, the eager RMSNorm path the warp
// reductions reproduce (F.rms_norm's vectorized path; the decomposed mean's 32-lane layout), the
// tables (rotate_half: rope_rotate_half's; interleaved_pairs: R = D, fp32 opmath).
void check_qknorm_rope_input(GuardList& g, RmsNormChain chain, const char* name, const TensorView& x,
                             const TensorView* weight, const char* weight_name, double eps, const TensorView& cos,
                             const TensorView& sin, RopeMath math, RopePairing pairing);
// The one-rounding form is stated for the fp32-opmath RoPE only.
void check_qknorm_rope_rounding(GuardList& g, bool round_norm, RopeMath math);

// x's heads normalized, rotated and written to out (x's shape); cos/sin broadcast against x.
QkNormRopeRows qknorm_rope_rows(RmsNormChain chain, const TensorView& x, const TensorView* weight, double eps,
                                const TensorView& cos, const TensorView& sin, RopeMath math, RopePairing pairing,
                                bool round_norm, const TensorView& out);

// The kernels: host (libdfuse) and CUDA (libdfuse_cuda, ops/rope/qknorm_rope_rows.cu).
void qknorm_rope_host(const QkNormRopeLaunch& launch);
void qknorm_rope_cuda(const QkNormRopeLaunch& launch, Stream stream);

}  // namespace dfuse::detail
