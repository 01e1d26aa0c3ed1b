// The QK-norm + RoPE rows: the CUDA kernel. Arithmetic: ops/rope/qknorm_rope_rows.h.
//
// One warp per head (D = 128 K): lane l holds chunk l + 32k = elements 4(l + 32k) .. 4(l + 32k) + 3, the
// layout of cuda/rms_norm_stats.cuh's warp reductions, which give the head's rstd / inverse RMS in the
// eager chain's order. A chunk is one 8-byte (16-bit T) or 16-byte (fp32) access when every operand's
// rows allow it (`vector_access`), else four element accesses. blockIdx.y picks the part (q, k, ...);
// warps grid-stride over its heads with the next head's x loaded before the current one is computed,
// so two heads per warp are in flight. Interleaved pairs lie inside a chunk; for rotate-half with R = D
// the partner R/2 away is in lane l ^ 16 (D = 128) or in the lane's other chunk (D = 256); for a
// partial rotation (R < D) the normalized head is staged in shared memory (one head per warp).
// Every element of the head is read before any is written, so the destination may be x itself.
// The ops' CUDA entries (one launch each) are registered at the end of this file.
#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rms_norm_stats.cuh"
#include "cuda/rowwise.cuh"
#include "ops/rope/qknorm_rope_rows.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

constexpr int kWarps = kRopeThreads / 32;
constexpr int kChunk = 4;  // elements per lane and access

template <typename E>
using Chunk = Pack<E, kChunk>;

template <typename E>
__device__ __forceinline__ Chunk<E> load_chunk(const E* p, bool vector_access) {
  Chunk<E> c;
  if (vector_access)
    c.load(p);
  else
    c.load_elements(p);
  return c;
}

template <typename E>
__device__ __forceinline__ void store_chunk(const Chunk<E>& c, E* p, bool vector_access) {
  if (vector_access)
    c.store(p);
  else
    c.store_elements(p);
}

template <typename T, int K>
__device__ __forceinline__ void load_head(const QkNormRopeRows& p, uint32_t row, int lane, bool vector_access,
                                          Chunk<T> (&x)[K]) {
  uint32_t idx[3];
  p.norm.rows.geom.split(row, idx);
  const T* src = static_cast<const T*>(p.norm.rows.in[0].data) + p.norm.rows.in[0].offset(idx);
#pragma unroll
  for (int k = 0; k < K; ++k) x[k] = load_chunk(src + kChunk * (lane + 32 * k), vector_access);
}

template <typename T, typename Table, RopeMath M, RopePairing P, int K>
__global__ void __launch_bounds__(kRopeThreads) qknorm_rope_kernel(QkNormRopeLaunch launch, bool vector_access) {
  __shared__ float staged[P == RopePairing::rotate_half ? kWarps : 1][128 * K];
  const QkNormRopeRows& p = launch.part[blockIdx.y];
  const RmsNormRowsParams& n = p.norm;
  const uint32_t rows = uint32_t(n.rows.geom.rows());  // < 2^31 / 128: the guards bound the elements
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const T* weight = static_cast<const T*>(n.weight);
  const int rot = int(p.rot_dim);
  const uint32_t stride = gridDim.x * kWarps;
  Chunk<T> next[K];
  uint32_t row = blockIdx.x * kWarps + warp;
  if (row < rows) load_head<T, K>(p, row, lane, vector_access, next);
  for (; row < rows; row += stride) {
    float v[K][kChunk];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < kChunk; ++i) v[k][i] = Storage<T>::load(next[k].get(i));
    if (row + stride < rows) load_head<T, K>(p, row + stride, lane, vector_access, next);
    uint32_t idx[3];
    n.rows.geom.split(row, idx);
    T* out = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx);
    const float inv = n.chain == RmsNormChain::torch_rms_norm ? warp_torch_rms_norm_rstd<K>(v, n.eps)
                                                              : warp_decomposed_inv_rms<K>(v, n.mean_factor, n.eps);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int first = kChunk * (lane + 32 * k);
      Chunk<T> w;
      if (weight) w = load_chunk(weight + first, vector_access);
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        v[k][i] = qknorm_rope_normalized<T>(p, v[k][i], inv, weight ? Storage<T>::load(w.get(i)) : 1.0f);
    }
    const Table* cos = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx);
    const Table* sin = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx);
    Chunk<T> result[K];
    if constexpr (P == RopePairing::interleaved_pairs) {  // R = D: every element is rotated
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int first = kChunk * (lane + 32 * k);
        const Chunk<Table> c = load_chunk(cos + first, vector_access), s = load_chunk(sin + first, vector_access);
#pragma unroll
        for (int i = 0; i < kChunk; i += 2) {
          const auto pair = rope_interleaved_pair<T>(v[k][i], v[k][i + 1], Storage<Table>::load(c.get(i)),
                                                     Storage<Table>::load(c.get(i + 1)),
                                                     Storage<Table>::load(s.get(i)),
                                                     Storage<Table>::load(s.get(i + 1)));
          result[k].set(i, pair.even);
          result[k].set(i + 1, pair.odd);
        }
      }
    } else if (rot == 128 * K) {  // the partner of element e is e + R/2 (negated) or e - R/2
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int first = kChunk * (lane + 32 * k);
        const Chunk<Table> c = load_chunk(cos + first, vector_access), s = load_chunk(sin + first, vector_access);
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
          float partner;
          if constexpr (K == 1) {
            const float other = __shfl_xor_sync(0xffffffffu, v[0][i], 16);
            partner = lane < 16 ? -other : other;
          } else {
            partner = k == 0 ? -v[1][i] : v[0][i];
          }
          result[k].set(i, rotate_half_element<T, M>(v[k][i], partner, Storage<Table>::load(c.get(i)),
                                                     Storage<Table>::load(s.get(i))));
        }
      }
    } else {  // partial rotation: the normalized head staged so that each lane finds the partner R/2 away
      float* head = staged[warp];
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < kChunk; ++i) head[kChunk * (lane + 32 * k) + i] = v[k][i];
      __syncwarp();
      const auto value = [head](int e) { return head[e]; };
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < kChunk; ++i) {
          const int e = kChunk * (lane + 32 * k) + i;
          result[k].set(i, e >= rot ? Storage<T>::store(v[k][i])  // the normalized tail
                                    : qknorm_rotate_half_output<T, M>(value, e, rot, Storage<Table>::load(cos[e]),
                                                                      Storage<Table>::load(sin[e])));
        }
      __syncwarp();  // the next head reuses the staging row
    }
#pragma unroll
    for (int k = 0; k < K; ++k) store_chunk(result[k], out + kChunk * (lane + 32 * k), vector_access);
    if (p.copies) {
      const T* src = static_cast<const T*>(p.copy_src.data) + p.copy_src.offset(idx);
      T* dst = static_cast<T*>(p.copy_dst.data) + p.copy_dst.offset(idx);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int first = kChunk * (lane + 32 * k);
        store_chunk(load_chunk(src + first, vector_access), dst + first, vector_access);
      }
    }
  }
}

// Whether every operand's rows allow one access per chunk: x, the destination, the copied rows (T),
// the tables (Table) and the weight, each 4-element aligned at every row.
bool chunk_vectorizable(const QkNormRopeLaunch& launch) {
  for (int i = 0; i < launch.parts; ++i) {
    const QkNormRopeRows& p = launch.part[i];
    const DType t = p.norm.rows.dtype;
    const int tbytes = kChunk * int(dtype_size(t));
    const int table_bytes = kChunk * int(dtype_size(p.table_dtype));
    if (!rows_aligned(p.norm.rows.in[0], t, tbytes) || !rows_aligned(p.norm.rows.out, t, tbytes)) return false;
    if (!rows_aligned(p.cos, p.table_dtype, table_bytes) || !rows_aligned(p.sin, p.table_dtype, table_bytes))
      return false;
    if (p.norm.weight && reinterpret_cast<uintptr_t>(p.norm.weight) % tbytes) return false;
    if (p.copies && (!rows_aligned(p.copy_src, t, tbytes) || !rows_aligned(p.copy_dst, t, tbytes))) return false;
  }
  return true;
}

template <typename T, typename Table, RopeMath M, RopePairing P>
void launch_kernel(const QkNormRopeLaunch& launch, cudaStream_t stream) {
  const bool vector_access = chunk_vectorizable(launch);
  int64_t rows = 0;
  for (int i = 0; i < launch.parts; ++i) rows = std::max(rows, launch.part[i].norm.rows.geom.rows());
  if (rows == 0) return;
  const auto kernel = launch.part[0].norm.rows.geom.cols == 128 ? qknorm_rope_kernel<T, Table, M, P, 1>
                                                                 : qknorm_rope_kernel<T, Table, M, P, 2>;
  const dim3 grid(rope_blocks(kernel, launch.part[0].norm.rows.device, rows * 32), unsigned(launch.parts));
  kernel<<<grid, kRopeThreads, 0, stream>>>(launch, vector_access);
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
