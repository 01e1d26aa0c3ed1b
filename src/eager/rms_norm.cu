// Eager RMSNorm replicas on CUDA, in aten's own launch geometry: the vectorized F.rms_norm kernel
// (block (32, 4) per row), the generic path (RowwiseMoments with 512 threads, then the forward
// kernel), Reduce.cuh's mean (block (bw, bh)), and the elementwise to/rsqrt/tanh ops.
#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "eager/rms_norm_params.h"

namespace dfuse::eager::detail {
namespace {

using dfuse::detail::add_rn;
using dfuse::detail::Storage;

template <typename T>
__global__ void rms_norm_vectorized_kernel(RmsNormParams p) {
  using S = Storage<T>;
  __shared__ float warp_sums[4];
  __shared__ float rstd_shared;
  uint32_t idx[3];
  p.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  const auto* weight = static_cast<const T*>(p.weight);
  const int64_t n = p.geom.cols;
  const int thrx = threadIdx.x + 32 * threadIdx.y;
  float acc = 0.0f;
  for (int64_t i = thrx; i < n / 4; i += 128)
    for (int k = 0; k < 4; ++k) {
      const float v = S::load(x[4 * i + k]);
      acc = dfuse::detail::fma_rn(v, v, acc);
    }
  for (int off = 16; off > 0; off /= 2) acc = add_rn(acc, __shfl_down_sync(0xffffffffu, acc, off));
  // pairwise tree over the 4 warps through shared memory: offset 2, then offset 1
  for (int off = 2; off > 0; off /= 2) {
    if (threadIdx.x == 0 && threadIdx.y >= off && threadIdx.y < 2 * off) warp_sums[threadIdx.y - off] = acc;
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y < off) acc = add_rn(acc, warp_sums[threadIdx.y]);
    __syncthreads();
  }
  if (thrx == 0) rstd_shared = rsqrtf(add_rn(__fdiv_rn(acc, float(n)), p.eps));
  __syncthreads();
  const float rstd = rstd_shared;
  for (int64_t i = thrx; i < n / 4; i += 128)
    for (int k = 0; k < 4; ++k) {
      const int64_t j = 4 * i + k;
      float y = __fmul_rn(rstd, S::load(x[j]));
      if (weight) y = __fmul_rn(S::load(weight[j]), y);
      out[j] = S::store(y);
    }
}

template <typename T>
__global__ void rms_norm_moments_kernel(RmsNormParams p, float* rstd) {
  using S = Storage<T>;
  uint32_t idx[3];
  p.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
  const auto m = dfuse::detail::block_layer_norm_stats_generic([x](int64_t k) { return S::load(x[k]); }, p.geom.cols);
  if (threadIdx.x == 0) rstd[blockIdx.x] = rsqrtf(add_rn(__fmaf_rn(m.mean, m.mean, m.var), p.eps));
}

template <typename T>
__global__ void rms_norm_forward_kernel(RmsNormParams p, const float* rstd) {
  using S = Storage<T>;
  uint32_t idx[3];
  p.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  const auto* weight = static_cast<const T*>(p.weight);
  const float r = rstd[blockIdx.x];
  for (int64_t j = threadIdx.x; j < p.geom.cols; j += blockDim.x) {
    float y = __fmul_rn(S::load(x[j]), r);
    if (weight) y = __fmul_rn(y, S::load(weight[j]));
    out[j] = S::store(y);
  }
}

void cuda_rms_norm(const RmsNormParams& p, Stream stream) {
  const dfuse::detail::DeviceGuard device(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  const auto rows = unsigned(p.geom.rows());
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.rms_norm", [&](auto tag) {
    using T = decltype(tag);
    if (p.path == dfuse::detail::LayerNormPath::vectorized) {
      rms_norm_vectorized_kernel<T><<<rows, dim3(32, 4), 0, s>>>(p);
      DFUSE_CUDA_CHECK_LAUNCH();
      return;
    }
    float* rstd = nullptr;
    DFUSE_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&rstd), rows * sizeof(float), s));
    rms_norm_moments_kernel<T><<<rows, dfuse::detail::kLayerNormMomentsThreads, 0, s>>>(p, rstd);
    DFUSE_CUDA_CHECK_LAUNCH();
    rms_norm_forward_kernel<T><<<rows, 256, 0, s>>>(p, rstd);
    DFUSE_CUDA_CHECK_LAUNCH();
    DFUSE_CUDA_CHECK(cudaFreeAsync(rstd, s));
  });
}
DFUSE_REGISTER_ENTRY(cuda, "eager.rms_norm", &cuda_rms_norm);

// Reduce.cuh's reduce_kernel for MeanOps<T, float> over the contiguous last dim, non-split configs:
// 16-byte vectors of VEC elements (4 floats, 8 bf16/f16), one float accumulator per vector element.
template <typename T, int VEC>
__global__ void mean_kernel(MeanParams p) {
  using S = Storage<T>;
  extern __shared__ float shared[];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = int64_t(blockIdx.x) * p.bh + ty;
  float v = 0.0f;
  if (row < p.rows) {
    const T* data = static_cast<const T*>(p.x) + row * p.n;
    float acc[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] = 0.0f;
    int width = 4;
    if (p.vectorized) {
      width = VEC;
      int64_t end = p.n;
      const int shift = int(reinterpret_cast<uintptr_t>(data) % 16 / sizeof(T));
      if (shift > 0) {
        data -= shift;
        end += shift;
        if (tx >= shift && tx < VEC) acc[0] = add_rn(acc[0], S::load(data[tx]));
        end -= VEC;
        data += VEC;
      }
      for (int64_t i = tx; i * VEC + VEC - 1 < end; i += p.bw) {
        const uint4 q = *reinterpret_cast<const uint4*>(data + i * VEC);
        const T* e = reinterpret_cast<const T*>(&q);
#pragma unroll
        for (int k = 0; k < VEC; ++k) acc[k] = add_rn(acc[k], S::load(e[k]));
      }
      const int64_t t = end - end % VEC + tx;
      if (t < end) acc[0] = add_rn(acc[0], S::load(data[t]));
    } else {
      int64_t i = tx;
      for (; i + 3 * p.bw < p.n; i += 4 * p.bw)
        for (int k = 0; k < 4; ++k) acc[k] = add_rn(acc[k], S::load(data[i + k * p.bw]));
      for (int k = 0; k < 4 && i < p.n; ++k, i += p.bw) acc[k] = add_rn(acc[k], S::load(data[i]));
    }
    v = acc[0];
    for (int k = 1; k < width; ++k) v = add_rn(v, acc[k]);
  }
  int width = p.bw;
  if (width > 32) {
    float* sh = shared + ty * p.bw;
    sh[tx] = v;
    for (int off = width / 2; off >= 32; off /= 2) {
      __syncthreads();
      if (tx < off) {
        v = add_rn(v, sh[tx + off]);
        sh[tx] = v;
      }
    }
    width = 32;
  }
  __syncthreads();
  for (int off = width / 2; off > 0; off /= 2) v = add_rn(v, __shfl_down_sync(0xffffffffu, v, off));
  if (tx == 0 && row < p.rows) static_cast<T*>(p.out)[row] = S::store(__fmul_rn(v, p.factor));
}

void cuda_mean(const MeanParams& p, Stream stream) {
  const dfuse::detail::DeviceGuard device(p.device);
  const auto grid = unsigned((p.rows + p.bh - 1) / p.bh);
  const size_t smem = size_t(p.bw) * p.bh * sizeof(float);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.mean_last_dim", [&](auto tag) {
    using T = decltype(tag);
    mean_kernel<T, 16 / sizeof(T)><<<grid, dim3(p.bw, p.bh), smem, s>>>(p);
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "eager.mean_last_dim", &cuda_mean);

template <typename In, typename Out>
__global__ void unary_kernel(UnaryParams p) {
  const int64_t n = p.layout.numel();
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    p.layout.offsets(i, off);
    const float v = Storage<In>::load(static_cast<const In*>(p.x)[off[1]]);
    const float r = p.op == UnaryOp::rsqrt ? rsqrtf(v) : p.op == UnaryOp::tanh ? tanhf(v) : v;
    static_cast<Out*>(p.out)[off[0]] = Storage<Out>::store(r);
  }
}

void cuda_unary(const UnaryParams& p, Stream stream) {
  const int64_t n = p.layout.numel();
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535 * 8);
  dfuse::detail::dispatch_bf16_f16_f32(p.in_dtype, "eager.unary", [&](auto in) {
    dfuse::detail::dispatch_bf16_f16_f32(p.out_dtype, "eager.unary", [&](auto out) {
      unary_kernel<decltype(in), decltype(out)>
          <<<unsigned(blocks), threads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
    });
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "eager.unary", &cuda_unary);

}  // namespace
}  // namespace dfuse::eager::detail
