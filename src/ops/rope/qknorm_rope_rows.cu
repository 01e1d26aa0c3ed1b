// The QK-norm + RoPE rows: the CUDA kernel. Arithmetic: ops/rope/qknorm_rope_rows.h.
//
// One warp per head (D = 128 K): lane l holds elements 4(l + 32k) .. 4(l + 32k) + 3, the layout of
// cuda/rms_norm_stats.cuh's warp reductions, which give the head's rstd / inverse RMS in the eager
// chain's order. blockIdx.y picks the part (q, k, ...); blocks grid-stride over its heads.
// Interleaved pairs lie inside a lane's four elements. For rotate-half the normalized head is staged
// in shared memory (one head per warp) so that each lane finds the partner R/2 away, whatever R.
// Every element of the head is read before any is written, so the destination may be x itself.
// The ops' CUDA entries (one launch each) are registered at the end of this file.
#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rms_norm_stats.cuh"
#include "ops/rope/qknorm_rope_rows.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

constexpr int kWarps = kRopeThreads / 32;

template <typename T, typename Table, RopeMath M, RopePairing P, int K>
__global__ void __launch_bounds__(kRopeThreads) qknorm_rope_kernel(QkNormRopeLaunch launch) {
  __shared__ float staged[P == RopePairing::rotate_half ? kWarps : 1][128 * K];
  const QkNormRopeRows& p = launch.part[blockIdx.y];
  const RmsNormRowsParams& n = p.norm;
  const uint32_t rows = uint32_t(n.rows.geom.rows());  // < 2^31 / 128: the guards bound the elements
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const T* weight = static_cast<const T*>(n.weight);
  const int rot = int(p.rot_dim);
  for (uint32_t row = blockIdx.x * kWarps + warp; row < rows; row += gridDim.x * kWarps) {
    uint32_t idx[3];
    n.rows.geom.split(row, idx);
    const T* x = static_cast<const T*>(n.rows.in[0].data) + n.rows.in[0].offset(idx);
    T* out = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx);
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
        v[k][i] = qknorm_rope_normalized<T>(p, v[k][i], inv, weight ? Storage<T>::load(weight[e]) : 1.0f);
      }
    const Table* cos = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx);
    const Table* sin = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx);
    if constexpr (P == RopePairing::interleaved_pairs) {  // R = D: every element is rotated
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; i += 2) {
          const int e = 4 * (lane + 32 * k) + i;
          const auto pair = rope_interleaved_pair<T>(v[k][i], v[k][i + 1], Storage<Table>::load(cos[e]),
                                                     Storage<Table>::load(cos[e + 1]), Storage<Table>::load(sin[e]),
                                                     Storage<Table>::load(sin[e + 1]));
          out[e] = pair.even;
          out[e + 1] = pair.odd;
        }
    } else {
      float* head = staged[warp];
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; ++i) head[4 * (lane + 32 * k) + i] = v[k][i];
      __syncwarp();
      const auto value = [head](int e) { return head[e]; };
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int e = 4 * (lane + 32 * k) + i;
          out[e] = e >= rot ? Storage<T>::store(v[k][i])  // the normalized tail
                            : qknorm_rotate_half_output<T, M>(value, e, rot, Storage<Table>::load(cos[e]),
                                                              Storage<Table>::load(sin[e]));
        }
      __syncwarp();  // the next head reuses the staging row
    }
    if (p.copies) {
      const T* src = static_cast<const T*>(p.copy_src.data) + p.copy_src.offset(idx);
      T* dst = static_cast<T*>(p.copy_dst.data) + p.copy_dst.offset(idx);
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; ++i) dst[4 * (lane + 32 * k) + i] = src[4 * (lane + 32 * k) + i];
    }
  }
}

template <typename T, typename Table, RopeMath M, RopePairing P>
void launch_kernel(const QkNormRopeLaunch& launch, cudaStream_t stream) {
  int64_t rows = 0;
  for (int i = 0; i < launch.parts; ++i) rows = std::max(rows, launch.part[i].norm.rows.geom.rows());
  if (rows == 0) return;
  const auto kernel = launch.part[0].norm.rows.geom.cols == 128 ? qknorm_rope_kernel<T, Table, M, P, 1>
                                                                 : qknorm_rope_kernel<T, Table, M, P, 2>;
  const dim3 grid(rope_blocks(kernel, launch.part[0].norm.rows.device, rows * 32), unsigned(launch.parts));
  kernel<<<grid, kRopeThreads, 0, stream>>>(launch);
  DFUSE_CUDA_CHECK_LAUNCH();
}

template <typename T, typename Table, RopeMath M>
void launch_pairing(const QkNormRopeLaunch& launch, cudaStream_t stream) {
  if constexpr (M == RopeMath::fp32_opmath) {
    if (launch.part[0].pairing == RopePairing::interleaved_pairs)
      return launch_kernel<T, Table, M, RopePairing::interleaved_pairs>(launch, stream);
  }
  launch_kernel<T, Table, M, RopePairing::rotate_half>(launch, stream);
}

}  // namespace

// Every part of a launch shares the dtype, table dtype, math, pairing and head dim (the ops' guards);
// the other fields are per part.
void qknorm_rope_cuda(const QkNormRopeLaunch& launch, Stream stream) {
  const QkNormRopeRows& first = launch.part[0];
  const DeviceGuard guard(first.norm.rows.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(first.norm.rows.dtype, "QK-norm + RoPE CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 4) {  // fp32: both maths are the same roundings
      launch_pairing<T, float, RopeMath::fp32_opmath>(launch, s);
    } else {
      if (first.math == RopeMath::storage_dtype)
        launch_pairing<T, T, RopeMath::storage_dtype>(launch, s);
      else if (first.table_dtype == DType::f32)
        launch_pairing<T, float, RopeMath::fp32_opmath>(launch, s);
      else
        launch_pairing<T, T, RopeMath::fp32_opmath>(launch, s);
    }
  });
}

// The CUDA entries of the ops built on these rows (their guards and host entries: the ops' .cpp files).
namespace {
void cuda_entry(const QkNormRopeLaunch& launch, Stream stream) { qknorm_rope_cuda(launch, stream); }
}  // namespace
DFUSE_REGISTER_ENTRY(cuda, "fused_inplace_qknorm_rope", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "fused_inplace_qknorm_rope_one_rounding", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "fused_qknorm_rope", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "fused_qknorm_rope_pack_kv", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "flux2_strided_qknorm_rope", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "flux2_qkv_epilogue", &cuda_entry);

}  // namespace dfuse::detail
