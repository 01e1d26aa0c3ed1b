// RMSNorm arithmetic exactly as PyTorch 2.11's eager CUDA chains compute it (reference/
// pytorch-eager-arithmetic.md §2), shared by the host and CUDA fused kernels:
//  - F.rms_norm (aten::_fused_rms_norm, layer_norm_kernel.cu with rms_norm=true): the vectorized
//    path's sum of squares (thread t of 128 folds chunks t, t+128, ... with fma(v, v, acc), warp
//    shuffle-down 16..1, then warps 0+2, 1+3, 0+1), ms = sum / D (IEEE division),
//    rstd = rsqrtf(ms + eps); the generic path's Welford moments (common/layer_norm_stats.h) with
//    rstd = rsqrtf(fma(mean, mean, var) + eps). Output element: weight * (rstd * x), one rounding.
//  - the diffusers decomposed chain: x.float().pow(2) (one FMUL per element), .mean(-1) in
//    Reduce.cuh's order (MeanReduceConfig: per-lane accumulators over float4 vectors, their fold,
//    shared-memory tree for lanes > 32, shuffle-down, times factor = float(M) / float(M * D)),
//    + eps, rsqrtf, x.float() * r, .to(T), * weight (two roundings).
//  - the storage-dtype chain (Z-Image's RMSNorm on bf16 x: x * torch.rsqrt(x.pow(2).mean(-1,
//    keepdim=True) + eps) * weight, every op rounded to T): squares rounded to T, the mean of a T
//    tensor in Reduce.cuh's order with 16-byte vectors (8 elements for bf16/f16, 4 for f32), rounded
//    to T, + eps rounded, rsqrt rounded, x * rstd rounded, * weight rounded.
// The host emulations below fold in the same orders, sequentially.
#pragma once

#include <cstdint>

#include "common/arith.h"
#include "common/layer_norm_stats.h"

namespace dfuse::detail {

// ---- F.rms_norm ----------------------------------------------------------------------------------

// rstd of the vectorized path from the row's sum of squares.
DFUSE_HD float torch_rms_norm_rstd(float sum_of_squares, int64_t n, float eps) {
  return rsqrt_f(add_rn(div_rn(sum_of_squares, float(n)), eps));
}

// The same for a row length kN known at compile time (the warp and half-warp forms). A power of two divides as
// the product with 1 / kN (exact): the same correctly rounded value of the same real number (subnormals, Inf and
// NaN included), one multiplication in place of the ~10-instruction IEEE division.
template <int64_t kN>
DFUSE_HD float torch_rms_norm_rstd(float sum_of_squares, float eps) {
  static_assert(kN > 0, "a row holds elements");
  if constexpr ((kN & (kN - 1)) == 0)
    return rsqrt_f(add_rn(mul_rn(sum_of_squares, 1.0f / float(kN)), eps));
  else
    return torch_rms_norm_rstd(sum_of_squares, kN, eps);
}

// F.rms_norm's sum over its four warps' sums, (w0 + w2) + (w1 + w3), where only warps 0 .. kWarps - 1 hold
// elements: an absent warp's +0 is left out, which changes nothing (a sum of squares is never -0).
template <int kWarps>
DFUSE_HD float torch_rms_norm_warps_total(const float (&w)[4]) {
  static_assert(kWarps >= 1 && kWarps <= 4, "F.rms_norm's vectorized path has four warps");
  const float even = kWarps > 2 ? add_rn(w[0], w[2]) : w[0];
  if constexpr (kWarps == 1) return even;
  const float odd = kWarps > 3 ? add_rn(w[1], w[3]) : w[1];
  return add_rn(even, odd);
}

// rstd of the generic path from the Welford moments (m2 + m1 * m1 contracted to one fma).
DFUSE_HD float torch_rms_norm_rstd_generic(LayerNormStats s, float eps) {
  return rsqrt_f(add_rn(fma_rn(s.mean, s.mean, s.var), eps));
}

// The normalized element before its rounding to T: weight * (rstd * x), or rstd * x. (The generic
// path computes (x * rstd) * weight: the same two IEEE products.)
DFUSE_HD float torch_rms_norm_element(float x, float rstd, bool has_weight, float weight) {
  const float t = mul_rn(rstd, x);
  return has_weight ? mul_rn(weight, t) : t;
}

// ---- the diffusers decomposed chain --------------------------------------------------------------

// The launch configuration Reduce.cuh (setReduceConfig, 2.11) picks for a float mean over the
// contiguous last dim of an [M, N] tensor; it decides the reduction order.
struct MeanReduceConfig {
  int lanes = 32;           // block.x: threads sharing one row (step_input)
  int vec = 4;              // input_vec_size: 16 bytes of the input dtype (4 floats, 8 bf16/f16)
  bool vectorized = false;  // vec-element loads (N >= 128)
  bool split = false;       // input also split across warps / CTAs (not reproduced)
};

inline int64_t last_pow2(int64_t n) {
  int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

// `vec`: input_vec_size of the mean's input dtype, 16 / sizeof(element).
inline MeanReduceConfig mean_reduce_config(int64_t rows, int64_t n, int vec = 4) {
  MeanReduceConfig c;
  c.vec = vec;
  c.vectorized = n >= 128;
  const int64_t dim0 = c.vectorized ? n / vec : n;
  const int64_t d0 = dim0 < 512 ? last_pow2(dim0) : 512;
  const int64_t d1 = rows < 512 ? last_pow2(rows) : 512;
  int64_t bw = d0 < 32 ? d0 : 32;
  const int64_t bh = d1 < 512 / bw ? d1 : 512 / bw;
  bw = d0 < 512 / bh ? d0 : 512 / bh;
  const int64_t values_per_thread = (n + bw - 1) / bw;
  c.lanes = int(bw);
  c.split = values_per_thread >= (bh * 16 < 256 ? bh * 16 : 256);
  return c;
}

// MeanOps' factor: float(num_output_elements) / float(numel), a float division on the host.
inline float mean_factor(int64_t rows, int64_t n) { return float(rows) / float(rows * n); }

// The row's inverse RMS from the lane-folded sum of squares.
DFUSE_HD float decomposed_inv_rms(float sum, float factor, float eps) {
  return rsqrt_f(add_rn(mul_rn(sum, factor), eps));
}

// ---- the storage-dtype chain -----------------------------------------------------------------------

// A square rounded to T (x.pow(2) in T).
template <typename T>
DFUSE_HD float storage_square(float x) {
  return Storage<T>::round(mul_rn(x, x));
}

// rstd in T from the lane-folded sum of the T squares: mean rounded to T, + eps rounded, rsqrt rounded.
template <typename T>
DFUSE_HD float storage_rms_norm_rstd(float sum, float factor, float eps) {
  using S = Storage<T>;
  return S::round(rsqrt_f(S::round(add_rn(S::round(mul_rn(sum, factor)), eps))));
}

// The normalized element before its last rounding: x * rstd rounded to T, times weight.
template <typename T>
DFUSE_HD float storage_rms_norm_element(float x, float rstd, bool has_weight, float weight) {
  const float h = mul_rn(x, rstd);
  return has_weight ? mul_rn(Storage<T>::round(h), weight) : h;
}

// The normalized element: h = x * r rounded to T, times weight, before the final rounding; without
// a weight h itself (rounded once by the caller).
template <typename T>
DFUSE_HD float decomposed_rms_norm_element(float x, float inv_rms, bool has_weight, float weight) {
  const float h = mul_rn(x, inv_rms);
  return has_weight ? mul_rn(Storage<T>::round(h), weight) : h;
}

// One lane's contribution to the mean of a row of n squares, sq(k) returning element k's square:
// Reduce.cuh's input_vectorized_thread_reduce_impl (head-alignment step for a row starting `shift`
// elements past a 16-byte boundary, c.vec (= kVec, 4 or 8) accumulators over vectors strided by
// `lanes`, tail into accumulator 0) or thread_reduce_impl (4 accumulators strided by lanes), then the
// in-order fold.
template <int kVec, typename Sq>
DFUSE_HD float mean_lane_partial_vec(Sq sq, int64_t n, const MeanReduceConfig& c, int lane, int shift) {
  float acc[kVec];
  for (int i = 0; i < kVec; ++i) acc[i] = 0.0f;
  int width = 4;
  if (c.vectorized) {
    width = kVec;
    int64_t begin = 0, end = n;
    if (shift > 0) {
      if (lane >= shift && lane < kVec) acc[0] = add_rn(acc[0], sq(lane - shift));
      begin = kVec - shift;
      end = n - begin;
    }
    for (int64_t idx = lane; idx * kVec + kVec - 1 < end; idx += c.lanes)
      for (int i = 0; i < kVec; ++i) acc[i] = add_rn(acc[i], sq(begin + idx * kVec + i));
    const int64_t tail = end - end % kVec + lane;
    if (tail < end) acc[0] = add_rn(acc[0], sq(begin + tail));
  } else {
    int64_t idx = lane;
    for (; idx + 3 * int64_t(c.lanes) < n; idx += 4 * int64_t(c.lanes))
      for (int i = 0; i < 4; ++i) acc[i] = add_rn(acc[i], sq(idx + i * int64_t(c.lanes)));
    for (int i = 0; i < 4; ++i)
      if (idx < n) {
        acc[i] = add_rn(acc[i], sq(idx));
        idx += c.lanes;
      }
  }
  float v = acc[0];
  for (int i = 1; i < kVec; ++i)
    if (i < width) v = add_rn(v, acc[i]);
  return v;
}

template <typename Sq>
DFUSE_HD float mean_lane_partial(Sq sq, int64_t n, const MeanReduceConfig& c, int lane, int shift) {
  return c.vec == 8 ? mean_lane_partial_vec<8>(sq, n, c, lane, shift) : mean_lane_partial_vec<4>(sq, n, c, lane, shift);
}

// The lane partials (c.lanes of them, overwritten) folded as block_x_reduce does: a halving tree
// down to 32 lanes, then shuffle-down with offsets min(lanes, 32)/2 .. 1.
DFUSE_HD float mean_fold_lanes(float* v, int lanes) {
  for (int off = lanes / 2; off >= 32; off /= 2)
    for (int l = 0; l < off; ++l) v[l] = add_rn(v[l], v[l + off]);
  for (int off = (lanes < 32 ? lanes : 32) / 2; off >= 1; off /= 2)
    for (int l = 0; l < off; ++l) v[l] = add_rn(v[l], v[l + off]);
  return v[0];
}

// ---- host emulations of the whole row ------------------------------------------------------------

constexpr int kRmsNormVecThreads = 128;  // (32, 4) block of aten's vectorized kernel

// Sum of squares of one row in the vectorized F.rms_norm order; load(k) returns element k as float.
template <typename Load>
float torch_rms_norm_sum_of_squares_host(Load load, int64_t n) {
  float s[kRmsNormVecThreads] = {};
  for (int t = 0; t < kRmsNormVecThreads; ++t)
    for (int64_t i = t; i < n / 4; i += kRmsNormVecThreads)
      for (int k = 0; k < 4; ++k) {
        const float v = load(4 * i + k);
        s[t] = fma_rn(v, v, s[t]);
      }
  for (int w = 0; w < kRmsNormVecThreads / 32; ++w)
    for (int off = 16; off >= 1; off /= 2)
      for (int l = 0; l < off; ++l) s[32 * w + l] = add_rn(s[32 * w + l], s[32 * w + l + off]);
  return add_rn(add_rn(s[0], s[64]), add_rn(s[32], s[96]));
}

// The lane-folded sum of one row's squares in Reduce.cuh's order; sq(k) returns element k's square,
// `shift` = the row's element offset from a 16-byte boundary in the contiguous pow(2) intermediate
// ((row index * n) % c.vec).
template <typename Sq>
float mean_sum_host(Sq sq, int64_t n, const MeanReduceConfig& c, int shift) {
  float v[512];
  for (int lane = 0; lane < c.lanes; ++lane) v[lane] = mean_lane_partial(sq, n, c, lane, shift);
  return mean_fold_lanes(v, c.lanes);
}

// The decomposed chain's inverse RMS of one row.
template <typename Load>
float decomposed_inv_rms_host(Load load, int64_t n, const MeanReduceConfig& c, int shift, float factor, float eps) {
  const auto sq = [&](int64_t k) {
    const float x = load(k);
    return mul_rn(x, x);
  };
  return decomposed_inv_rms(mean_sum_host(sq, n, c, shift), factor, eps);
}

// The storage-dtype chain's rstd of one row.
template <typename T, typename Load>
float storage_rms_norm_rstd_host(Load load, int64_t n, const MeanReduceConfig& c, int shift, float factor,
                                 float eps) {
  const auto sq = [&](int64_t k) { return storage_square<T>(load(k)); };
  return storage_rms_norm_rstd<T>(mean_sum_host(sq, n, c, shift), factor, eps);
}

}  // namespace dfuse::detail
