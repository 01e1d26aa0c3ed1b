// LayerNorm statistics and output element exactly as PyTorch 2.11's CUDA `native_layer_norm`
// computes them (aten/src/ATen/native/cuda/layer_norm_kernel.cu; reference/pytorch-eager-
// arithmetic.md §1), shared by host and CUDA code: the two Welford variants, the path choice, the
// output element of each path, and a host emulation of each path's reduction order.
//
// Paths (LayerNormKernelImplInternal): the vectorized kernel (one 128-thread block per row, 4-element
// chunks per thread, guarded-reciprocal Welford, warp shuffle then pairwise shared-memory tree)
// runs when N % 4 == 0, N <= 2^24 and the X/Y/gamma/beta pointers are aligned to 4*sizeof(T);
// otherwise the generic two-kernel path (RowwiseMomentsCUDAKernel with 512 threads and
// WelfordOps, then LayerNormForwardCUDAKernel). The two give different bits.
#pragma once

#include <cstdint>

#include "common/arith.h"
#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::detail {

enum class LayerNormPath : uint8_t { vectorized, generic };

inline const char* layer_norm_path_name(LayerNormPath p) {
  return p == LayerNormPath::vectorized ? "vectorized" : "generic";
}

// The path aten takes for rows of n elements of `elem_bytes` bytes, given whether every pointer
// it checks (X, Y, gamma, beta; a non-contiguous X is copied first, so aligned) is aligned to
// 4 * elem_bytes.
inline LayerNormPath layer_norm_path(int64_t n, bool pointers_aligned) {
  return (n % 4 == 0 && n <= (int64_t(1) << 24) && pointers_aligned) ? LayerNormPath::vectorized
                                                                      : LayerNormPath::generic;
}

// Whether the pointer aten checks for operand `t` is aligned to 4 elements: aten first makes the
// operand contiguous (expect_contiguous), so a non-contiguous operand is a fresh, aligned copy.
inline bool layer_norm_pointer_aligned(const TensorView& t) {
  return !t.is_contiguous() || size_t(t.alignment()) >= 4 * dtype_size(t.dtype());
}

// The path F.layer_norm(x, (x.size(-1),), weight, bias) takes on CUDA (weight/bias may be null). Y is
// a fresh allocation, so always aligned.
inline LayerNormPath layer_norm_path(const TensorView& x, const TensorView* weight, const TensorView* bias) {
  const bool aligned = layer_norm_pointer_aligned(x) && (!weight || layer_norm_pointer_aligned(*weight)) &&
                       (!bias || layer_norm_pointer_aligned(*bias));
  return layer_norm_path(x.size(-1), aligned);
}

// Vectorized-kernel Welford state (cuWelfordOnlineSum / cuWelfordCombine): all float.
struct WelfordVec {
  float mean = 0.0f, sigma2 = 0.0f, count = 0.0f;
};

// One element given `count` (s.count + 1) and `rcp`, its correctly rounded reciprocal:
// delta = v - mean; mean' = fma(delta, rcp, mean); sigma2' = fma(delta, v - mean', sigma2).
DFUSE_HD WelfordVec welford_vec_update_rcp(WelfordVec s, float v, float count, float rcp) {
  const float delta = sub_rn(v, s.mean);
  const float mean = fma_rn(delta, rcp, s.mean);
  return {mean, fma_rn(delta, sub_rn(v, mean), s.sigma2), count};
}

// One element as cuWelfordOnlineSum computes it: count += 1, the reciprocal by IEEE division.
DFUSE_HD WelfordVec welford_vec_update(WelfordVec s, float v) {
  const float count = add_rn(s.count, 1.0f);
  return welford_vec_update_rcp(s, v, count, div_rn(1.0f, count));
}

// welford_vec_update of a thread's `count`-th element (s has folded the count - 1 before it), for
// loops unrolled over a fixed number of elements: 1.0f / count is then a compile-time constant
// (exactly the correctly rounded reciprocal the division computes) and leaves the dependent chain
// of updates, where each update would otherwise wait on a division.
DFUSE_HD WelfordVec welford_vec_update_nth(WelfordVec s, float v, int count) {
  return welford_vec_update_rcp(s, v, float(count), 1.0f / float(count));
}

// cuWelfordCombine(own, other), as every reduction step calls it.
DFUSE_HD WelfordVec welford_vec_combine(WelfordVec own, WelfordVec other) {
  const float delta = sub_rn(own.mean, other.mean);
  const float count = add_rn(other.count, own.count);
  if (!(own.count > -other.count)) return {0.0f, 0.0f, count};
  const float coef = div_rn(1.0f, count);
  const float n_other = mul_rn(other.count, coef);
  const float n_own = mul_rn(own.count, coef);
  const float mean = fma_rn(n_other, other.mean, mul_rn(n_own, own.mean));
  const float sigma2 =
      fma_rn(mul_rn(mul_rn(delta, delta), other.count), n_own, add_rn(other.sigma2, own.sigma2));
  return {mean, sigma2, count};
}

// welford_vec_combine(own, other) of two states of `count` elements each, given share, both of its
// coefficients (other.count / total = own.count / total = count * (1 / (count + count))).
DFUSE_HD WelfordVec welford_vec_combine_equal(WelfordVec own, WelfordVec other, float count, float share) {
  const float delta = sub_rn(own.mean, other.mean);
  const float mean = fma_rn(share, other.mean, mul_rn(share, own.mean));
  const float sigma2 = fma_rn(mul_rn(mul_rn(delta, delta), count), share, add_rn(other.sigma2, own.sigma2));
  return {mean, sigma2, add_rn(count, count)};
}

// The vectorized block reduction's steps (shuffle offsets 16 .. 1, then warps 0 + 2 and 1 + 3, then 0 + 1)
// when every thread folds the same number of elements, 4 n / 512 (n a multiple of 512): at step l both states
// hold count[l] = 4 n / 512 * 2^l elements and share[l] is welford_vec_combine's coefficient for them, computed
// here on the host with its operations, so that the kernels combine with two constants instead of shuffling
// the counts and dividing. uniform is false for other n (the kernels then combine as aten does).
struct WelfordBlockFold {
  static constexpr int kSteps = 7;
  bool uniform = false;
  float count[kSteps] = {}, share[kSteps] = {};
};

inline WelfordBlockFold welford_block_fold(int64_t n) {
  WelfordBlockFold f;
  if (n <= 0 || n % 512 != 0) return f;
  f.uniform = true;
  float count = float(4 * (n / 512));
  for (int l = 0; l < WelfordBlockFold::kSteps; ++l) {
    f.count[l] = count;
    f.share[l] = mul_rn(count, div_rn(1.0f, add_rn(count, count)));
    count = add_rn(count, count);
  }
  return f;
}

// Generic-path Welford state (WelfordOps<float, float, int64_t>): the count as an integer and as float.
struct WelfordGeneric {
  float mean = 0.0f, m2 = 0.0f;
  int64_t n = 0;
  float nf = 0.0f;
};

// WelfordOps::reduce: mean' = mean + delta / nf' (IEEE division, then add), m2' = fma(delta, v - mean', m2).
DFUSE_HD WelfordGeneric welford_generic_update(WelfordGeneric s, float v) {
  const int64_t n = s.n + 1;
  const float nf = float(n);
  const float delta = sub_rn(v, s.mean);
  const float mean = add_rn(s.mean, div_rn(delta, nf));
  return {mean, fma_rn(delta, sub_rn(v, mean), s.m2), n, nf};
}

// WelfordOps::combine(a, b).
DFUSE_HD WelfordGeneric welford_generic_combine(WelfordGeneric a, WelfordGeneric b) {
  if (a.nf == 0.0f) return b;
  if (b.nf == 0.0f) return a;
  const float delta = sub_rn(b.mean, a.mean);
  const float count = add_rn(a.nf, b.nf);
  const float r = div_rn(b.nf, count);
  return {fma_rn(delta, r, a.mean), fma_rn(mul_rn(mul_rn(delta, delta), a.nf), r, add_rn(a.m2, b.m2)), a.n + b.n,
          count};
}

// A row's statistics: the mean and the biased variance (before eps and rsqrt).
struct LayerNormStats {
  float mean = 0.0f, var = 0.0f;
};

// rstd = rsqrtf(var + eps), eps being the Python double cast to float.
DFUSE_HD float layer_norm_rstd(float var, float eps) { return rsqrt_f(add_rn(var, eps)); }

// One output element in float, before the single rounding to T. `k4` is the element's position in
// its 4-element chunk (k % 4; the beta-only vectorized artefact depends on it). Absent gamma/beta
// are passed as has_gamma/has_beta false.
DFUSE_HD float layer_norm_element(LayerNormPath path, float x, float mean, float rstd, bool has_gamma, float gamma,
                                  bool has_beta, float beta, int k4) {
  const float d = sub_rn(x, mean);
  if (path == LayerNormPath::generic) {
    // The source's fma((x - mean) * rstd, gamma or 1, beta or 0), as the 2.11 binary computes it:
    // with gamma absent nvcc drops the multiplication by 1 and contracts the rest into
    // fma(d, rstd, beta) (measured on the H200: the two-rounding form differed from torch in 9 of
    // 1e6 bf16 and 282420 of 1e6 fp32 elements of a beta-only LayerNorm with N = 126).
    if (!has_gamma && has_beta) return fma_rn(d, rstd, beta);
    return fma_rn(mul_rn(d, rstd), has_gamma ? gamma : 1.0f, has_beta ? beta : 0.0f);
  }
  if (has_gamma && has_beta) return fma_rn(gamma, mul_rn(rstd, d), beta);
  if (has_gamma) return mul_rn(gamma, mul_rn(rstd, d));
  if (has_beta) return k4 == 0 ? add_rn(mul_rn(rstd, d), beta) : fma_rn(rstd, d, beta);
  return mul_rn(rstd, d);
}

// ---- host emulation of each path's reduction order -----------------------------------------------

constexpr int kLayerNormVecThreads = 128;     // (32, 4) block of the vectorized kernel
constexpr int kLayerNormMomentsThreads = 512;  // kCUDABlockReduceNumThreads

// Statistics of one row of n elements, element k read as float by load(k), in the order the
// vectorized kernel combines them: thread t folds chunks t, t+128, ... (elements 4i..4i+3 in
// order), each warp folds its lanes with shuffle-down offsets 16..1, then warps 0+2, 1+3, 0+1.
template <typename Load>
LayerNormStats layer_norm_stats_vectorized_host(Load load, int64_t n) {
  WelfordVec s[kLayerNormVecThreads];
  const int64_t chunks = n / 4;
  for (int t = 0; t < kLayerNormVecThreads; ++t)
    for (int64_t i = t; i < chunks; i += kLayerNormVecThreads)
      for (int k = 0; k < 4; ++k) s[t] = welford_vec_update(s[t], load(4 * i + k));
  for (int w = 0; w < kLayerNormVecThreads / 32; ++w) {
    WelfordVec* lane = s + 32 * w;
    for (int off = 16; off >= 1; off /= 2)
      for (int l = 0; l < off; ++l) lane[l] = welford_vec_combine(lane[l], lane[l + off]);
  }
  WelfordVec w0 = welford_vec_combine(s[0], s[64]);
  const WelfordVec w1 = welford_vec_combine(s[32], s[96]);
  w0 = welford_vec_combine(w0, w1);
  return {w0.mean, div_rn(w0.sigma2, float(n))};
}

// Statistics in the order of RowwiseMomentsCUDAKernel: thread j folds elements j, j+512, ...;
// BlockReduce: each warp folds with shuffle-down offsets 16..1, then warp 0 folds the 16 warp
// results (identity in lanes 16..31) the same way.
template <typename Load>
LayerNormStats layer_norm_stats_generic_host(Load load, int64_t n) {
  WelfordGeneric s[kLayerNormMomentsThreads];
  for (int t = 0; t < kLayerNormMomentsThreads; ++t)
    for (int64_t k = t; k < n; k += kLayerNormMomentsThreads) s[t] = welford_generic_update(s[t], load(k));
  WelfordGeneric warps[32];
  for (int w = 0; w < kLayerNormMomentsThreads / 32; ++w) {
    WelfordGeneric* lane = s + 32 * w;
    for (int off = 16; off >= 1; off /= 2)
      for (int l = 0; l < off; ++l) lane[l] = welford_generic_combine(lane[l], lane[l + off]);
    warps[w] = lane[0];
  }
  for (int off = 16; off >= 1; off /= 2)
    for (int l = 0; l < off; ++l) warps[l] = welford_generic_combine(warps[l], warps[l + off]);
  return {warps[0].mean, div_rn(warps[0].m2, warps[0].nf)};
}

template <typename Load>
LayerNormStats layer_norm_stats_host(LayerNormPath path, Load load, int64_t n) {
  return path == LayerNormPath::vectorized ? layer_norm_stats_vectorized_host(load, n)
                                           : layer_norm_stats_generic_host(load, n);
}

}  // namespace dfuse::detail
