// RMSNorm row statistics on CUDA in PyTorch 2.11's exact reduction orders (arithmetic and orders:
// common/rms_norm_arith.h). Two shapes of use:
//
//  Warp per row, for head-dim rows (QK-norm, QK-norm + RoPE): n = 128 * K elements, lane l holding
//  v[k][0..3] = elements 4(l + 32k) .. 4(l + 32k) + 3 of the row as float (K float4 chunks per lane,
//  lane-interleaved: for K = 1, lane l holds elements 4l..4l+3). Every lane receives the result.
//    warp_torch_rms_norm_rstd<K>(v, eps)            F.rms_norm(x, (n,), w, eps), vectorized path
//                                                   (n % 4 == 0 and x, w 4-element aligned or
//                                                   non-contiguous; n <= 2^24)
//    warp_decomposed_inv_rms<K>(v, factor, eps)     diffusers' x.float().pow(2).mean(-1) chain,
//                                                   rsqrt(mean + eps), valid when
//                                                   mean_reduce_config(M, n) has lanes == 32,
//                                                   vectorized and not split (n = 128 and any M;
//                                                   M >= 16 with 128 <= n <= 8160, n % 4 == 0); factor =
//                                                   mean_factor(M, n), M = rows of the mean.
//    warp_storage_rms_norm_rstd<T>(v, factor, eps)  Z-Image's RMSNorm in T (storage-dtype chain),
//                                                   n = 128 only (K = 1), any M
//  The row's normalized element is then torch_rms_norm_element / decomposed_rms_norm_element<T> /
//  storage_rms_norm_element<T> (or rms_norm_normalized<T> of ops/norm/rmsnorm_rows.h for all three).
//
//  Block per row (128 threads, blockDim.x == kRmsNormVecThreads), the row staged in shared memory
//  (hidden sizes: torch gives a lane up to 40 chunks, more than registers hold); load4(i, v) reads
//  elements 4i..4i+3 of the row as float into v, at(k) element k:
//    block_torch_rms_norm_rstd(load4, n, eps)
//    block_torch_rms_norm_rstd_cached(xc, n, eps)   (the same with the row held in registers)
//    block_decomposed_inv_rms(row, n, config, shift, factor, eps)
//    block_storage_rms_norm_rstd(row, n, config, shift, factor, eps)   (storage-dtype chain)
//  (these two read the staged row in T: row[k] is element k; at models' row counts and widths their
//  means by the whole block: block_mean_sum_by_chains)
//  Every thread of the block must call them; every thread receives the result.
#pragma once

#include "common/rms_norm_arith.h"
#include "cuda/paired_arith.cuh"
#include "cuda/rowwise.cuh"
#include "cuda/vector_io.cuh"
#include "ops/norm/rmsnorm_rows.h"

namespace dfuse::detail {

__device__ __forceinline__ float warp_sum_down(float s) {
#pragma unroll
  for (int off = 16; off >= 1; off /= 2) s = add_rn(s, __shfl_down_sync(0xffffffffu, s, off));
  return s;
}

// Chunk l + 32k belongs to aten thread (l + 32k) % 128, i.e. lane l of warp k % 4, which folds its
// chunks in increasing k; the four warp sums combine as (w0 + w2) + (w1 + w3) (torch_rms_norm_warps_total).
template <int K>
__device__ float warp_torch_rms_norm_rstd(const float (&v)[K][4], float eps) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[k % 4] = fma_rn(v[k][i], v[k][i], acc[k % 4]);
  constexpr int kWarps = K < 4 ? K : 4;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) acc[w] = warp_sum_down(acc[w]);
  return __shfl_sync(0xffffffffu, torch_rms_norm_rstd<128 * K>(torch_rms_norm_warps_total<kWarps>(acc), eps), 0);
}

// Reduce.cuh with 32 lanes, vectorized, row 16-byte aligned: lane l adds the squares of chunks
// l, l + 32, ... into four accumulators, folds them, then shuffle-down 16..1.
template <int K>
__device__ float warp_decomposed_inv_rms(const float (&v)[K][4], float factor, float eps) {
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] = add_rn(acc[i], mul_rn(v[k][i], v[k][i]));
  const float sum = warp_sum_down(add_rn(add_rn(add_rn(acc[0], acc[1]), acc[2]), acc[3]));
  return __shfl_sync(0xffffffffu, decomposed_inv_rms(sum, factor, eps), 0);
}

// The storage-dtype chain (x.pow(2).mean(-1) in T, then + eps, rsqrt, each rounded to T) over rows of
// 128 (v as for K = 1: lane l holds elements 4l..4l+3). Reduce.cuh reads 16-byte vectors of T: for
// bf16/f16 that is 16 lanes of 8 elements, lane t summing its 8 squares in order, then shuffle-down
// 8..1 over the 16 sums; for f32, 32 lanes of 4 (the decomposed chain's order on the squares).
template <typename T>
__device__ float warp_storage_rms_norm_rstd(const float (&v)[1][4], float factor, float eps) {
  const int lane = threadIdx.x % 32;
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) s = add_rn(s, storage_square<T>(v[0][i]));
  if constexpr (sizeof(T) == 2) {
    // Reduce.cuh lane t = lanes 2t (elements 8t..8t+3) and 2t+1 (8t+4..8t+7): the odd lane goes on
    // from the even lane's partial sum in element order.
    const float lower = __shfl_up_sync(0xffffffffu, s, 1);
    if (lane % 2 == 1) {
      s = lower;
#pragma unroll
      for (int i = 0; i < 4; ++i) s = add_rn(s, storage_square<T>(v[0][i]));
    }
#pragma unroll
    for (int off = 16; off >= 2; off /= 2) s = add_rn(s, __shfl_down_sync(0xffffffffu, s, off));
    s = __shfl_sync(0xffffffffu, s, 1);
  } else {
    s = __shfl_sync(0xffffffffu, warp_sum_down(s), 0);
  }
  return storage_rms_norm_rstd<T>(s, factor, eps);
}

// ---- half a warp per row of 128 K elements, eight elements per lane ------------------------------------
// Lane j of a half-warp holds elements 128k + 8j .. 128k + 8j + 7 (x[k][0..7]): the 4-element chunks
// 2j + 32k and 2j + 1 + 32k, which the warp form gives lanes 2j and 2j + 1. The warp form's shuffle-down
// tree over 32 chunk values (offsets 16 .. 1) is, on chunks held two per lane, offsets 8 .. 1 on both values
// and then chunk 0 + chunk 1 in lane 0 (half_warp_chunk_sum: every lane computes lane 0's value), so these
// give the warp forms' results bit for bit, with 16-byte accesses. The shuffles span the whole warp (a mask of
// half a warp costs a collective sequence around each): both halves of a warp call these together (half_warp_row).
constexpr int kLaneElements = 8;

// Lane j's elements 8j .. 8j + 7 of one 128-element block of a row, as loaded: whole 16-byte packs of T (one for
// 16-bit T, two for f32), so that 16-bit rows in flight take half the registers floats would.
template <typename T>
struct LaneHead {
  static constexpr int kVec = 16 / sizeof(T);
  Pack<T, kVec> pack[kLaneElements / kVec];

  __device__ __forceinline__ void load(const T* p) {
#pragma unroll
    for (int h = 0; h < kLaneElements / kVec; ++h) pack[h].load(p + h * kVec);
  }
  __device__ __forceinline__ void store(T* p) const {
#pragma unroll
    for (int h = 0; h < kLaneElements / kVec; ++h) pack[h].store_global(p + h * kVec);
  }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int h = 0; h < kLaneElements / kVec; ++h) pack[h].fill(T{});
  }
  __device__ __forceinline__ T get(int e) const { return pack[e / kVec].get(e % kVec); }
  __device__ __forceinline__ void set(int e, T v) { pack[e / kVec].set(e % kVec, v); }
  __device__ __forceinline__ void to_floats(float (&out)[kLaneElements]) const {
#pragma unroll
    for (int e = 0; e < kLaneElements; ++e) out[e] = Storage<T>::load(get(e));
  }
};

// Rows a half-warp takes per iteration, all loaded before any is reduced, for rows of 128 K elements of T: 64
// bytes of loads in flight per lane (16 registers of packs; one row where a row is more), four rows of 128
// 16-bit elements. Two rows of 16-bit T (32 bytes) left the H200's HBM short of loads in flight at the blocks
// per SM these kernels reach: four rows took qk_head_layernorm from 74.3% to 77.2% of copy there and the QK-norm
// + RoPE rows from 82.8% to 85.7% at Wan 2.1 (docs/BENCHMARKS.md, session 22).
template <typename T>
constexpr int half_warp_rows_in_flight(int K) {
  const int rows = int(64 / (K * kLaneElements * sizeof(T)));
  return rows > 1 ? rows : 1;
}

// A grid-stride loop over rows by half-warps that keeps both halves of a warp together: the warp takes
// rows warp_first .. warp_first + 2R - 1 (R rows per half) and runs while warp_first < rows; the half's
// row `slot` (< R) is warp_first + 2 slot + its half. A half given a row past the last redoes row
// warp_first (read before the shuffles, written by its owner after them) and must not write (`writes`).
__device__ __forceinline__ uint32_t half_warp_row(uint32_t warp_first, int slot, uint32_t rows, bool& writes) {
  const uint32_t mine = warp_first + 2 * uint32_t(slot) + (threadIdx.x / 16) % 2;
  writes = mine < rows;
  return writes ? mine : warp_first;
}

// The row splits of a launch's two tensors (blockIdx.y: q, k), a kernel argument beside their params.
struct QkRowSplits {
  RowSplit part[2];
};

// A half-warp's R rows of warp_first's iteration loaded as half_warp_row gives them: row b's outer indices in
// idx[b], whether the half writes it in writes[b], lane j's elements 128k + 8j .. 128k + 8j + 7 of x's row in
// v[b][k] (first = 8j; 16-byte accesses).
template <typename T, int K, int R>
__device__ __forceinline__ void load_half_warp_rows(const RowSplit& split, const RowOperand& x, uint32_t warp_first,
                                                    uint32_t rows, int64_t first, uint32_t (&idx)[R][3],
                                                    bool (&writes)[R], LaneHead<T> (&v)[R][K]) {
#pragma unroll
  for (int b = 0; b < R; ++b) {
    split.split(half_warp_row(warp_first, b, rows, writes[b]), idx[b]);
    const T* row = static_cast<const T*>(x.data) + x.offset(idx[b]) + first;
#pragma unroll
    for (int k = 0; k < K; ++k) v[b][k].load(row + 128 * k);
  }
}

// The K blocks of a row held as packs, as floats.
template <typename T, int K>
__device__ __forceinline__ void lane_floats(const LaneHead<T> (&v)[K], float (&out)[K][kLaneElements]) {
#pragma unroll
  for (int k = 0; k < K; ++k) v[k].to_floats(out[k]);
}

// warp_sum_down over 32 chunk values, chunk 2j + b held in value b of half-warp lane j; every lane of the
// half-warp computes the sum itself. The exchanges are butterflies (xor): after the level of offset off, lane i
// holds what the shuffle-down tree leaves in lane i % off (lanes i and i ^ off add the same two values in swapped
// order, the same IEEE sum), so every lane ends with lane 0's sum and no broadcast is needed.
__device__ __forceinline__ float half_warp_chunk_sum(float c0, float c1) {
#pragma unroll
  for (int off = 8; off >= 1; off /= 2) {
    c0 = add_rn(c0, __shfl_xor_sync(0xffffffffu, c0, off, 16));
    c1 = add_rn(c1, __shfl_xor_sync(0xffffffffu, c1, off, 16));
  }
  return add_rn(c0, c1);
}

// warp_torch_rms_norm_rstd<K> (K <= 4): accumulator k of a lane folds 128-element block k.
template <int K>
__device__ float half_warp_torch_rms_norm_rstd(const float (&x)[K][kLaneElements], float eps) {
  static_assert(K <= 4, "one accumulator per 128-element block");
  float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int k = 0; k < K; ++k) {
    float c[2] = {0.0f, 0.0f};
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[b] = fma_rn(x[k][4 * b + i], x[k][4 * b + i], c[b]);
    t[k] = half_warp_chunk_sum(c[0], c[1]);
  }
  return torch_rms_norm_rstd<128 * K>(torch_rms_norm_warps_total<K>(t), eps);
}

// warp_decomposed_inv_rms<K>: a chunk's four accumulators fold its elements over the K blocks.
template <int K>
__device__ float half_warp_decomposed_inv_rms(const float (&x)[K][kLaneElements], float factor, float eps) {
  float c[2];
#pragma unroll
  for (int b = 0; b < 2; ++b) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] = add_rn(acc[i], mul_rn(x[k][4 * b + i], x[k][4 * b + i]));
    c[b] = add_rn(add_rn(add_rn(acc[0], acc[1]), acc[2]), acc[3]);
  }
  return decomposed_inv_rms(half_warp_chunk_sum(c[0], c[1]), factor, eps);
}

// The row's rstd (F.rms_norm) or inverse RMS (the decomposed mean) for the chain of `element` (an RmsNormElement
// of with_rms_norm_element: the chain known at compile time); x[k][e] is element 128k + 8j + e.
template <int K, typename Element>
__device__ float half_warp_rms_norm_inv(const RmsNormRowsParams& n, Element, const float (&x)[K][kLaneElements]) {
  if constexpr (Element::kChain == RmsNormChain::torch_rms_norm)
    return half_warp_torch_rms_norm_rstd<K>(x, n.eps);
  else
    return half_warp_decomposed_inv_rms<K>(x, n.mean_factor, n.eps);
}

// ---- block per row, the row in shared memory -------------------------------------------------------

// The block part of F.rms_norm's vectorized reduction: `s` is this thread's sum of squares over its chunks
// (thread t: chunks t, t + 128, ..., elements in order, one fma each).
__device__ inline float block_torch_rms_norm_combine(float s, int64_t n, float eps) {
  __shared__ float warp_sums[kRmsNormVecThreads / 32];
  __shared__ float result;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  s = warp_sum_down(s);
  if (lane == 0) warp_sums[warp] = s;
  __syncthreads();
  if (tid == 0)
    result = torch_rms_norm_rstd(torch_rms_norm_warps_total<kRmsNormVecThreads / 32>(warp_sums), n, eps);
  __syncthreads();
  return result;
}

template <typename Load4>
__device__ float block_torch_rms_norm_rstd(Load4 load4, int64_t n, float eps) {
  float s = 0.0f;
  for (int64_t i = threadIdx.x; i < n / 4; i += kRmsNormVecThreads) {
    float v[4];
    load4(i, v);
#pragma unroll
    for (int k = 0; k < 4; ++k) s = fma_rn(v[k], v[k], s);
  }
  return block_torch_rms_norm_combine(s, n, eps);
}

// block_torch_rms_norm_rstd of a row held in registers: xc[j] is chunk threadIdx.x + 128 j of the row (present
// where that is below n / 4), as cuda/layer_norm_stats.cuh's cached rows hold theirs.
template <typename T, int Cached>
__device__ __forceinline__ float block_torch_rms_norm_rstd_cached(const Pack<T, 4> (&xc)[Cached], int64_t n,
                                                                  float eps) {
  using S = Storage<T>;
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < Cached; ++j)
    if (threadIdx.x + int64_t(j) * kRmsNormVecThreads < n / 4)
#pragma unroll
      for (int k = 0; k < 4; ++k) s = fma_rn(S::load(xc[j].get(k)), S::load(xc[j].get(k)), s);
  return block_torch_rms_norm_combine(s, n, eps);
}

// The lane partials in lanes[0 .. count) folded as block_x_reduce does: a shared-memory halving tree down to
// 32, a shuffle-down below. Every thread of the block calls it after writing its partials; every thread
// receives the sum.
__device__ __forceinline__ float block_fold_lane_partials(float* lanes, int count) {
  __shared__ float result;
  const int tid = threadIdx.x;
  for (int off = count / 2; off >= 32; off /= 2) {
    __syncthreads();
    for (int l = tid; l < off; l += kRmsNormVecThreads) lanes[l] = add_rn(lanes[l], lanes[l + off]);
  }
  __syncthreads();
  if (tid < 32) {
    const int width = count < 32 ? count : 32;
    float s = tid < width ? lanes[tid] : 0.0f;
    for (int off = width / 2; off >= 1; off /= 2) s = add_rn(s, __shfl_down_sync(0xffffffffu, s, off));
    if (tid == 0) result = s;
  }
  __syncthreads();
  return result;
}

// Shared memory for the lane partials of one row (Reduce.cuh's block.x is at most 512).
__device__ __forceinline__ float* mean_lane_slots() {
  __shared__ float lanes[512];
  return lanes;
}

// The lane-folded sum of a row's squares in Reduce.cuh's order, partial(l) returning lane l's partial
// (mean_lane_partial): thread t computes lanes t, t + 128, ... (c.lanes <= 512), then the lanes fold
// (block_fold_lane_partials). Every thread receives it.
template <typename Partial>
__device__ float block_mean_sum(Partial partial, const MeanReduceConfig& c) {
  float* lanes = mean_lane_slots();
  for (int l = threadIdx.x; l < c.lanes; l += kRmsNormVecThreads) lanes[l] = partial(l);
  return block_fold_lane_partials(lanes, c.lanes);
}

// Whether a staged row's mean over kVec-element vectors can be read by block_mean_sum_by_chains: whole vectors
// from a 16-byte boundary of the mean's input (c.vectorized, shift 0, n % kVec == 0) over 32 lanes (row counts
// from 16 up with n / kVec >= 32; any row count with 32 <= n / kVec < 64).
template <int kVec>
__device__ __forceinline__ bool mean_by_chains(const MeanReduceConfig& c, int64_t n, int shift) {
  return c.vectorized && c.vec == kVec && shift == 0 && n % kVec == 0 && c.lanes == 32;
}

// block_mean_sum's result where mean_by_chains<kVec> holds, with the whole block at work: each of lane l's kVec
// accumulators is a chain of additions independent of the others, so thread 4l + q takes accumulators
// q kVec / 4 .. (q + 1) kVec / 4 - 1 (its kVec / 4 elements of each of the lane's vectors l, l + 32, ..., one
// shared access each; a warp reads 8 whole vectors, conflict-free), then lane l's in-order fold of its
// accumulators runs in thread 4l with the other three's by shuffles. squares(v, sq) gives the kVec / 4 squares
// of v, a Pack<T, kVec / 4>.
template <int kVec, typename T, typename Squares>
__device__ float block_mean_sum_by_chains(const T* row, int64_t n, Squares squares) {
  static_assert(kRmsNormVecThreads == 4 * 32 && kVec % 4 == 0, "four threads per lane, 32 lanes");
  constexpr int kPer = kVec / 4;
  const int lane = threadIdx.x / 4, q = threadIdx.x % 4;
  float acc[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) acc[i] = 0.0f;
  // The lane's vectors lane, lane + 32, ... by a 32-bit trip count and a stepped pointer (64-bit index compares
  // and address products were most of this loop's instructions: session 12 run 3's source counters).
  const int steps = (int(n / kVec) - lane + 31) / 32;
  const T* at = row + lane * kVec + q * kPer;
#pragma unroll 4
  for (int k = 0; k < steps; ++k, at += 32 * kVec) {  // unrolled: shared loads ahead of the adds
    Pack<T, kPer> v;
    v.load(at);
    float sq[kPer];
    squares(v, sq);
#pragma unroll
    for (int i = 0; i < kPer; ++i) acc[i] = add_rn(acc[i], sq[i]);
  }
  float s = acc[0];
#pragma unroll
  for (int i = 1; i < kPer; ++i) s = add_rn(s, acc[i]);
#pragma unroll
  for (int k = 1; k < 4; ++k)
#pragma unroll
    for (int i = 0; i < kPer; ++i) s = add_rn(s, __shfl_down_sync(0xffffffffu, acc[i], k));  // used in q == 0
  float* lanes = mean_lane_slots();
  if (q == 0) lanes[lane] = s;
  return block_fold_lane_partials(lanes, 32);
}

// The sum of squares of a staged row in Reduce.cuh's order for a mean over kVec-element vectors: by the whole
// block where mean_by_chains<kVec> allows (squares(v, sq): the kVec / 4 squares of a Pack<T, kVec / 4>), else by
// the lanes' threads element by element (square(x): one element's square).
template <int kVec, typename T, typename Squares, typename Square>
__device__ float block_staged_mean_sum(const T* row, int64_t n, const MeanReduceConfig& c, int shift, Squares squares,
                                       Square square) {
  if (mean_by_chains<kVec>(c, n, shift)) return block_mean_sum_by_chains<kVec>(row, n, squares);
  const auto sq = [row, square](int64_t k) { return square(Storage<T>::load(row[k])); };
  return block_mean_sum([&](int l) { return mean_lane_partial(sq, n, c, l, shift); }, c);
}

// The decomposed chain: squares in float of the row's elements, whose mean reads the fp32 intermediate's
// 4-element vectors; `shift` = (row * n) % 4. The whole block folds the mean where it can (one element of each
// vector per thread), else one warp's threads fold it element by element. By the block was faster in both kernels
// that use it (Wan 2.1): the RMSNorm rows 596 -> 488 us (session 12), the fp32-norm rows 571 -> 561 us (session
// 20, H100, after the chains' 32-bit loop; session 12 had measured them slower by the block, before that loop).
template <typename T>
__device__ float block_decomposed_inv_rms(const T* row, int64_t n, const MeanReduceConfig& c, int shift, float factor,
                                          float eps) {
  const auto square = [](float v) { return mul_rn(v, v); };
  const auto squares = [square](const Pack<T, 1>& v, float (&sq)[1]) { sq[0] = square(Storage<T>::load(v.get(0))); };
  return decomposed_inv_rms(block_staged_mean_sum<4>(row, n, c, shift, squares, square), factor, eps);
}

// The storage-dtype chain: squares rounded to T (16-bit T: one packed multiply per pair, which rounds the
// exact product once, as the float multiply and its rounding do; cuda/paired_arith.cuh), whose mean reads
// 16-byte vectors, by the whole block where it can; `shift` = (row * n) % c.vec.
template <typename T>
__device__ float block_storage_rms_norm_rstd(const T* row, int64_t n, const MeanReduceConfig& c, int shift,
                                             float factor, float eps) {
  constexpr int kVec = 16 / sizeof(T);
  const auto square = [](float v) { return storage_square<T>(v); };
  const auto squares = [square](const Pack<T, kVec / 4>& v, float (&sq)[kVec / 4]) {
#pragma unroll
    for (int w = 0; w < Pack<T, kVec / 4>::kWords; ++w) {
      if constexpr (sizeof(T) == 2) {
        const float2 pair = PairedArith<T>::unpack(PairedArith<T>::mul(v.w[w], v.w[w]));
        sq[2 * w] = pair.x;
        sq[2 * w + 1] = pair.y;
      } else {
        sq[w] = square(__uint_as_float(v.w[w]));
      }
    }
  };
  return storage_rms_norm_rstd<T>(block_staged_mean_sum<kVec>(row, n, c, shift, squares, square), factor, eps);
}

}  // namespace dfuse::detail
