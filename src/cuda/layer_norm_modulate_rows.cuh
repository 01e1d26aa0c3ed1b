// The CUDA kernels of the LayerNorm + modulate family (layernorm_modulate and its affine-folded
// variant): one block per row of x with aten's statistics block for the path
// (cuda/layer_norm_stats.cuh): 128 threads and 4-element chunks (8-byte bf16/f16, 16-byte f32
// accesses where the rows are aligned) for the vectorized path, 512 threads for the generic one.
// Vectorized rows up to 6144 elements keep their x chunks in registers (all loads issued before the
// reduction, x read once); longer rows and the generic path re-read their elements after the
// reduction (from L1/L2). Each thread then computes its elements with the epilogue `Epi` from x,
// the row statistics and the scale/shift elements (on packed pairs where the epilogue has a pair form,
// LayerNormPairEpilogue), and writes once. In place is safe: a thread
// writes only elements it has read itself after the row's statistics are complete.
//
// Epi provides: template <LayerNormPath P, typename T>
//   static DFUSE_HD T apply(float x, float mean, float rstd, int k4, T scale, T shift);
// (k4: the element's position in its 4-element chunk).
#pragma once

#include "common/dispatch.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "cuda/paired_arith.cuh"
#include "ops/norm/layernorm_modulate.h"

namespace dfuse::detail {

struct VecFlags {
  bool x, scale, shift, out;
};

// An epilogue's form on packed pairs of 16-bit values (cuda/paired_arith.cuh), where it has one:
// specialized with `static float normalized<P>(x, mean, rstd, k4)` (the value before its rounding to T)
// and `static uint32_t apply<T>(normed, scale, shift)` on words of two elements.
template <typename Epi>
struct LayerNormPairEpilogue {
  static constexpr bool kDefined = false;
};

// The vectorized kernel keeps up to `Cached` chunks of x per thread in registers (all loaded before
// the reduction, so the row is in flight at once and read once): rows up to 512 * Cached elements.
// Cached = 0: longer rows, which re-read their chunks for the epilogue. kAligned: every operand has
// contiguous, 4-element aligned rows (the common case), known at compile time so that no scalar or
// broadcast fallback is compiled beside the vector accesses (predicated, it issued five loads per chunk
// where one serves); otherwise `runtime_vec` says which operands allow vector accesses.
template <typename Epi, typename T, int Cached, bool kAligned>
__global__ void __launch_bounds__(kLayerNormVecThreads)
    layernorm_modulate_vectorized(LayernormModulateParams p, VecFlags runtime_vec, WelfordBlockFold fold) {
  using S = Storage<T>;
  const RowwiseParams& q = p.rows;
  const VecFlags vec = kAligned ? VecFlags{true, true, true, true} : runtime_vec;
  const int64_t scale_cs = kAligned ? 1 : q.in[1].col_stride, shift_cs = kAligned ? 1 : q.in[2].col_stride;
  uint32_t idx[3];
  q.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(q.in[0].data) + q.in[0].offset(idx);
  const T* scale = static_cast<const T*>(q.in[1].data) + q.in[1].offset(idx);
  const T* shift = static_cast<const T*>(q.in[2].data) + q.in[2].offset(idx);
  T* out = static_cast<T*>(q.out.data) + q.out.offset(idx);
  const int64_t n = q.geom.cols, chunks = n / 4;
  const int tid = threadIdx.x;

  // Chunk i of the output from chunk i of x, scale and shift.
  const auto emit = [&](int64_t i, const Chunk4<T>& xc, const Chunk4<T>& sc, const Chunk4<T>& hc, float mean,
                        float rstd) {
    Chunk4<T> oc;
    if constexpr (sizeof(T) == 2 && LayerNormPairEpilogue<Epi>::kDefined) {
      using Pair = LayerNormPairEpilogue<Epi>;
      constexpr LayerNormPath kPath = LayerNormPath::vectorized;
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const float a = Pair::template normalized<kPath>(S::load(xc.get(2 * k)), mean, rstd, 2 * k);
        const float b = Pair::template normalized<kPath>(S::load(xc.get(2 * k + 1)), mean, rstd, 2 * k + 1);
        oc.w[k] = Pair::template apply<T>(PairedArith<T>::pack(a, b), sc.w[k], hc.w[k]);
      }
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        oc.set(k, Epi::template apply<LayerNormPath::vectorized>(S::load(xc.get(k)), mean, rstd, k, sc.get(k),
                                                                 hc.get(k)));
      }
    }
    store_chunk4(out, i, oc, vec.out);
  };

  if constexpr (Cached > 0) {
    Chunk4<T> xc[Cached];
    const LayerNormStats stats = load_layer_norm_row_cached(x, n, vec.x, fold, xc);
    const float rstd = layer_norm_rstd(stats.var, p.eps);
    for_each_cached_chunk(xc, n, [&](int64_t i, const Chunk4<T>& c) {
      emit(i, c, load_chunk4(scale, i, scale_cs, vec.scale), load_chunk4(shift, i, shift_cs, vec.shift), stats.mean,
           rstd);
    });
    return;
  }

  const LayerNormStats stats = block_layer_norm_stats_vectorized(
      [&](int64_t i, float v[4]) {
        const Chunk4<T> c = load_chunk4(x, i, 1, vec.x);
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = S::load(c.get(k));
      },
      n, fold);
  const float rstd = layer_norm_rstd(stats.var, p.eps);
  for (int64_t i = tid; i < chunks; i += kLayerNormVecThreads)
    emit(i, load_chunk4(x, i, 1, vec.x), load_chunk4(scale, i, scale_cs, vec.scale),
         load_chunk4(shift, i, shift_cs, vec.shift), stats.mean, rstd);
}

template <typename Epi, typename T>
__global__ void __launch_bounds__(kLayerNormMomentsThreads) layernorm_modulate_generic(LayernormModulateParams p) {
  using S = Storage<T>;
  const RowwiseParams& q = p.rows;
  uint32_t idx[3];
  q.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(q.in[0].data) + q.in[0].offset(idx);
  const T* scale = static_cast<const T*>(q.in[1].data) + q.in[1].offset(idx);
  const T* shift = static_cast<const T*>(q.in[2].data) + q.in[2].offset(idx);
  T* out = static_cast<T*>(q.out.data) + q.out.offset(idx);
  const int64_t n = q.geom.cols;
  const LayerNormStats stats = block_layer_norm_stats_generic([&](int64_t k) { return S::load(x[k]); }, n);
  const float rstd = layer_norm_rstd(stats.var, p.eps);
  for (int64_t k = threadIdx.x; k < n; k += kLayerNormMomentsThreads) {
    out[k] = Epi::template apply<LayerNormPath::generic>(S::load(x[k]), stats.mean, rstd, int(k % 4),
                                                         scale[k * q.in[1].col_stride], shift[k * q.in[2].col_stride]);
  }
}

template <typename Epi>
void layernorm_modulate_rows_cuda(const LayernormModulateParams& p, Stream stream) {
  const int64_t rows = p.rows.geom.rows();
  if (rows == 0) return;
  const DeviceGuard guard(p.rows.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  const int vec_bytes = 4 * int(dtype_size(p.rows.dtype));
  const auto aligned = [&](const RowOperand& op) {
    return op.col_stride == 1 && rows_aligned(op, p.rows.dtype, vec_bytes);
  };
  const VecFlags vec{aligned(p.rows.in[0]), aligned(p.rows.in[1]), aligned(p.rows.in[2]), aligned(p.rows.out)};
  dispatch_bf16_f16_f32(p.rows.dtype, "layernorm_modulate", [&](auto tag) {
    using T = decltype(tag);
    const unsigned grid = unsigned(rows);
    if (p.path == LayerNormPath::vectorized) {
      const WelfordBlockFold fold = welford_block_fold(p.rows.geom.cols);
      with_layer_norm_cached(p.rows.geom.cols, [&]<int Cached>() {
        if (vec.x && vec.scale && vec.shift && vec.out)
          layernorm_modulate_vectorized<Epi, T, Cached, true><<<grid, kLayerNormVecThreads, 0, s>>>(p, vec, fold);
        else
          layernorm_modulate_vectorized<Epi, T, Cached, false><<<grid, kLayerNormVecThreads, 0, s>>>(p, vec, fold);
      });
    } else
      layernorm_modulate_generic<Epi, T><<<unsigned(rows), kLayerNormMomentsThreads, 0, s>>>(p);
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}
}  // namespace dfuse::detail
