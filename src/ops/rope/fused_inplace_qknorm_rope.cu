// diffusion.fused_inplace_qknorm_rope: the CUDA kernel. Contract and arithmetic:
// ops/rope/fused_inplace_qknorm_rope.h.
//
// One warp per head (D = 128 K): lane l holds elements 4(l + 32k) .. 4(l + 32k) + 3, the layout of
// cuda/rms_norm_stats.cuh's warp reductions, which give the row's rstd / inverse RMS in the eager
// chain's order. The normalized, rounded row is staged in shared memory (one row per warp) so that
// each lane finds the rotate-half partner of its elements, R/2 away, whatever R; then the lane
// writes its elements back in place.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rms_norm_stats.cuh"
#include "ops/rope/fused_inplace_qknorm_rope.h"
#include "ops/rope/rope_launch.cuh"
#include "ops/rope/rope_rotate_half.h"

namespace dfuse::detail {
namespace {

constexpr int kWarps = kRopeThreads / 32;

template <typename T, typename Table, RopeMath M, int K>
__global__ void __launch_bounds__(kRopeThreads) qknorm_rope_kernel(QkNormRopeParams p, uint32_t rows) {
  __shared__ float staged[kWarps][128 * K];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const RmsNormRowsParams& n = p.norm;
  const T* weight = static_cast<const T*>(n.weight);
  const int half = int(p.rot_dim / 2), rot = int(p.rot_dim);
  float* row_values = staged[warp];
  for (uint32_t row = blockIdx.x * kWarps + warp; row < rows; row += gridDim.x * kWarps) {
    uint32_t idx[3];
    n.rows.geom.split(row, idx);
    T* x = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx);
    float v[K][4];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) v[k][i] = Storage<T>::load(x[4 * (lane + 32 * k) + i]);
    const float inv = n.chain == RmsNormChain::torch_rms_norm ? warp_torch_rms_norm_rstd<K>(v, n.eps)
                                                              : warp_decomposed_inv_rms<K>(v, n.mean_factor, n.eps);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = 4 * (lane + 32 * k) + i;
        const float w = weight ? Storage<T>::load(weight[e]) : 1.0f;
        row_values[e] = Storage<T>::load(rms_norm_normalized<T>(n, v[k][i], inv, w));
      }
    __syncwarp();
    const Table* cos = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx);
    const Table* sin = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = 4 * (lane + 32 * k) + i;
        const float own = row_values[e];
        if (e >= rot) {
          x[e] = Storage<T>::store(own);  // the normalized tail, already a T value
        } else {
          const float partner = e < half ? -row_values[e + half] : row_values[e - half];
          x[e] = rotate_half_element<T, M>(own, partner, Storage<Table>::load(cos[e]), Storage<Table>::load(sin[e]));
        }
      }
    __syncwarp();  // the next row reuses row_values
  }
}

template <typename T, typename Table, RopeMath M>
void launch(const QkNormRopeParams& p, cudaStream_t stream) {
  const int64_t rows = p.norm.rows.geom.rows();  // < 2^31 / 128: the guards bound the elements
  if (rows == 0) return;
  const unsigned blocks = rope_blocks(p.norm.rows.device, rows * 32);
  if (p.norm.rows.geom.cols == 128)
    qknorm_rope_kernel<T, Table, M, 1><<<blocks, kRopeThreads, 0, stream>>>(p, uint32_t(rows));
  else
    qknorm_rope_kernel<T, Table, M, 2><<<blocks, kRopeThreads, 0, stream>>>(p, uint32_t(rows));
  DFUSE_CUDA_CHECK_LAUNCH();
}

void cuda_one(const QkNormRopeParams& p, cudaStream_t stream) {
  dispatch_bf16_f16_f32(p.norm.rows.dtype, "fused_inplace_qknorm_rope CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 4) {  // fp32: both maths are the same roundings
      launch<T, float, RopeMath::fp32_opmath>(p, stream);
    } else {
      if (p.math == RopeMath::storage_dtype)
        launch<T, T, RopeMath::storage_dtype>(p, stream);
      else if (p.table_dtype == DType::f32)
        launch<T, float, RopeMath::fp32_opmath>(p, stream);
      else
        launch<T, T, RopeMath::fp32_opmath>(p, stream);
    }
  });
}

void cuda_entry(const QkNormRopeParams& q, const QkNormRopeParams& k, Stream stream) {
  const DeviceGuard guard(q.norm.rows.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  cuda_one(q, s);
  cuda_one(k, s);
}

DFUSE_REGISTER_ENTRY(cuda, "fused_inplace_qknorm_rope", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
