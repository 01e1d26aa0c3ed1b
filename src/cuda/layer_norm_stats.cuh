// Block-level LayerNorm row statistics on CUDA in PyTorch 2.11's exact reduction orders (see
// common/layer_norm_stats.h): the vectorized kernel's (128 threads, 4-element chunks, shuffle-down
// 16..1, then warps 0+2, 1+3, 0+1) and RowwiseMomentsCUDAKernel's (512 threads, shuffle-down 16..1,
// then warp 0 over the 16 warp results), by a whole block (blockDim.x equal to the path's thread
// count; every thread receives the row's statistics) or by one warp standing for the block.
#pragma once

#include <cstdint>

#include "common/layer_norm_stats.h"
#include "cuda/vector_io.cuh"

namespace dfuse::detail {

// Four consecutive elements of a row as 32-bit words (cuda/vector_io.cuh's Pack: two words for bf16/f16,
// four for f32), one 8-byte or 16-byte access when aligned. 16-bit elements stay packed two to a word,
// the layout of cuda/paired_arith.cuh's packed pairs (elements 2k and 2k + 1 in word k, the lower in the
// low half).
template <typename T>
using Chunk4 = Pack<T, 4>;

// Elements 4i..4i+3 of a row with column stride `cs` (1, or 0: one value for the whole row); `vec`
// when the row allows one 4-element access.
template <typename T>
__device__ __forceinline__ Chunk4<T> load_chunk4(const T* row, int64_t i, int64_t cs, bool vec) {
  Chunk4<T> c;
  if (cs == 0) {
    c.fill(row[0]);
  } else if (vec) {
    c.load(row + 4 * i);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) c.set(k, row[4 * i + k]);
  }
  return c;
}

// The chunk stored as elements 4i..4i+3 of a contiguous row in global memory; `vec` as for load_chunk4.
template <typename T>
__device__ __forceinline__ void store_chunk4(T* row, int64_t i, const Chunk4<T>& c, bool vec) {
  if (vec) {
    c.store_global(row + 4 * i);
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) row[4 * i + k] = c.get(k);
  }
}

// The block part of the vectorized kernel's reduction: `s` is this thread's fold of its chunks
// (thread t: chunks t, t+128, ..., elements in order); `fold` its steps' coefficients where every thread holds
// the same count (welford_block_fold), else the general combine.
__device__ inline LayerNormStats block_layer_norm_reduce_vectorized(WelfordVec s, int64_t n,
                                                                    const WelfordBlockFold& fold) {
  __shared__ WelfordVec partial[2];
  __shared__ LayerNormStats result;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const auto combine = [&](WelfordVec own, WelfordVec other, int step) {
    return fold.uniform ? welford_vec_combine_equal(own, other, fold.count[step], fold.share[step])
                        : welford_vec_combine(own, other);
  };
  if (fold.uniform) {
#pragma unroll
    for (int off = 16, step = 0; off >= 1; off /= 2, ++step) {
      const WelfordVec other{__shfl_down_sync(0xffffffffu, s.mean, off),
                             __shfl_down_sync(0xffffffffu, s.sigma2, off)};
      s = welford_vec_combine_equal(s, other, fold.count[step], fold.share[step]);
    }
  } else {
#pragma unroll
    for (int off = 16; off >= 1; off /= 2) {
      const WelfordVec other{__shfl_down_sync(0xffffffffu, s.mean, off),
                             __shfl_down_sync(0xffffffffu, s.sigma2, off),
                             __shfl_down_sync(0xffffffffu, s.count, off)};
      s = welford_vec_combine(s, other);
    }
  }
  if (lane == 0 && warp >= 2) partial[warp - 2] = s;
  __syncthreads();
  if (lane == 0 && warp < 2) s = combine(s, partial[warp], 5);
  __syncthreads();
  if (lane == 0 && warp == 1) partial[0] = s;
  __syncthreads();
  if (tid == 0) {
    s = combine(s, partial[0], 6);
    result = {s.mean, div_rn(s.sigma2, float(n))};
  }
  __syncthreads();
  return result;
}

// load4(i, v) reads elements 4i..4i+3 of the row as float into v[0..3]. A thread reaches counts up to
// 4 * ceil(n / 512); up to kWelfordReciprocals the block first puts their reciprocals (the same divisions)
// in shared memory, so that each element's update reads one instead of dividing (an IEEE division is
// about ten instructions, the rest of the update five). `fold`: welford_block_fold(n), or the general combine.
constexpr int kWelfordReciprocals = 512;

template <typename Load4>
__device__ LayerNormStats block_layer_norm_stats_vectorized(Load4 load4, int64_t n, const WelfordBlockFold& fold) {
  __shared__ float reciprocal[kWelfordReciprocals];
  const int64_t chunks = n / 4;
  const int64_t counts = 4 * ((chunks + kLayerNormVecThreads - 1) / kLayerNormVecThreads);
  WelfordVec s;
  if (counts <= kWelfordReciprocals) {
    for (int k = threadIdx.x; k < counts; k += kLayerNormVecThreads) reciprocal[k] = div_rn(1.0f, float(k + 1));
    __syncthreads();
    int count = 0;
    for (int64_t i = threadIdx.x; i < chunks; i += kLayerNormVecThreads) {
      float v[4];
      load4(i, v);
#pragma unroll
      for (int k = 0; k < 4; ++k, ++count) s = welford_vec_update_rcp(s, v[k], float(count + 1), reciprocal[count]);
    }
  } else {
    for (int64_t i = threadIdx.x; i < chunks; i += kLayerNormVecThreads) {
      float v[4];
      load4(i, v);
#pragma unroll
      for (int k = 0; k < 4; ++k) s = welford_vec_update(s, v[k]);
    }
  }
  return block_layer_norm_reduce_vectorized(s, n, fold);
}

// ---- the vectorized block's row held in registers ----------------------------------------------------
// Rows up to 512 * Cached elements: a thread of the 128-thread block loads its chunks tid + 128 j (j < Cached)
// of x into xc, all before the reduction (the row in flight at once and read once from HBM), and folds them in
// aten's order, each element's count a compile-time constant, then the block's in aten's order with `fold`
// (welford_block_fold(n), made by the launch). `vec`: the row allows 4-element accesses. Every
// thread of the block calls it and receives the row's statistics; the caller then emits chunk tid + 128 j from
// xc[j] for each j with layer_norm_cached_chunk(j) < n / 4 (for_each_cached_chunk).
constexpr int kLayerNormMaxCached = 12;

__device__ __forceinline__ int64_t layer_norm_cached_chunk(int j) {
  return threadIdx.x + int64_t(j) * kLayerNormVecThreads;
}

// The statistics of a row already held as xc (layer_norm_cached_row_stats), or loaded from x first
// (load_layer_norm_row_cached).
template <typename T, int Cached>
__device__ __forceinline__ LayerNormStats layer_norm_cached_row_stats(const Chunk4<T> (&xc)[Cached], int64_t n,
                                                                      const WelfordBlockFold& fold) {
  using S = Storage<T>;
  WelfordVec s;
#pragma unroll
  for (int j = 0; j < Cached; ++j)
    if (layer_norm_cached_chunk(j) < n / 4)
#pragma unroll
      for (int k = 0; k < 4; ++k) s = welford_vec_update_nth(s, S::load(xc[j].get(k)), 4 * j + k + 1);
  return block_layer_norm_reduce_vectorized(s, n, fold);
}

template <typename T, int Cached>
__device__ __forceinline__ LayerNormStats load_layer_norm_row_cached(const T* x, int64_t n, bool vec,
                                                                     const WelfordBlockFold& fold,
                                                                     Chunk4<T> (&xc)[Cached]) {
#pragma unroll
  for (int j = 0; j < Cached; ++j)
    if (layer_norm_cached_chunk(j) < n / 4) xc[j] = load_chunk4(x, layer_norm_cached_chunk(j), 1, vec);
  return layer_norm_cached_row_stats(xc, n, fold);
}

// f(i, xc[j]) for the thread's cached chunks i = layer_norm_cached_chunk(j) of a row of n elements.
template <typename T, int Cached, typename F>
__device__ __forceinline__ void for_each_cached_chunk(const Chunk4<T> (&xc)[Cached], int64_t n, F f) {
#pragma unroll
  for (int j = 0; j < Cached; ++j)
    if (layer_norm_cached_chunk(j) < n / 4) f(layer_norm_cached_chunk(j), xc[j]);
}

// f.template operator()<Cached>() with the fewest cached chunks per thread (4, 8 or 12) that hold a row of n
// elements, or Cached = 0 for longer rows (the kernel then re-reads its chunks after the reduction).
template <typename F>
void with_layer_norm_cached(int64_t n, F&& f) {
  const int64_t per_thread = (n / 4 + kLayerNormVecThreads - 1) / kLayerNormVecThreads;
  if (per_thread <= 4) return f.template operator()<4>();
  if (per_thread <= 8) return f.template operator()<8>();
  if (per_thread <= kLayerNormMaxCached) return f.template operator()<kLayerNormMaxCached>();
  f.template operator()<0>();
}

// load(k) reads element k of the row as float.
template <typename Load>
__device__ LayerNormStats block_layer_norm_stats_generic(Load load, int64_t n) {
  __shared__ WelfordGeneric warps[kLayerNormMomentsThreads / 32];
  __shared__ LayerNormStats result;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  WelfordGeneric s;
  for (int64_t k = tid; k < n; k += kLayerNormMomentsThreads) s = welford_generic_update(s, load(k));
  auto warp_fold = [](WelfordGeneric v) {
#pragma unroll
    for (int off = 16; off >= 1; off /= 2) {
      WelfordGeneric other;
      other.mean = __shfl_down_sync(0xffffffffu, v.mean, off);
      other.m2 = __shfl_down_sync(0xffffffffu, v.m2, off);
      other.nf = __shfl_down_sync(0xffffffffu, v.nf, off);
      v = welford_generic_combine(v, other);
    }
    return v;
  };
  s = warp_fold(s);
  if (lane == 0) warps[warp] = s;
  __syncthreads();
  if (warp == 0) {
    s = warp_fold(lane < kLayerNormMomentsThreads / 32 ? warps[lane] : WelfordGeneric{});
    if (lane == 0) result = {s.mean, div_rn(s.m2, s.nf)};
  }
  __syncthreads();
  return result;
}

// ---- one warp computing exactly what the block computes --------------------------------------------
// For short rows (a head of 64..256 elements) most of aten's block is idle; one warp per row
// emulates it: the warp runs the block's virtual warps one after the other (lane l stands for
// thread 32v + l of virtual warp v), folds each with the same shuffles, and combines the results
// in the block's order. Every lane receives the row's statistics. Call with all 32 lanes.

__device__ inline WelfordVec warp_fold_vec(WelfordVec s) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    const WelfordVec other{__shfl_down_sync(0xffffffffu, s.mean, off), __shfl_down_sync(0xffffffffu, s.sigma2, off),
                           __shfl_down_sync(0xffffffffu, s.count, off)};
    s = welford_vec_combine(s, other);
  }
  return s;
}

__device__ inline WelfordGeneric warp_fold_generic(WelfordGeneric s) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) {
    WelfordGeneric other;
    other.mean = __shfl_down_sync(0xffffffffu, s.mean, off);
    other.m2 = __shfl_down_sync(0xffffffffu, s.m2, off);
    other.nf = __shfl_down_sync(0xffffffffu, s.nf, off);
    s = welford_generic_combine(s, other);
  }
  return s;
}

template <typename Load4>
__device__ LayerNormStats warp_layer_norm_stats_vectorized(Load4 load4, int64_t n) {
  const int lane = threadIdx.x % 32;
  WelfordVec w[kLayerNormVecThreads / 32];
#pragma unroll
  for (int v = 0; v < kLayerNormVecThreads / 32; ++v) {
    WelfordVec s;
    int64_t i = 32 * v + lane;
    if (i < n / 4) {  // the first chunk: counts 1..4, whose reciprocals are compile-time constants
      float x[4];
      load4(i, x);
#pragma unroll
      for (int k = 0; k < 4; ++k) s = welford_vec_update_nth(s, x[k], k + 1);
    }
    for (i += kLayerNormVecThreads; i < n / 4; i += kLayerNormVecThreads) {
      float x[4];
      load4(i, x);
#pragma unroll
      for (int k = 0; k < 4; ++k) s = welford_vec_update(s, x[k]);
    }
    // Lane 0 holds virtual warp v's result. A virtual warp without chunks (a short head) folds to the
    // empty state, as every combine of two empty states is empty: skip its shuffles.
    w[v] = 32 * v < n / 4 ? warp_fold_vec(s) : WelfordVec{};
  }
  const WelfordVec s =
      welford_vec_combine(welford_vec_combine(w[0], w[2]), welford_vec_combine(w[1], w[3]));
  return {__shfl_sync(0xffffffffu, s.mean, 0), __shfl_sync(0xffffffffu, div_rn(s.sigma2, float(n)), 0)};
}

// welford_vec_combine(own, other) where both counts are known when compiling (kOwn, kOther elements): the
// same operations, with 1 / count, other.count / count and own.count / count constants instead of a division
// and two products; the constants are the values those operations give (1 / count is exact for the powers
// of two of the half-warp folds; other counts round as the division does).
template <int kOwn, int kOther>
__device__ __forceinline__ WelfordVec welford_vec_combine_counted(WelfordVec own, WelfordVec other) {
  constexpr float count = float(kOwn + kOther);
  if constexpr (kOwn + kOther == 0) {
    return {0.0f, 0.0f, count};
  } else {
    constexpr float coef = 1.0f / count;
    constexpr float n_other = float(kOther) * coef, n_own = float(kOwn) * coef;
    const float delta = sub_rn(own.mean, other.mean);
    const float mean = fma_rn(n_other, other.mean, mul_rn(n_own, own.mean));
    const float sigma2 =
        fma_rn(mul_rn(mul_rn(delta, delta), float(kOther)), n_own, add_rn(other.sigma2, own.sigma2));
    return {mean, sigma2, count};
  }
}

// The first level of a half-warp's shuffle-down fold of two chunk states per lane (lane offset 8, both
// slots), one combine per lane: lane j < 8 combines its slot 0 with lane j + 8's, lane j + 8 lane j's slot 1
// with its own, so that lanes 0..7 go on with slot 0's fold and lanes 8..15 with slot 1's. kCount elements
// per state.
template <int kCount>
__device__ __forceinline__ WelfordVec half_warp_fold_split(const WelfordVec (&c)[2]) {
  const bool low = threadIdx.x % 16 < 8;
  const float sent_mean = low ? c[1].mean : c[0].mean, sent_sigma2 = low ? c[1].sigma2 : c[0].sigma2;
  const WelfordVec got{__shfl_xor_sync(0xffffffffu, sent_mean, 8), __shfl_xor_sync(0xffffffffu, sent_sigma2, 8),
                       float(kCount)};
  return welford_vec_combine_counted<kCount, kCount>(low ? c[0] : got, low ? got : c[1]);
}

// One level (offset kOff) of the shuffle-down fold within each group of kWidth lanes, of states of kCount
// elements each (the counts known, only the means and sums shuffled).
template <int kOff, int kWidth, int kCount>
__device__ __forceinline__ WelfordVec fold_level(WelfordVec c) {
  const WelfordVec other{__shfl_down_sync(0xffffffffu, c.mean, kOff, kWidth),
                         __shfl_down_sync(0xffffffffu, c.sigma2, kOff, kWidth), float(kCount)};
  return welford_vec_combine_counted<kCount, kCount>(c, other);
}

// ---- half a warp computing what the vectorized block computes, for heads of 128 K elements -----------------
// Lane j of a half-warp holds elements 128k + 8j .. 128k + 8j + 7 (x[k][0..7]): aten's chunks 32k + 2j and
// 32k + 2j + 1, which the 128-thread block gives threads 32k + 2j and 32k + 2j + 1 of its warp k (one chunk per
// thread: counts 1..4). Warp k's shuffle-down fold over its 32 chunk states (offsets 16 .. 1) is, on chunks
// held two per lane, the fold with lane offsets 8 .. 1 on both slots, then slot 0 with slot 1 in lane 0: here
// the first level leaves slot 0's fold to lanes 0..7 and slot 1's to lanes 8..15 (half_warp_fold_split), the
// next three fold within each group of 8 lanes, and lane 0 takes lane 8's state last. The warps then combine
// as (w0 + w2) + (w1 + w3), warps K.. empty. Both halves of a warp call it together (the
// shuffles span the warp); every lane of a half receives its head's statistics. The variance's division by
// n = 128 K, a power of two, is the multiplication by 1 / n: the same correctly rounded quotient.
template <int K>
__device__ LayerNormStats half_warp_layer_norm_stats(const float (&x)[K][8]) {
  static_assert(K >= 1 && K <= 4, "one aten warp per 128-element block");
  // Every lane's chunk holds 4 elements, and a shuffle past the half returns the lane's own state: at each
  // level every lane combines two states of equal, known counts (4, 8, 16, 32), so the counts are constants.
  WelfordVec w[4];
#pragma unroll
  for (int k = 0; k < K; ++k) {
    WelfordVec c[2];
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[b] = welford_vec_update_nth(c[b], x[k][4 * b + i], i + 1);
    const WelfordVec slot = fold_level<1, 8, 32>(fold_level<2, 8, 16>(fold_level<4, 8, 8>(half_warp_fold_split<4>(c))));
    w[k] = fold_level<8, 16, 64>(slot);
  }
  constexpr int kCount0 = 128, kCount1 = K > 1 ? 128 : 0, kCount2 = K > 2 ? 128 : 0, kCount3 = K > 3 ? 128 : 0;
  const WelfordVec s = welford_vec_combine_counted<kCount0 + kCount2, kCount1 + kCount3>(
      welford_vec_combine_counted<kCount0, kCount2>(w[0], w[2]),
      welford_vec_combine_counted<kCount1, kCount3>(w[1], w[3]));
  constexpr float kInverseCount = 1.0f / float(128 * K);
  return {__shfl_sync(0xffffffffu, s.mean, 0, 16), __shfl_sync(0xffffffffu, mul_rn(s.sigma2, kInverseCount), 0, 16)};
}

template <typename Load>
__device__ LayerNormStats warp_layer_norm_stats_generic(Load load, int64_t n) {
  const int lane = threadIdx.x % 32;
  WelfordGeneric mine;  // lane v < 16 collects virtual warp v's result; lanes 16..31 the identity
  for (int v = 0; v < kLayerNormMomentsThreads / 32 && 32 * v < n; ++v) {  // virtual warps holding elements
    WelfordGeneric s;
    for (int64_t k = 32 * v + lane; k < n; k += kLayerNormMomentsThreads) s = welford_generic_update(s, load(k));
    s = warp_fold_generic(s);
    const float mean = __shfl_sync(0xffffffffu, s.mean, 0), m2 = __shfl_sync(0xffffffffu, s.m2, 0),
                nf = __shfl_sync(0xffffffffu, s.nf, 0);
    if (lane == v) mine.mean = mean, mine.m2 = m2, mine.nf = nf;
  }
  const WelfordGeneric s = warp_fold_generic(mine);
  return {__shfl_sync(0xffffffffu, s.mean, 0), __shfl_sync(0xffffffffu, div_rn(s.m2, s.nf), 0)};
}

}  // namespace dfuse::detail
