// The CUDA kernel behind the row-wise elementwise ops (modulate, gated residual, ...).
//
// Each thread handles VEC consecutive elements of one row (16 bytes when every row operand is
// 16-byte aligned and the row length allows, else one element). Operands that hold one value per row (col_stride 0) are read once per row and
// broadcast. The op is a functor `T fn(T a, T b, T c)` holding the per-element arithmetic that
// the host kernel shares.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "common/rows.h"
#include "cuda/check.h"
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

constexpr int kRowwiseThreads = 128;  // threads per block, all on one row
constexpr int kRowwiseUnroll = 1;     // vectors per input and thread

// Grid: x = row, y = column block of kRowwiseThreads * VEC * kRowwiseUnroll elements. Every
// thread handles kRowwiseUnroll vectors of one row, so blocks are small and many (FLUX.1: 13824)
// and the SMs balance to within one block; no per-element index division is needed.
template <typename T, int VEC, typename Fn>
__global__ void __launch_bounds__(kRowwiseThreads) rowwise_kernel(RowwiseParams p, Fn fn) {
  constexpr int kBlockCols = kRowwiseThreads * VEC * kRowwiseUnroll;
  const uint32_t row = blockIdx.x;
  const int64_t base = int64_t(blockIdx.y) * kBlockCols + int64_t(threadIdx.x) * VEC;
  const int64_t cols = p.geom.cols;
  uint32_t idx[3];
  p.geom.split(row, idx);

  Pack<T, VEC> v[3][kRowwiseUnroll];
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    const T* in = static_cast<const T*>(p.in[k].data) + p.in[k].offset(idx);
    if (p.in[k].col_stride == 0) {
      const T value = in[0];
#pragma unroll
      for (int u = 0; u < kRowwiseUnroll; ++u) v[k][u].fill(value);
    } else {
#pragma unroll
      for (int u = 0; u < kRowwiseUnroll; ++u) {
        const int64_t c = base + int64_t(u) * kRowwiseThreads * VEC;
        if (c < cols) v[k][u].load(in + c);
      }
    }
  }
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
#pragma unroll
  for (int u = 0; u < kRowwiseUnroll; ++u) {
    const int64_t c = base + int64_t(u) * kRowwiseThreads * VEC;
    if (c < cols) {
      Pack<T, VEC> r;
#pragma unroll
      for (int e = 0; e < VEC; ++e) r.set(e, fn(v[0][u].get(e), v[1][u].get(e), v[2][u].get(e)));
      r.store(out + c);
    }
  }
}

template <typename T, int VEC, typename Fn>
void launch_rowwise_vec(const RowwiseParams& p, Fn fn, cudaStream_t stream) {
  constexpr int64_t kBlockCols = kRowwiseThreads * VEC * kRowwiseUnroll;
  const dim3 grid(uint32_t(p.geom.rows()), uint32_t((p.geom.cols + kBlockCols - 1) / kBlockCols));
  rowwise_kernel<T, VEC><<<grid, kRowwiseThreads, 0, stream>>>(p, fn);
  DFUSE_CUDA_CHECK_LAUNCH();
}

// Launches rowwise_kernel with 16-byte vectors when the operands allow it.
template <typename T, typename Fn>
void launch_rowwise(const RowwiseParams& p, Fn fn, Stream stream) {
  if (p.geom.rows() == 0 || p.geom.cols == 0) return;
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (rowwise_vectorizable(p, 16))
    launch_rowwise_vec<T, 16 / sizeof(T)>(p, fn, s);
  else
    launch_rowwise_vec<T, 1>(p, fn, s);
}

}  // namespace dfuse::detail
