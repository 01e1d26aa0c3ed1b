// The CUDA kernel behind the RMSNorm + epilogue ops (parameters and host twin:
// ops/norm/rmsnorm_rows.h). A block normalizes a row: the row of x is read once from HBM with VEC-element vectors (16
// bytes when every row operand allows; then by asynchronous copies) into shared memory bit for bit (in T), the
// statistics are folded from there in the eager chain's exact order (cuda/rms_norm_stats.cuh; aten assigns a lane up to
// 40 four-element chunks of a row, so the row is staged rather than held in registers), then each thread produces VEC
// outputs at a time from the staged row, the weight and the epilogue's operands, and writes them once. A block takes
// one row, and the 128-thread kernels are compiled for twelve blocks per SM; where the epilogue has a cached operand
// (RmsNormCachedOperand) the blocks are persistent over rows instead, and on the 16-byte path stage their next row
// while they normalize the current one (cuda/rowwise.cuh, for_each_row_staged_ahead; two staging buffers). Blocks are
// 128 threads (aten's vectorized RMSNorm block and the decomposed chain's emulated lanes) or 512 for F.rms_norm's
// generic path, whose Welford fold needs aten's 512 threads.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/dispatch.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "cuda/rms_norm_stats.cuh"
#include "cuda/rowwise.cuh"
#include "ops/norm/rmsnorm_rows.h"

namespace dfuse::detail {

// The row's rstd / inverse RMS from the row staged in T, for chain kChain.
template <typename T, int kThreads, RmsNormChain kChain>
__device__ float block_rms_norm_row_inv(const RmsNormRowsParams& p, const T* row, uint32_t r) {
  const int64_t n = p.rows.geom.cols;
  if constexpr (kThreads == kLayerNormMomentsThreads) {
    static_assert(kChain == RmsNormChain::torch_rms_norm, "the 512-thread blocks are F.rms_norm's generic path");
    return torch_rms_norm_rstd_generic(block_layer_norm_stats_generic(staged_element(row), n), p.eps);
  } else if constexpr (kChain == RmsNormChain::torch_rms_norm) {
    return block_torch_rms_norm_rstd(staged_chunks4(row), n, p.eps);
  } else if constexpr (kChain == RmsNormChain::diffusers_decomposed) {
    return block_decomposed_inv_rms(row, n, p.mean, rms_norm_mean_shift(p, r), p.mean_factor, p.eps);
  } else {
    return block_storage_rms_norm_rstd(row, n, p.mean, rms_norm_mean_shift(p, r), p.mean_factor, p.eps);
  }
}

// f.template operator()<kChain>() with chain as a compile-time constant: each chain its own kernel (its own
// registers and occupancy); kThreads = 512 blocks are F.rms_norm's generic path only.
template <int kThreads, typename F>
void with_rms_norm_chain(RmsNormChain chain, F&& f) {
  if constexpr (kThreads == kLayerNormMomentsThreads) {
    f.template operator()<RmsNormChain::torch_rms_norm>();
  } else {
    switch (chain) {
      case RmsNormChain::torch_rms_norm:
        return f.template operator()<RmsNormChain::torch_rms_norm>();
      case RmsNormChain::diffusers_decomposed:
        return f.template operator()<RmsNormChain::diffusers_decomposed>();
      default:
        return f.template operator()<RmsNormChain::storage_dtype>();
    }
  }
}

// An epilogue Epi<T> one of whose operands (kIndex, counting from 0 after the normalized value) enters it
// only through a function of that operand alone: specializations give kIndex, that function (`transform`) and
// `Epilogue`, the epilogue taking the transformed operand in its place. Where the operand is one row shared
// by a run of consecutive rows (a per-batch or per-frame gate, rms_norm_cached_operand_applies), the kernel
// keeps the transformed row in shared memory and recomputes it only when the block's row leaves the run.
template <typename Epi>
struct RmsNormCachedOperand {
  static constexpr bool kDefined = false;
  static constexpr int kIndex = -1;
};

// True when Epi's cached operand applies to p: a dense row (column stride 1) the same for every index of
// the innermost outer dim, which has more than one row.
template <typename Epi>
bool rms_norm_cached_operand_applies(const RmsNormRowsParams& p) {
  if constexpr (!RmsNormCachedOperand<Epi>::kDefined) {
    return false;
  } else {
    const RowOperand& op = p.rows.in[RmsNormCachedOperand<Epi>::kIndex + 1];
    return op.col_stride == 1 && op.stride[2] == 0 && p.rows.geom.outer[2] > 1;
  }
}

// Cache's transform of operand Cache::kIndex for this thread's columns (VEC at a time, the epilogue's
// columns) of the row with outer indices idx, unless `cached` already names that operand row. Each
// thread writes and later reads only its own columns, so no barrier is needed; `cached` is uniform over
// the block.
template <typename T, int kThreads, int VEC, typename Cache>
__device__ __forceinline__ void refresh_cached_operand(const RmsNormRowsParams& p, const uint32_t idx[3], T* cache,
                                                       int64_t& cached) {
  const RowOperand& op = p.rows.in[Cache::kIndex + 1];
  const int64_t offset = op.offset(idx);
  if (offset == cached) return;
  cached = offset;
  const T* src = static_cast<const T*>(op.data) + offset;
  for (int64_t j = int64_t(threadIdx.x) * VEC; j < p.rows.geom.cols; j += int64_t(kThreads) * VEC) {
#pragma unroll 1  // element by element: once per run of rows, kept rolled
    for (int e = 0; e < VEC; ++e) cache[j + e] = Cache::transform(src[j + e]);
  }
}

// The inputs of VEC outputs from columns j..: the epilogue's operands and the weight, from global memory but
// for operand kCachedIndex (>= 0), read from `cache`.
template <typename T, int VEC, int kOperands>
struct RmsNormEpilogueInputs {
  Pack<T, VEC> in[kOperands > 0 ? kOperands : 1];
  Pack<T, VEC> w;
  template <bool kHasWeight, int kCachedIndex>
  __device__ __forceinline__ void load(const RmsNormRowsParams& p, const uint32_t idx[3], int64_t j, const T* cache) {
#pragma unroll
    for (int k = 0; k < kOperands; ++k) {
      const RowOperand& op = p.rows.in[k + 1];
      const T* src = static_cast<const T*>(op.data) + op.offset(idx);
      if (k == kCachedIndex)
        in[k].load(cache + j);
      else if (op.col_stride == 0)
        in[k].fill(src[0]);
      else
        in[k].load(src + j);
    }
    if constexpr (kHasWeight) w.load(static_cast<const T*>(p.weight) + j);
  }
};

// Blocks per SM of 128 threads the one-row kernels are compiled for: 40 registers. Against the persistent
// blocks before them (79 registers, 6 per SM): rmsnorm_scale 562.8 -> 533.0 us at Wan 2.1 (H100, dfuse bench,
// session 21 run 1; 9 per SM, no bound, 56 registers: 531.5; 16 per SM, 32 registers, epilogue batch 1: 537.9),
// 430.4 -> 392.6 on the H200 (torch_bench, run 2).
constexpr int kRmsNormRowBlocksPerSm = 12;

// Vectors per thread whose inputs the epilogue loads before it uses any (their latencies overlap). In 128-thread
// blocks: two in the one-row kernels, whose occupancy hides the rest; four in the persistent ones (two measured
// slower there: rmsnorm_scale 470 -> 497 us at Wan 2.1, session 12 run 2). One in the 512-thread blocks, whose
// occupancy registers bound.
template <int kThreads, bool kPersistent>
constexpr int rms_norm_epilogue_batch() {
  return kThreads != kRmsNormVecThreads ? 1 : kPersistent ? 4 : 2;
}

// Two normalized elements of 16-bit T (x: a word of two) rounded to T, packed. A rounding whose operands are
// both T values is one packed multiply (their product is exact in float: cuda/paired_arith.cuh): the
// storage-dtype chain's x * rstd (rstd is rounded to T) and, after h's rounding, both decomposed chains' * weight.
// F.rms_norm's weight * (rstd * x), rounded once, stays in float.
template <typename T, typename Element>
__device__ __forceinline__ uint32_t rms_norm_element_pair(Element element, uint32_t x, float inv, uint32_t w) {
  using A = PairedArith<T>;
  if constexpr (Element::kChain == RmsNormChain::storage_dtype) {
    const uint32_t h = A::mul(x, A::pack(inv, inv));
    return Element::kHasWeight ? A::mul(h, w) : h;
  } else if constexpr (Element::kChain == RmsNormChain::diffusers_decomposed && Element::kHasWeight) {
    const float2 xs = A::unpack(x);
    return A::mul(A::pack(mul_rn(xs.x, inv), mul_rn(xs.y, inv)), w);
  } else {
    const float2 xs = A::unpack(x);
    const float2 ws = Element::kHasWeight ? A::unpack(w) : make_float2(1.0f, 1.0f);
    return A::pack(element(xs.x, inv, ws.x), element(xs.y, inv, ws.y));
  }
}

// VEC outputs from columns j.. of the staged row and their inputs. Where the epilogue has a pair form
// (RowwisePair, cuda/paired_arith.cuh) and T is 16-bit, the normalized values come in packed pairs
// (rms_norm_element_pair) and the epilogue runs on them; elsewhere, and for a vector whose pair form falls
// back, the element functor runs.
template <typename T, int VEC, typename Epi, typename Element, int kOperands, size_t... K>
__device__ __forceinline__ void rms_norm_rows_epilogue(const RmsNormRowsParams& p, const Epi& epi, Element element,
                                                       const T* row, float inv, const uint32_t idx[3], int64_t j,
                                                       const RmsNormEpilogueInputs<T, VEC, kOperands>& inputs,
                                                       std::index_sequence<K...>) {
  using S = Storage<T>;
  const auto& in = inputs.in;
  const Pack<T, VEC>& w = inputs.w;
  Pack<T, VEC> x;
  x.load(row + j);
  Pack<T, VEC> r;
  bool by_element = true;
  if constexpr (sizeof(T) == 2 && VEC % 2 == 0 && RowwisePair<Epi>::kDefined) {
    by_element = false;
#pragma unroll
    for (int k = 0; k < Pack<T, VEC>::kWords; ++k)
      r.w[k] = RowwisePair<Epi>::apply(by_element, rms_norm_element_pair<T>(element, x.w[k], inv, w.w[k]),
                                       in[K].w[k]...);
  }
  if (by_element) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      const float we = Element::kHasWeight ? S::load(w.get(e)) : 1.0f;
      r.set(e, epi(S::store(element(S::load(x.get(e)), inv, we)), in[K].get(e)...));
    }
  }
  r.store_global(static_cast<T*>(p.rows.out.data) + p.rows.out.offset(idx) + j);
}

// One kernel per chain (each with its own register count and occupancy). kCached: Epi's cached operand
// (RmsNormCachedOperand) is kept transformed in shared memory after the staged rows, and the epilogue is its
// `Epilogue`; those blocks are persistent over rows, so that the operand is transformed once per run of rows
// (rmsnorm_tanh_residual's tanh(gate): 772 -> 599 us at Wan 2.1, session 19), and no bound is set on their
// blocks per SM (at 6 or more, 80 registers, its storage-dtype kernel ran 792.7 us, at the compiler's 93
// registers 772.6: session 12 run 4). Without it a block takes one row.
// The staged row starts on a 128-byte boundary of shared memory, so that each 32-byte sector of a warp's cp.async
// lands in one shared sector (placed right after the static shared memory, 16 bytes past a 32-byte boundary in
// most instantiations, each straddled two): on an H100 (session 31) rmsnorm_scale 25.7 / 536.4 -> 24.1 / 518.1 us
// at FLUX.1 / Wan 2.1, rmsnorm_decomposed_scale_shift 26.8 / 545.1 -> 25.5 / 523.6; the persistent kCached blocks
// (rmsnorm_tanh_residual) 37.0 / 805.8 -> 36.3 / 814.4, which puts FLUX.1 ahead of torch.compile (0.98x -> 1.00x)
// and keeps Wan 2.1 at 1.14x.
template <typename T, int kThreads, int VEC, RmsNormChain kChain, typename Epi, bool kCached>
__global__ void __launch_bounds__(kThreads, kCached || kThreads != kRmsNormVecThreads ? 1 : kRmsNormRowBlocksPerSm)
    rms_norm_rows_kernel(RmsNormRowsParams p, Epi epi) {
  extern __shared__ __align__(128) unsigned char staged[];
  using Cache = RmsNormCachedOperand<Epi>;
  constexpr int kOperands = rowwise_arity<T, Epi>() - 1;
  constexpr int kCachedIndex = kCached ? Cache::kIndex : -1;
  const auto epilogue = [&] {
    if constexpr (kCached)
      return typename Cache::Epilogue{};
    else
      return epi;
  }();
  const int64_t n = p.rows.geom.cols;
  T* const cache = reinterpret_cast<T*>(staged) + staged_bytes_per_column<T, VEC>() / sizeof(T) * n;
  int64_t cached = -1;  // the element offset of the operand row in `cache`
  const auto x_of = [&p](uint32_t r) {
    uint32_t idx[3];
    p.rows.geom.split(r, idx);
    return static_cast<const T*>(p.rows.in[0].data) + p.rows.in[0].offset(idx);
  };
  const auto normalize = [&](uint32_t r, const T* row) {
    uint32_t idx[3];
    p.rows.geom.split(r, idx);
    if constexpr (kCached) refresh_cached_operand<T, kThreads, VEC, Cache>(p, idx, cache, cached);
    const float inv = block_rms_norm_row_inv<T, kThreads, kChain>(p, row, r);
    with_rms_norm_element_of<T, kChain>(p, [&](auto element) {
      constexpr int64_t kStride = int64_t(kThreads) * VEC;
      constexpr int kBatch = rms_norm_epilogue_batch<kThreads, kCached>();
      for (int64_t j0 = int64_t(threadIdx.x) * VEC; j0 < n; j0 += kBatch * kStride) {
        RmsNormEpilogueInputs<T, VEC, kOperands> inputs[kBatch];
#pragma unroll
        for (int b = 0; b < kBatch; ++b)
          if (j0 + b * kStride < n)
            inputs[b].template load<decltype(element)::kHasWeight, kCachedIndex>(p, idx, j0 + b * kStride, cache);
#pragma unroll
        for (int b = 0; b < kBatch; ++b)
          if (j0 + b * kStride < n)
            rms_norm_rows_epilogue<T, VEC>(p, epilogue, element, row, inv, idx, j0 + b * kStride, inputs[b],
                                           std::make_index_sequence<kOperands>{});
      }
    });
  };
  T* const row = reinterpret_cast<T*>(staged);
  if constexpr (!kCached) {  // one row
    stage_row_async_or_batched<T, kThreads, VEC, 4>(x_of(blockIdx.x), row, n);
    __syncthreads();
    normalize(blockIdx.x, row);
  } else if constexpr (stages_ahead<T, VEC>()) {  // the next row staged while this one is normalized
    for_each_row_staged_ahead<T, kThreads>(row, n, blockIdx.x, gridDim.x, uint32_t(p.rows.geom.rows()), x_of,
                                           normalize);
  } else {
    for (uint32_t r = blockIdx.x; r < uint32_t(p.rows.geom.rows()); r += gridDim.x) {
      stage_row<T, kThreads, VEC, 4>(x_of(r), row, n);
      __syncthreads();
      normalize(r, row);
      __syncthreads();  // the next row overwrites the staged one
    }
  }
}

// The kernel for p's chain, with Epi's cached operand where it applies (its row of T after the staged rows).
template <typename T, int kThreads, int VEC, typename Epi>
void launch_rms_norm_rows(const RmsNormRowsParams& p, Epi epi, cudaStream_t stream) {
  with_rms_norm_chain<kThreads>(p.chain, [&]<RmsNormChain kChain>() {
    if constexpr (RmsNormCachedOperand<Epi>::kDefined) {
      if (rms_norm_cached_operand_applies<Epi>(p)) {
        launch_staged_rows<rms_norm_rows_kernel<T, kThreads, VEC, kChain, Epi, true>>(
            kThreads, p.rows.geom.rows(), p.rows.geom.cols, staged_bytes_per_column<T, VEC>() + sizeof(T),
            p.rows.device, stream, p, epi);
        return;
      }
    }
    launch_row_per_block<rms_norm_rows_kernel<T, kThreads, VEC, kChain, Epi, false>>(
        kThreads, p.rows.geom.rows(), size_t(p.rows.geom.cols) * sizeof(T), stream, p, epi);
  });
}

// 16-byte vectors when x, the operands, the output and the weight allow them.
template <typename T, int kThreads, typename Epi>
void launch_rms_norm_rows_vec(const RmsNormRowsParams& p, Epi epi, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const bool weight_ok = !p.weight || reinterpret_cast<uintptr_t>(p.weight) % 16 == 0;
  if (weight_ok && rowwise_vectorizable(p.rows, 16))
    launch_rms_norm_rows<T, kThreads, kVec>(p, epi, stream);
  else
    launch_rms_norm_rows<T, kThreads, 1>(p, epi, stream);
}

// The CUDA entry of an RMSNorm op whose epilogue is Epi<T>: dtype dispatch, then launch.
template <template <typename> class Epi>
void rms_norm_rows_cuda_entry(const RmsNormRowsParams& p, Stream stream) {
  if (p.rows.geom.rows() == 0 || p.rows.geom.cols == 0) return;
  const DeviceGuard device(p.rows.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.rows.dtype, "rmsnorm kernel", [&](auto tag) {
    using T = decltype(tag);
    if (p.chain == RmsNormChain::torch_rms_norm && p.path == LayerNormPath::generic)
      launch_rms_norm_rows_vec<T, kLayerNormMomentsThreads>(p, Epi<T>{}, s);
    else
      launch_rms_norm_rows_vec<T, kRmsNormVecThreads>(p, Epi<T>{}, s);
  });
}

}  // namespace dfuse::detail
