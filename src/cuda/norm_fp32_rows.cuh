// The CUDA kernels behind the request-gated norm + epilogue ops with fp32 internals (parameters,
// arithmetic and host twin: ops/norm/norm_fp32_rows.h).
//
// LayerNorm statistics on aten's vectorized path with rows up to 6144 elements (norm_fp32_layer_norm_cached):
// one block of 128 threads per row, each thread's 4-element chunks of x held in registers from the statistics
// to the output (cuda/layer_norm_stats.cuh, load_layer_norm_row_cached: the row in flight at once, read once),
// then the epilogue per chunk from the epilogue's two operands, the weight and the bias (4-element accesses
// where the rows are aligned).
//
// Every other case (norm_fp32_rows_kernel): one block per row: the row of x is read once from HBM with VEC-element
// vectors (16 bytes when every row operand, the weight and the bias allow; then by asynchronous copies, the whole row
// in flight at once) into shared memory (in T, bit for bit), the statistics are folded from there in the eager chain's
// order (cuda/layer_norm_stats.cuh, cuda/rms_norm_stats.cuh), then each thread produces VEC outputs at a time from the
// staged row, the weight, the bias and the epilogue's two operands (a per-row value when its column stride is 0), and
// writes them once. Blocks have aten's size for the statistics: 128 threads (vectorized LayerNorm / RMSNorm paths,
// Reduce.cuh's mean emulated by 128 lanes) or 512 for the generic Welford path.
//
// In place is safe in both: a thread writes only elements the block has read in full before.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/dispatch.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "cuda/rms_norm_stats.cuh"
#include "cuda/rowwise.cuh"
#include "ops/norm/norm_fp32_rows.h"

namespace dfuse::detail {

// The row's statistics from the staged row, by the whole block (kThreads: the statistics' block).
template <int kThreads, typename T>
__device__ NormRowStats block_norm_fp32_row_stats(const NormFp32RowsParams& p, const T* row, uint32_t r,
                                                  const WelfordBlockFold& fold) {
  const int64_t n = p.rows.geom.cols;
  if constexpr (kThreads == kLayerNormMomentsThreads) {
    const LayerNormStats s = block_layer_norm_stats_generic(staged_element(row), n);
    if (p.stats == Fp32NormStats::layer_norm) return {s.mean, layer_norm_rstd(s.var, p.eps)};
    return {0.0f, torch_rms_norm_rstd_generic(s, p.eps)};
  } else {
    static_assert(kThreads == kLayerNormVecThreads && kThreads == kRmsNormVecThreads);
    const auto load4 = staged_chunks4(row);
    if (p.stats == Fp32NormStats::torch_rms_norm) return {0.0f, block_torch_rms_norm_rstd(load4, n, p.eps)};
    if (p.stats == Fp32NormStats::mean_of_squares)
      return {0.0f, block_decomposed_inv_rms(row, n, p.mean, norm_fp32_mean_shift(p, r), p.mean_factor, p.eps)};
    const LayerNormStats s = block_layer_norm_stats_vectorized(load4, n, fold);
    return {s.mean, layer_norm_rstd(s.var, p.eps)};
  }
}

template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> load_row_operand(const RowOperand& op, const uint32_t idx[3], int64_t j) {
  Pack<T, VEC> v;
  const T* src = static_cast<const T*>(op.data) + op.offset(idx);
  if (op.col_stride == 0)
    v.fill(src[0]);
  else
    v.load(src + j);
  return v;
}

template <typename T, int kThreads, int VEC, typename Epi>
__global__ void __launch_bounds__(kThreads) norm_fp32_rows_kernel(NormFp32RowsParams p, Epi epi, WelfordBlockFold fold) {
  // On a 128-byte boundary as cuda/rms_norm_rows.cuh's staged rows: rmsnorm_modulate_fp32 541.3 -> 523.7 us at Wan 2.1
  // (H100, session 31).
  extern __shared__ __align__(128) unsigned char staged[];
  T* const row = reinterpret_cast<T*>(staged);
  using S = Storage<T>;
  const int64_t n = p.rows.geom.cols;
  const uint32_t r = blockIdx.x;
  uint32_t idx[3];
  p.rows.geom.split(r, idx);
  stage_row_async_or_batched<T, kThreads, VEC, 1>(static_cast<const T*>(p.rows.in[0].data) + p.rows.in[0].offset(idx),
                                                 row, n);
  __syncthreads();
  const NormRowStats stats = block_norm_fp32_row_stats<kThreads>(p, static_cast<const T*>(row), r, fold);
  T* out = static_cast<T*>(p.rows.out.data) + p.rows.out.offset(idx);
  constexpr LayerNormPath kPath =
      kThreads == kLayerNormMomentsThreads ? LayerNormPath::generic : LayerNormPath::vectorized;
  with_norm_fp32_element<kPath>(p, [&](auto element) {
    using Element = decltype(element);
    for (int64_t j = int64_t(threadIdx.x) * VEC; j < n; j += int64_t(kThreads) * VEC) {
      const Pack<T, VEC> a = load_row_operand<T, VEC>(p.rows.in[1], idx, j);
      const Pack<T, VEC> b = load_row_operand<T, VEC>(p.rows.in[2], idx, j);
      Pack<T, VEC> x, w, c;
      x.load(row + j);
      if constexpr (Element::kHasWeight) w.load(static_cast<const T*>(p.weight) + j);
      if constexpr (Element::kHasBias) c.load(static_cast<const T*>(p.bias) + j);
      Pack<T, VEC> o;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float we = Element::kHasWeight ? S::load(w.get(e)) : 1.0f;
        const float ce = Element::kHasBias ? S::load(c.get(e)) : 0.0f;
        o.set(e, epi(element(S::load(x.get(e)), stats, int((j + e) % 4), we, ce), a.get(e), b.get(e)));
      }
      o.store_global(out + j);
    }
  });
}

// Which operands of norm_fp32_layer_norm_cached allow 4-element accesses.
struct NormFp32Access {
  bool x, a, b, out, affine;
};

// kAligned: every operand allows 4-element accesses and the epilogue's operands have column stride 1 (the
// common case, no element-wise fallback compiled), else `runtime` says which do.
template <typename T, int Cached, bool kAligned, typename Epi>
__global__ void __launch_bounds__(kLayerNormVecThreads)
    norm_fp32_layer_norm_cached(NormFp32RowsParams p, Epi epi, NormFp32Access runtime, WelfordBlockFold fold) {
  using S = Storage<T>;
  const NormFp32Access vec = kAligned ? NormFp32Access{true, true, true, true, true} : runtime;
  const RowwiseParams& q = p.rows;
  uint32_t idx[3];
  q.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(q.in[0].data) + q.in[0].offset(idx);
  const T* a = static_cast<const T*>(q.in[1].data) + q.in[1].offset(idx);
  const T* b = static_cast<const T*>(q.in[2].data) + q.in[2].offset(idx);
  T* out = static_cast<T*>(q.out.data) + q.out.offset(idx);
  const int64_t a_cs = kAligned ? 1 : q.in[1].col_stride, b_cs = kAligned ? 1 : q.in[2].col_stride;
  const int64_t n = q.geom.cols;
  Chunk4<T> xc[Cached];
  const LayerNormStats st = load_layer_norm_row_cached(x, n, vec.x, fold, xc);
  const NormRowStats stats{st.mean, layer_norm_rstd(st.var, p.eps)};
  with_layer_norm_fp32_element<LayerNormPath::vectorized>(p, [&](auto element) {
    using Element = decltype(element);
    for_each_cached_chunk(xc, n, [&](int64_t i, const Chunk4<T>& c) {
      const Chunk4<T> ac = load_chunk4(a, i, a_cs, vec.a), bc = load_chunk4(b, i, b_cs, vec.b);
      Chunk4<T> w, h;
      if constexpr (Element::kHasWeight) w = load_chunk4(static_cast<const T*>(p.weight), i, 1, vec.affine);
      if constexpr (Element::kHasBias) h = load_chunk4(static_cast<const T*>(p.bias), i, 1, vec.affine);
      Chunk4<T> o;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float we = Element::kHasWeight ? S::load(w.get(k)) : 1.0f;
        const float he = Element::kHasBias ? S::load(h.get(k)) : 0.0f;
        o.set(k, epi(element(S::load(c.get(k)), stats, k, we, he), ac.get(k), bc.get(k)));
      }
      store_chunk4(out, i, o, vec.out);
    });
  });
}

// The cached kernel for p (LayerNorm statistics on the vectorized path, rows of at most 6144 elements).
template <typename T, int Cached, typename Epi>
void launch_norm_fp32_layer_norm_cached(const NormFp32RowsParams& p, Epi epi, cudaStream_t stream) {
  const int vec_bytes = 4 * int(sizeof(T));
  const auto row_vec = [&](const RowOperand& op) { return rows_aligned(op, p.rows.dtype, vec_bytes); };
  const auto affine_vec = [&](const void* v) { return !v || reinterpret_cast<uintptr_t>(v) % vec_bytes == 0; };
  const RowwiseParams& q = p.rows;
  const NormFp32Access vec{row_vec(q.in[0]), row_vec(q.in[1]), row_vec(q.in[2]), row_vec(q.out),
                           affine_vec(p.weight) && affine_vec(p.bias)};
  const bool aligned = vec.x && vec.a && vec.b && vec.out && vec.affine && q.in[1].col_stride == 1 &&
                       q.in[2].col_stride == 1;
  const auto grid = uint32_t(q.geom.rows());
  const WelfordBlockFold fold = welford_block_fold(q.geom.cols);
  if (aligned)
    norm_fp32_layer_norm_cached<T, Cached, true><<<grid, kLayerNormVecThreads, 0, stream>>>(p, epi, vec, fold);
  else
    norm_fp32_layer_norm_cached<T, Cached, false><<<grid, kLayerNormVecThreads, 0, stream>>>(p, epi, vec, fold);
  DFUSE_CUDA_CHECK_LAUNCH();
}

// A row per block; persistent blocks (one wave, each staging its next row only after the last) ran
// rmsnorm_modulate_fp32 461.1 us at Wan 2.1 where these run 425.4 (H200, session 21 run 2).
template <typename T, int kThreads, int VEC, typename Epi>
void launch_norm_fp32_rows(const NormFp32RowsParams& p, Epi epi, cudaStream_t stream) {
  launch_row_per_block<norm_fp32_rows_kernel<T, kThreads, VEC, Epi>>(
      kThreads, p.rows.geom.rows(), size_t(p.rows.geom.cols) * sizeof(T), stream, p, epi,
      welford_block_fold(p.rows.geom.cols));
}

// 16-byte vectors when x, the operands, the output, the weight and the bias allow them.
template <typename T, int kThreads, typename Epi>
void launch_norm_fp32_rows_vec(const NormFp32RowsParams& p, Epi epi, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const auto aligned = [](const void* v) { return !v || reinterpret_cast<uintptr_t>(v) % 16 == 0; };
  if (aligned(p.weight) && aligned(p.bias) && rowwise_vectorizable(p.rows, 16))
    launch_norm_fp32_rows<T, kThreads, kVec>(p, epi, stream);
  else
    launch_norm_fp32_rows<T, kThreads, 1>(p, epi, stream);
}

// The CUDA entry of an op whose epilogue is Epi<T>: dtype dispatch, then the launch with the
// statistics' block size.
template <template <typename> class Epi>
void norm_fp32_rows_cuda_entry(const NormFp32RowsParams& p, Stream stream) {
  if (p.rows.geom.rows() == 0 || p.rows.geom.cols == 0) return;
  const DeviceGuard device(p.rows.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.rows.dtype, "norm_fp32_rows kernel", [&](auto tag) {
    using T = decltype(tag);
    if (p.stats != Fp32NormStats::mean_of_squares && p.path == LayerNormPath::generic) {
      launch_norm_fp32_rows_vec<T, kLayerNormMomentsThreads>(p, Epi<T>{}, s);
      return;
    }
    if (p.stats == Fp32NormStats::layer_norm) {
      bool cached = false;
      with_layer_norm_cached(p.rows.geom.cols, [&]<int Cached>() {
        if constexpr (Cached > 0) {
          launch_norm_fp32_layer_norm_cached<T, Cached>(p, Epi<T>{}, s);
          cached = true;
        }
      });
      if (cached) return;
    }
    launch_norm_fp32_rows_vec<T, kLayerNormVecThreads>(p, Epi<T>{}, s);
  });
}

}  // namespace dfuse::detail
