// diffusion.fp32_layernorm_bf16: the CUDA kernel. One block per row with the statistics block of
// aten's fp32 LayerNorm path (cuda/layer_norm_stats.cuh): 128 threads over 4-element chunks (8-byte accesses
// where the rows are aligned) or 512 threads. x is read as bf16/f16 and widened exactly. On the vectorized path
// rows up to 6144 elements keep their chunks in registers from the statistics to the output (all loaded before
// the reduction, x read once); longer rows re-read theirs after it (L1/L2). Each thread then computes aten's
// fp32 element, with the fp32 gamma and beta of each chunk by one 16-byte load each where they allow it and
// their presence fixed per kernel loop, and rounds it once to x's dtype. In place is safe: a thread writes only
// elements it has read itself after the row's statistics are complete.
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

// Which operands allow 4-element accesses: x's and out's rows, gamma and beta (where present) 16-byte loads.
struct Fp32LayerNormAccess {
  bool x, out, affine;
};

// f.template operator()<kWeight, kBias>() with p's gamma and beta presence as compile-time constants.
template <typename F>
__device__ __forceinline__ void with_affine(const Fp32LayerNormParams& p, F&& f) {
  if (p.weight)
    p.bias ? f.template operator()<true, true>() : f.template operator()<true, false>();
  else
    p.bias ? f.template operator()<false, true>() : f.template operator()<false, false>();
}

// The vectorized path; Cached > 0: the row in registers (load_layer_norm_row_cached). kAligned: every access
// allows 4 elements (the common case, no element-wise fallback compiled), else `runtime` says which do.
// Eight blocks per SM asked of the compiler (at most 64 registers; left to itself it took 79 for 12 cached chunks,
// 6 blocks): Wan 2.1 431 -> 388 us (session 15 run 4). The same bound slowed norm_scale_shift's cached kernel.
constexpr int kFp32LayerNormBlocksPerSm = 8;

template <typename T, int Cached, bool kAligned>
__global__ void __launch_bounds__(kLayerNormVecThreads, kFp32LayerNormBlocksPerSm)
    fp32_layernorm_vectorized(Fp32LayerNormParams p, Fp32LayerNormAccess runtime, WelfordBlockFold fold) {
  using S = Storage<T>;
  const Fp32LayerNormAccess vec = kAligned ? Fp32LayerNormAccess{true, true, true} : runtime;
  uint32_t idx[3];
  p.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  const int64_t n = p.geom.cols;
  Chunk4<T> xc[Cached > 0 ? Cached : 1];
  LayerNormStats stats;
  if constexpr (Cached > 0) {
    stats = load_layer_norm_row_cached(x, n, vec.x, fold, xc);
  } else {
    stats = block_layer_norm_stats_vectorized(
        [&](int64_t i, float v[4]) {
          const Chunk4<T> c = load_chunk4(x, i, 1, vec.x);
#pragma unroll
          for (int k = 0; k < 4; ++k) v[k] = S::load(c.get(k));
        },
        n, fold);
  }
  const float rstd = layer_norm_rstd(stats.var, p.eps);
  with_affine(p, [&]<bool kWeight, bool kBias>() {
    const auto emit = [&](int64_t i, const Chunk4<T>& c) {
      float g[4] = {1.0f, 1.0f, 1.0f, 1.0f}, b[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if constexpr (kWeight) load_affine_chunk4(p.weight, p.weight_stride, i, vec.affine, g);
      if constexpr (kBias) load_affine_chunk4(p.bias, p.bias_stride, i, vec.affine, b);
      Chunk4<T> o;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        o.set(k, S::store(layer_norm_element(LayerNormPath::vectorized, S::load(c.get(k)), stats.mean, rstd, kWeight,
                                             g[k], kBias, b[k], k)));
      store_chunk4(out, i, o, vec.out);
    };
    if constexpr (Cached > 0) {
      for_each_cached_chunk(xc, n, emit);
    } else {
      for (int64_t i = threadIdx.x; i < n / 4; i += kLayerNormVecThreads) emit(i, load_chunk4(x, i, 1, vec.x));
    }
  });
}

template <typename T>
__global__ void __launch_bounds__(kLayerNormMomentsThreads) fp32_layernorm_generic(Fp32LayerNormParams p) {
  using S = Storage<T>;
  uint32_t idx[3];
  p.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  const int64_t n = p.geom.cols;
  const LayerNormStats stats = block_layer_norm_stats_generic([&](int64_t c) { return S::load(x[c]); }, n);
  const float rstd = layer_norm_rstd(stats.var, p.eps);
  for (int64_t c = threadIdx.x; c < n; c += kLayerNormMomentsThreads)
    out[c] = fp32_layernorm_element<T>(p, S::load(x[c]), stats.mean, rstd, c);
}

template <typename T>
void launch(const Fp32LayerNormParams& p, unsigned rows, cudaStream_t s) {
  if (p.path == LayerNormPath::generic) {
    fp32_layernorm_generic<T><<<rows, kLayerNormMomentsThreads, 0, s>>>(p);
    return;
  }
  const int vec_bytes = 4 * int(sizeof(T));
  const auto vec_row = [](const float* t, int64_t stride) {
    return !t || (stride == 1 && reinterpret_cast<uintptr_t>(t) % 16 == 0);
  };
  const Fp32LayerNormAccess access{rows_aligned(p.x, p.dtype, vec_bytes), rows_aligned(p.out, p.dtype, vec_bytes),
                                   vec_row(p.weight, p.weight_stride) && vec_row(p.bias, p.bias_stride)};
  const WelfordBlockFold fold = welford_block_fold(p.geom.cols);
  with_layer_norm_cached(p.geom.cols, [&]<int Cached>() {
    if (access.x && access.out && access.affine)
      fp32_layernorm_vectorized<T, Cached, true><<<rows, kLayerNormVecThreads, 0, s>>>(p, access, fold);
    else
      fp32_layernorm_vectorized<T, Cached, false><<<rows, kLayerNormVecThreads, 0, s>>>(p, access, fold);
  });
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
