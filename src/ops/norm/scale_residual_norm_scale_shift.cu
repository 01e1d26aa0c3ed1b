// diffusion.scale_residual_norm_scale_shift: the CUDA kernels. One block per row, with aten's
// statistics block for r's path (cuda/layer_norm_stats.cuh, cuda/rms_norm_stats.cuh): 128 threads
// for the vectorized path, 512 for the generic one. Each thread computes r for its 4-element chunks
// (chunk i, i + blockDim, ...: aten's assignment on the vectorized path; single elements when
// D % 4 != 0) from residual/gate/update (8-byte bf16/f16, 16-byte f32 accesses where aligned) and
// writes r once; the block folds the statistics from those r values in aten's order, then each thread
// produces its outputs from its r, the weight and scale/shift, and writes them once. Vectorized rows
// up to 6144 elements keep r in registers, every load of the row issued before the first r is computed
// (scale_residual_norm_cached); longer rows and the generic path stage r in shared memory, in T bit
// for bit (scale_residual_norm_staged). On 4-element chunks the norm's element is fixed per row
// (with_residual_norm_element) and 16-bit T computes r and the modulate on packed pairs. residual is
// read before residual_out is written, element by element by the same thread, so residual_out may be
// residual. Contract: ops/norm/scale_residual_norm_scale_shift.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "cuda/rms_norm_stats.cuh"
#include "cuda/rowwise.cuh"
#include "ops/adaln/modulate_scale_shift.cuh"
#include "ops/adaln/residual_gate_add.cuh"
#include "ops/norm/scale_residual_norm_scale_shift.h"

namespace dfuse::detail {

namespace {

// Which operands allow one 4-element access per chunk.
struct ResidualNormVec {
  bool residual, gate, update, scale, shift, r_out, out, weight;
  bool all() const { return residual && gate && update && scale && shift && r_out && out && weight; }
};

// Block blockIdx.x's row of every operand, with their column strides (1 for every operand where kAligned: all of
// them allow 4-element accesses).
template <typename T, bool kAligned>
struct ResidualNormRow {
  const T *residual, *gate, *update, *scale, *shift, *weight;
  T *r_out, *out;
  int64_t cs_res, cs_gate, cs_upd, cs_scale, cs_shift;

  __device__ explicit ResidualNormRow(const ScaleResidualNormParams& p) {
    const RowwiseParams& q = p.rows;
    uint32_t idx[3];
    q.geom.split(blockIdx.x, idx);
    const auto in = [&](int k) { return static_cast<const T*>(q.in[k].data) + q.in[k].offset(idx); };
    residual = in(0), gate = in(1), update = in(2), scale = in(3);
    shift = static_cast<const T*>(p.shift.data) + p.shift.offset(idx);
    weight = static_cast<const T*>(p.weight);
    r_out = static_cast<T*>(q.out.data) + q.out.offset(idx);
    out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    const auto cs = [](int64_t s) { return kAligned ? int64_t(1) : s; };
    cs_res = cs(q.in[0].col_stride), cs_gate = cs(q.in[1].col_stride), cs_upd = cs(q.in[2].col_stride);
    cs_scale = cs(q.in[3].col_stride), cs_shift = cs(p.shift.col_stride);
  }

  // Chunk i of r = residual + gate * update, on packed pairs for 16-bit T (ops/adaln/residual_gate_add.cuh).
  __device__ __forceinline__ Chunk4<T> gated_residual(const Chunk4<T>& a, const Chunk4<T>& g,
                                                      const Chunk4<T>& u) const {
    Chunk4<T> r;
    if constexpr (sizeof(T) == 2) {
      bool fallback = false;  // the gated residual's pair form has none
#pragma unroll
      for (int k = 0; k < 2; ++k) r.w[k] = RowwisePair<ResidualGateAdd<T>>::apply(fallback, a.w[k], g.w[k], u.w[k]);
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) r.set(k, ResidualGateAdd<T>{}(a.get(k), g.get(k), u.get(k)));
    }
    return r;
  }

  // The modulated output's chunk i from r's chunk i (the modulate on packed pairs for 16-bit T,
  // ops/adaln/modulate_scale_shift.cuh).
  template <typename Element>
  __device__ __forceinline__ void emit(Element element, const ResidualNormVec& vec, int64_t i, const Chunk4<T>& r,
                                       ResidualNormStats stats) const {
    using S = Storage<T>;
    const Chunk4<T> sc = load_chunk4(scale, i, cs_scale, vec.scale);
    const Chunk4<T> sh = load_chunk4(shift, i, cs_shift, vec.shift);
    Chunk4<T> w{};
    if constexpr (Element::kHasWeight) w = load_chunk4(weight, i, 1, vec.weight);
    float y[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      y[k] = element(S::load(r.get(k)), stats, k, Element::kHasWeight ? S::load(w.get(k)) : 1.0f);
    Chunk4<T> o;
    if constexpr (sizeof(T) == 2) {
      bool fallback = false;  // modulate's pair form has none
#pragma unroll
      for (int k = 0; k < 2; ++k)
        o.w[k] = RowwisePair<ModulateScaleShift<T>>::apply(fallback, PairedArith<T>::pack(y[2 * k], y[2 * k + 1]),
                                                           sc.w[k], sh.w[k]);
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) o.set(k, ModulateScaleShift<T>{}(S::store(y[k]), sc.get(k), sh.get(k)));
    }
    store_chunk4(out, i, o, vec.out);
  }
};

// Vectorized rows up to 512 * Cached elements, r held in registers: every thread issues the loads of all its
// chunks (tid + 128 j, aten's assignment) of residual, gate and update before it computes any r, writes r once,
// folds the statistics from its r chunks (cuda/layer_norm_stats.cuh's and cuda/rms_norm_stats.cuh's cached
// forms), then emits the outputs.
template <typename T, int Cached, bool kAligned>
__global__ void __launch_bounds__(kLayerNormVecThreads)
    scale_residual_norm_cached(ScaleResidualNormParams p, ResidualNormVec runtime_vec, WelfordBlockFold fold) {
  const ResidualNormVec vec = kAligned ? ResidualNormVec{true, true, true, true, true, true, true, true} : runtime_vec;
  const ResidualNormRow<T, kAligned> row(p);
  const int64_t n = p.rows.geom.cols;
  Chunk4<T> r[Cached];
  {
    Chunk4<T> a[Cached], g[Cached], u[Cached];
#pragma unroll
    for (int j = 0; j < Cached; ++j) {
      const int64_t i = layer_norm_cached_chunk(j);
      if (i < n / 4) {
        a[j] = load_chunk4(row.residual, i, row.cs_res, vec.residual);
        g[j] = load_chunk4(row.gate, i, row.cs_gate, vec.gate);
        u[j] = load_chunk4(row.update, i, row.cs_upd, vec.update);
      }
    }
#pragma unroll
    for (int j = 0; j < Cached; ++j)
      if (layer_norm_cached_chunk(j) < n / 4) r[j] = row.gated_residual(a[j], g[j], u[j]);
  }
  // residual may be r_out: every thread has read all its chunks of residual before it writes any.
  for_each_cached_chunk(r, n, [&](int64_t i, const Chunk4<T>& c) { store_chunk4(row.r_out, i, c, vec.r_out); });
  ResidualNormStats stats;
  if (p.norm == ResidualNormKind::layer_norm) {
    const LayerNormStats s = layer_norm_cached_row_stats(r, n, fold);
    stats = {s.mean, layer_norm_rstd(s.var, p.eps)};
  } else {
    stats = {0.0f, block_torch_rms_norm_rstd_cached(r, n, p.eps)};
  }
  with_residual_norm_element<LayerNormPath::vectorized>(p, [&](auto element) {
    for_each_cached_chunk(r, n, [&](int64_t i, const Chunk4<T>& c) { row.emit(element, vec, i, c, stats); });
  });
}

// The row's statistics from the staged r, by the whole block (kThreads = the path's aten block).
template <int kThreads, typename T>
__device__ ResidualNormStats block_residual_norm_stats(const ScaleResidualNormParams& p, const T* row, int64_t n,
                                                       const WelfordBlockFold& fold) {
  if constexpr (kThreads == kLayerNormMomentsThreads) {
    const LayerNormStats s = block_layer_norm_stats_generic(staged_element(row), n);
    if (p.norm == ResidualNormKind::layer_norm) return {s.mean, layer_norm_rstd(s.var, p.eps)};
    return {0.0f, torch_rms_norm_rstd_generic(s, p.eps)};
  } else {
    static_assert(kThreads == kLayerNormVecThreads && kThreads == kRmsNormVecThreads);
    if (p.norm == ResidualNormKind::rms_norm)
      return {0.0f, block_torch_rms_norm_rstd(staged_chunks4(row), n, p.eps)};
    const LayerNormStats s = block_layer_norm_stats_vectorized(staged_chunks4(row), n, fold);
    return {s.mean, layer_norm_rstd(s.var, p.eps)};
  }
}

// Longer vectorized rows (up to kScaleResidualNormMaxCols) and the generic path: r staged in shared memory.
template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads)
    scale_residual_norm_staged(ScaleResidualNormParams p, ResidualNormVec vec, WelfordBlockFold fold) {
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  T* const staged = reinterpret_cast<T*>(staged_bytes);
  using S = Storage<T>;
  const ResidualNormRow<T, false> row(p);
  const int64_t n = p.rows.geom.cols;
  const int tid = threadIdx.x;

  if (n % 4 == 0) {
    for (int64_t i = tid; i < n / 4; i += kThreads) {
      const Chunk4<T> r = row.gated_residual(load_chunk4(row.residual, i, row.cs_res, vec.residual),
                                             load_chunk4(row.gate, i, row.cs_gate, vec.gate),
                                             load_chunk4(row.update, i, row.cs_upd, vec.update));
      r.store(staged + 4 * i);
      store_chunk4(row.r_out, i, r, vec.r_out);
    }
  } else {
    for (int64_t k = tid; k < n; k += kThreads) {
      const T r = ResidualGateAdd<T>{}(row.residual[k * row.cs_res], row.gate[k * row.cs_gate],
                                       row.update[k * row.cs_upd]);
      staged[k] = r;
      row.r_out[k] = r;
    }
  }
  __syncthreads();
  const ResidualNormStats stats = block_residual_norm_stats<kThreads>(p, static_cast<const T*>(staged), n, fold);

  if (n % 4 == 0) {
    constexpr LayerNormPath kPath =
        kThreads == kLayerNormMomentsThreads ? LayerNormPath::generic : LayerNormPath::vectorized;
    with_residual_norm_element<kPath>(p, [&](auto element) {
      for (int64_t i = tid; i < n / 4; i += kThreads)
        row.emit(element, vec, i, load_chunk4(static_cast<const T*>(staged), i, 1, true), stats);
    });
  } else {
    for (int64_t k = tid; k < n; k += kThreads)
      row.out[k] = scale_residual_norm_element<T>(p, S::load(staged[k]), stats, int(k % 4),
                                                  row.weight ? S::load(row.weight[k]) : 1.0f,
                                                  row.scale[k * row.cs_scale], row.shift[k * row.cs_shift]);
  }
}

void scale_residual_norm_cuda(const ScaleResidualNormParams& p, Stream stream) {
  const int64_t rows = p.rows.geom.rows(), n = p.rows.geom.cols;
  if (rows == 0 || n == 0) return;
  const DeviceGuard guard(p.rows.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  const int vec_bytes = 4 * int(dtype_size(p.rows.dtype));
  const auto aligned = [&](const RowOperand& op) {
    return op.col_stride == 1 && rows_aligned(op, p.rows.dtype, vec_bytes);
  };
  const ResidualNormVec vec{aligned(p.rows.in[0]), aligned(p.rows.in[1]), aligned(p.rows.in[2]),
                            aligned(p.rows.in[3]), aligned(p.shift),       aligned(p.rows.out),
                            aligned(p.out),        reinterpret_cast<uintptr_t>(p.weight) % vec_bytes == 0};
  const size_t smem = size_t(n) * dtype_size(p.rows.dtype);
  const WelfordBlockFold fold = welford_block_fold(n);
  const auto grid = unsigned(rows);
  dispatch_bf16_f16_f32(p.rows.dtype, "scale_residual_norm_scale_shift", [&](auto tag) {
    using T = decltype(tag);
    if (p.path == LayerNormPath::generic) {
      scale_residual_norm_staged<T, kLayerNormMomentsThreads>
          <<<grid, kLayerNormMomentsThreads, smem, s>>>(p, vec, WelfordBlockFold{});
      return;
    }
    with_layer_norm_cached(n, [&]<int Cached>() {
      if constexpr (Cached == 0)
        scale_residual_norm_staged<T, kLayerNormVecThreads><<<grid, kLayerNormVecThreads, smem, s>>>(p, vec, fold);
      else if (vec.all())
        scale_residual_norm_cached<T, Cached, true><<<grid, kLayerNormVecThreads, 0, s>>>(p, vec, fold);
      else
        scale_residual_norm_cached<T, Cached, false><<<grid, kLayerNormVecThreads, 0, s>>>(p, vec, fold);
    });
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace

DFUSE_REGISTER_ENTRY(cuda, "scale_residual_norm_scale_shift", &scale_residual_norm_cuda);

}  // namespace dfuse::detail
