// diffusion.scale_residual_norm_scale_shift: the CUDA kernel. One block per row, with aten's
// statistics block for r's path (cuda/layer_norm_stats.cuh, cuda/rms_norm_stats.cuh): 128 threads
// for the vectorized path, 512 for the generic one. Each thread computes r for its 4-element chunks
// (chunk i, i + blockDim, ...: aten's assignment on the vectorized path; single elements when
// D % 4 != 0) from residual/gate/update (8-byte bf16/f16, 16-byte f32 accesses where aligned),
// writes r once and stages it in shared memory (in T, bit for bit); the block folds the statistics
// from the staged row in aten's order, then each thread produces its outputs from the staged r, the
// weight and scale/shift, and writes them once. On 4-element chunks the norm's element is fixed per
// row (with_residual_norm_element) and 16-bit T computes r and the modulate on packed pairs. residual
// is read before residual_out is written, element by element by the same thread, so residual_out may be
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
};

// The row's statistics from the staged r, by the whole block (kThreads = the path's aten block).
template <int kThreads, typename T>
__device__ ResidualNormStats block_residual_norm_stats(const ScaleResidualNormParams& p, const T* row, int64_t n) {
  if constexpr (kThreads == kLayerNormMomentsThreads) {
    const LayerNormStats s = block_layer_norm_stats_generic(staged_element(row), n);
    if (p.norm == ResidualNormKind::layer_norm) return {s.mean, layer_norm_rstd(s.var, p.eps)};
    return {0.0f, torch_rms_norm_rstd_generic(s, p.eps)};
  } else {
    static_assert(kThreads == kLayerNormVecThreads && kThreads == kRmsNormVecThreads);
    if (p.norm == ResidualNormKind::rms_norm)
      return {0.0f, block_torch_rms_norm_rstd(staged_chunks4(row), n, p.eps)};
    const LayerNormStats s = block_layer_norm_stats_vectorized(staged_chunks4(row), n);
    return {s.mean, layer_norm_rstd(s.var, p.eps)};
  }
}

template <typename T, int kThreads>
__global__ void __launch_bounds__(kThreads) scale_residual_norm_kernel(ScaleResidualNormParams p, ResidualNormVec vec) {
  extern __shared__ __align__(16) unsigned char staged_bytes[];
  T* const staged = reinterpret_cast<T*>(staged_bytes);
  using S = Storage<T>;
  const RowwiseParams& q = p.rows;
  uint32_t idx[3];
  q.geom.split(blockIdx.x, idx);
  const auto in = [&](int k) { return static_cast<const T*>(q.in[k].data) + q.in[k].offset(idx); };
  const T *residual = in(0), *gate = in(1), *update = in(2), *scale = in(3);
  const T* shift = static_cast<const T*>(p.shift.data) + p.shift.offset(idx);
  const T* weight = static_cast<const T*>(p.weight);
  T* r_out = static_cast<T*>(q.out.data) + q.out.offset(idx);
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  const int64_t cs_res = q.in[0].col_stride, cs_gate = q.in[1].col_stride, cs_upd = q.in[2].col_stride,
                cs_scale = q.in[3].col_stride, cs_shift = p.shift.col_stride;
  const int64_t n = q.geom.cols;
  const int tid = threadIdx.x;
  const ResidualGateAdd<T> gate_add;

  if (n % 4 == 0) {
    for (int64_t i = tid; i < n / 4; i += kThreads) {
      const Chunk4<T> a = load_chunk4(residual, i, cs_res, vec.residual);
      const Chunk4<T> g = load_chunk4(gate, i, cs_gate, vec.gate);
      const Chunk4<T> u = load_chunk4(update, i, cs_upd, vec.update);
      Chunk4<T> r;
      if constexpr (sizeof(T) == 2) {  // on packed pairs (ops/adaln/residual_gate_add.cuh)
        bool fallback = false;  // the gated residual's pair form has none
#pragma unroll
        for (int k = 0; k < 2; ++k) r.w[k] = RowwisePair<ResidualGateAdd<T>>::apply(fallback, a.w[k], g.w[k], u.w[k]);
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) r.set(k, gate_add(a.get(k), g.get(k), u.get(k)));
      }
      r.store(staged + 4 * i);
      store_chunk4(r_out, i, r, vec.r_out);
    }
  } else {
    for (int64_t k = tid; k < n; k += kThreads) {
      const T r = gate_add(residual[k * cs_res], gate[k * cs_gate], update[k * cs_upd]);
      staged[k] = r;
      r_out[k] = r;
    }
  }
  __syncthreads();
  const ResidualNormStats stats = block_residual_norm_stats<kThreads>(p, static_cast<const T*>(staged), n);

  if (n % 4 == 0) {
    constexpr LayerNormPath kPath =
        kThreads == kLayerNormMomentsThreads ? LayerNormPath::generic : LayerNormPath::vectorized;
    with_residual_norm_element<kPath>(p, [&](auto element) {
      using Element = decltype(element);
      for (int64_t i = tid; i < n / 4; i += kThreads) {
        const Chunk4<T> sc = load_chunk4(scale, i, cs_scale, vec.scale);
        const Chunk4<T> sh = load_chunk4(shift, i, cs_shift, vec.shift);
        Chunk4<T> w{};
        if constexpr (Element::kHasWeight) w = load_chunk4(weight, i, 1, vec.weight);
        const Chunk4<T> r = load_chunk4(static_cast<const T*>(staged), i, 1, true);
        float y[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
          y[k] = element(S::load(r.get(k)), stats, k, Element::kHasWeight ? S::load(w.get(k)) : 1.0f);
        Chunk4<T> o;
        if constexpr (sizeof(T) == 2) {  // the modulate on packed pairs (ops/adaln/modulate_scale_shift.cuh)
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
    });
  } else {
    for (int64_t k = tid; k < n; k += kThreads)
      out[k] = scale_residual_norm_element<T>(p, S::load(staged[k]), stats, int(k % 4),
                                              weight ? S::load(weight[k]) : 1.0f, scale[k * cs_scale],
                                              shift[k * cs_shift]);
  }
}

void scale_residual_norm_cuda(const ScaleResidualNormParams& p, Stream stream) {
  const int64_t rows = p.rows.geom.rows();
  if (rows == 0 || p.rows.geom.cols == 0) return;
  const DeviceGuard guard(p.rows.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  const int vec_bytes = 4 * int(dtype_size(p.rows.dtype));
  const auto aligned = [&](const RowOperand& op) {
    return op.col_stride == 1 && rows_aligned(op, p.rows.dtype, vec_bytes);
  };
  const ResidualNormVec vec{aligned(p.rows.in[0]), aligned(p.rows.in[1]), aligned(p.rows.in[2]),
                            aligned(p.rows.in[3]), aligned(p.shift),       aligned(p.rows.out),
                            aligned(p.out),        reinterpret_cast<uintptr_t>(p.weight) % vec_bytes == 0};
  const size_t smem = size_t(p.rows.geom.cols) * dtype_size(p.rows.dtype);
  dispatch_bf16_f16_f32(p.rows.dtype, "scale_residual_norm_scale_shift", [&](auto tag) {
    using T = decltype(tag);
    if (p.path == LayerNormPath::vectorized)
      scale_residual_norm_kernel<T, kLayerNormVecThreads><<<unsigned(rows), kLayerNormVecThreads, smem, s>>>(p, vec);
    else
      scale_residual_norm_kernel<T, kLayerNormMomentsThreads>
          <<<unsigned(rows), kLayerNormMomentsThreads, smem, s>>>(p, vec);
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace

DFUSE_REGISTER_ENTRY(cuda, "scale_residual_norm_scale_shift", &scale_residual_norm_cuda);

}  // namespace dfuse::detail
