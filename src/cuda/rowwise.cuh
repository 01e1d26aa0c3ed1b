// The CUDA kernel behind the row-wise elementwise ops (modulate, gated residual, ...).
//
// Warps take (row, chunk) work items. Each lane handles VEC consecutive elements (16 bytes when
// every row operand is 16-byte aligned and the row length allows, else one element) and keeps
// kRowwiseUnroll vectors of every input in flight before computing. Operands that hold one value
// per row (col_stride 0) are read once per item and broadcast. The op is a functor
// `T fn(T a, ...)` of one to four elements (kRowwiseMaxInputs) holding the per-element arithmetic
// that the host kernel shares.
// Measured variants and their numbers: docs/BENCHMARKS.md.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/dispatch.h"
#include "common/rows.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "dfuse/core/device.h"
#include "dfuse/core/error.h"

namespace dfuse::detail {

// VEC elements of T held as 32-bit words, so that 16-bit elements stay packed two to a register
// (an array of 16-bit structs would take one register per element).
template <typename T, int VEC>
struct Pack {
  static_assert(sizeof(T) * VEC % 4 == 0 || VEC == 1, "a pack is whole 32-bit words or one element");
  static constexpr int kWords = sizeof(T) * VEC >= 4 ? sizeof(T) * VEC / 4 : 1;
  uint32_t w[kWords];

  __device__ __forceinline__ T get(int e) const {
    if constexpr (sizeof(T) == 4) {
      return __uint_as_float(w[e]);
    } else {
      return T{uint16_t(w[e / 2] >> (16 * (e % 2)))};
    }
  }
  __device__ __forceinline__ void set(int e, T v) {
    if constexpr (sizeof(T) == 4) {
      w[e] = __float_as_uint(v);
    } else if constexpr (VEC == 1) {
      w[0] = v.bits;
    } else {
      const int shift = 16 * (e % 2);
      w[e / 2] = (w[e / 2] & ~(0xFFFFu << shift)) | (uint32_t(v.bits) << shift);
    }
  }
  __device__ __forceinline__ void load(const T* p) {
    if constexpr (sizeof(T) * VEC == 16) {
      const uint4 q = *reinterpret_cast<const uint4*>(p);
      w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    } else {
      set(0, *p);
    }
  }
  __device__ __forceinline__ void store(T* p) const {
    if constexpr (sizeof(T) * VEC == 16) {
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      *p = get(0);
    }
  }
  __device__ __forceinline__ void fill(T v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) set(e, v);
  }
};

constexpr int kRowwiseWarps = 8;   // warps per 256-thread block
constexpr int kRowwiseUnroll = 2;  // vectors per input and lane in flight per work item
// 53 registers in the bf16 instantiation (ptxas, nvcc 13.0): four blocks (32 warps) per SM.
constexpr int kRowwiseMinBlocks = 4;

// fn applied to element e of vector u of every input.
template <typename T, int VEC, typename Fn, size_t... K>
__device__ __forceinline__ T apply_rowwise(const Fn& fn,
                                           const Pack<T, VEC> (&v)[sizeof...(K)][kRowwiseUnroll], int u, int e,
                                           std::index_sequence<K...>) {
  return fn(v[K][u].get(e)...);
}

// Work items are (row, chunk) pairs: a chunk is the 32 * VEC * kRowwiseUnroll columns one warp
// covers at once. A persistent grid of warps strides over the items, so that shapes with few
// rows (FLUX.1: 4608) still balance across the SMs to within one small item. The functor's
// arity says how many of p.in it reads.
template <typename T, int VEC, typename Fn>
__global__ void __launch_bounds__(kRowwiseWarps * 32, kRowwiseMinBlocks)
    rowwise_kernel(RowwiseParams p, Fn fn, uint32_t chunks_per_row, uint32_t items) {
  constexpr int kInputs = rowwise_arity<T, Fn>();
  constexpr int kStep = 32 * VEC;
  constexpr int kChunk = kStep * kRowwiseUnroll;
  const int lane = threadIdx.x % 32;
  const uint32_t warps = gridDim.x * kRowwiseWarps;
  const int64_t cols = p.geom.cols;

  for (uint32_t item = blockIdx.x * kRowwiseWarps + threadIdx.x / 32; item < items; item += warps) {
    const uint32_t row = item / chunks_per_row;
    const int64_t base = int64_t(item - row * chunks_per_row) * kChunk + int64_t(lane) * VEC;
    uint32_t idx[3];
    p.geom.split(row, idx);

    Pack<T, VEC> v[kInputs][kRowwiseUnroll];
#pragma unroll
    for (int k = 0; k < kInputs; ++k) {
      const T* in = static_cast<const T*>(p.in[k].data) + p.in[k].offset(idx);
      if (p.in[k].col_stride == 0) {
        const T value = in[0];
#pragma unroll
        for (int u = 0; u < kRowwiseUnroll; ++u) v[k][u].fill(value);
      } else {
#pragma unroll
        for (int u = 0; u < kRowwiseUnroll; ++u)
          if (base + u * kStep < cols) v[k][u].load(in + base + u * kStep);
      }
    }
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
#pragma unroll
    for (int u = 0; u < kRowwiseUnroll; ++u) {
      if (base + u * kStep < cols) {
        Pack<T, VEC> r;
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          r.set(e, apply_rowwise(fn, v, u, e, std::make_index_sequence<kInputs>{}));
        r.store(out + base + u * kStep);
      }
    }
  }
}

// Resident blocks of one kernel on `device`: blocks per SM (the same for every device of the
// one GPU model the backend is built for, so computed once per kernel) times the SM count.
template <typename Kernel>
uint32_t resident_blocks(Kernel kernel, int device) {
  static const int per_sm = [&] {
    int blocks = 0;
    DFUSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kRowwiseWarps * 32, 0));
    return blocks > 0 ? blocks : 1;
  }();
  return uint32_t(multiprocessor_count(device)) * uint32_t(per_sm);
}

template <typename T, int VEC, typename Fn>
void launch_rowwise_vec(const RowwiseParams& p, Fn fn, cudaStream_t stream) {
  constexpr int64_t kChunk = 32 * VEC * kRowwiseUnroll;
  const int64_t chunks_per_row = (p.geom.cols + kChunk - 1) / kChunk;
  const int64_t items = p.geom.rows() * chunks_per_row;  // < 2^31: the rowwise guards bound it
  auto kernel = rowwise_kernel<T, VEC, Fn>;
  const int64_t wanted = (items + kRowwiseWarps - 1) / kRowwiseWarps;
  const uint32_t grid = uint32_t(std::min<int64_t>(wanted, resident_blocks(kernel, p.device)));
  kernel<<<grid, kRowwiseWarps * 32, 0, stream>>>(p, fn, uint32_t(chunks_per_row), uint32_t(items));
  DFUSE_CUDA_CHECK_LAUNCH();
}

// Launches rowwise_kernel with 16-byte vectors when the operands allow it.
template <typename T, typename Fn>
void launch_rowwise(const RowwiseParams& p, Fn fn, Stream stream) {
  if (p.geom.rows() == 0 || p.geom.cols == 0) return;
  const DeviceGuard device(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (rowwise_vectorizable(p, 16))
    launch_rowwise_vec<T, 16 / sizeof(T)>(p, fn, s);
  else
    launch_rowwise_vec<T, 1>(p, fn, s);
}

// The CUDA entry of a row-wise op whose element functor is Op<T>: dtype dispatch, then launch.
template <template <typename> class Op>
void rowwise_cuda_entry(const RowwiseParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.dtype, "row-wise kernel", [&](auto tag) {
    using T = decltype(tag);
    launch_rowwise<T>(p, Op<T>{}, stream);
  });
}

}  // namespace dfuse::detail
