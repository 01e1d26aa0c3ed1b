// diffusion.fp32_layernorm_bf16: the CUDA kernel. One block per row with the statistics block of
// aten's fp32 LayerNorm path (cuda/layer_norm_stats.cuh: 128 threads over 4-element chunks, 8-byte
// accesses where the rows are aligned, or 512 threads), x read as bf16/f16 and widened exactly;
// after the reduction each thread re-reads its elements (L1/L2), with the fp32 gamma and beta of each
// 4-element chunk by one 16-byte load each where they allow it, computes aten's fp32 element and rounds it
// once to x's dtype. In place is safe: a thread writes only elements it has read itself after the row's
// statistics are complete.
// Contract: fp32_layernorm_bf16.h.
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "ops/norm/fp32_layernorm_bf16.h"

namespace dfuse::detail {
namespace {

// Elements 4i..4i+3 of an fp32 gamma or beta row t (null: absent, left unread): one 16-byte load where `vec`
// (stride 1, 16-byte aligned), else one element at a time.
__device__ __forceinline__ void load_affine_chunk4(const float* t, int64_t stride, int64_t i, bool vec, float v[4]) {
  if (!t) return;
  if (vec) {
    const float4 q = *reinterpret_cast<const float4*>(t + 4 * i);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = t[(4 * i + k) * stride];
  }
}

// affine_vec: gamma and beta (where present) allow load_affine_chunk4's 16-byte loads.
template <typename T, LayerNormPath Path>
__global__ void fp32_layernorm_kernel(Fp32LayerNormParams p, bool x_vec, bool out_vec, bool affine_vec) {
  using S = Storage<T>;
  uint32_t idx[3];
  p.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  const int64_t n = p.geom.cols;
  if constexpr (Path == LayerNormPath::vectorized) {
    const LayerNormStats stats = block_layer_norm_stats_vectorized(
        [&](int64_t i, float v[4]) {
          const Chunk4<T> c = load_chunk4(x, i, 1, x_vec);
#pragma unroll
          for (int k = 0; k < 4; ++k) v[k] = S::load(c.get(k));
        },
        n);
    const float rstd = layer_norm_rstd(stats.var, p.eps);
    for (int64_t i = threadIdx.x; i < n / 4; i += kLayerNormVecThreads) {
      const Chunk4<T> c = load_chunk4(x, i, 1, x_vec);
      float g[4] = {}, b[4] = {};
      load_affine_chunk4(p.weight, p.weight_stride, i, affine_vec, g);
      load_affine_chunk4(p.bias, p.bias_stride, i, affine_vec, b);
      Chunk4<T> o;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        o.set(k, fp32_layernorm_element<T>(p, S::load(c.get(k)), stats.mean, rstd, g[k], b[k], k));
      store_chunk4(out, i, o, out_vec);
    }
  } else {
    const LayerNormStats stats = block_layer_norm_stats_generic([&](int64_t c) { return S::load(x[c]); }, n);
    const float rstd = layer_norm_rstd(stats.var, p.eps);
    for (int64_t c = threadIdx.x; c < n; c += kLayerNormMomentsThreads)
      out[c] = fp32_layernorm_element<T>(p, S::load(x[c]), stats.mean, rstd, c);
  }
}

template <typename T>
void launch(const Fp32LayerNormParams& p, unsigned rows, cudaStream_t s) {
  const int vec_bytes = 4 * int(sizeof(T));
  const bool x_vec = rows_aligned(p.x, p.dtype, vec_bytes), out_vec = rows_aligned(p.out, p.dtype, vec_bytes);
  const auto vec_row = [](const float* t, int64_t stride) {
    return !t || (stride == 1 && reinterpret_cast<uintptr_t>(t) % 16 == 0);
  };
  const bool affine_vec = vec_row(p.weight, p.weight_stride) && vec_row(p.bias, p.bias_stride);
  if (p.path == LayerNormPath::vectorized)
    fp32_layernorm_kernel<T, LayerNormPath::vectorized>
        <<<rows, kLayerNormVecThreads, 0, s>>>(p, x_vec, out_vec, affine_vec);
  else
    fp32_layernorm_kernel<T, LayerNormPath::generic>
        <<<rows, kLayerNormMomentsThreads, 0, s>>>(p, x_vec, out_vec, affine_vec);
}

void cuda_fp32_layernorm_bf16(const Fp32LayerNormParams& p, Stream stream) {
  const int64_t rows = p.geom.rows();
  if (rows == 0) return;
  const DeviceGuard guard(p.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  if (p.dtype == DType::bf16)
    launch<bf16_t>(p, unsigned(rows), s);
  else
    launch<f16_t>(p, unsigned(rows), s);
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "fp32_layernorm_bf16", &cuda_fp32_layernorm_bf16);

}  // namespace
}  // namespace dfuse::detail
