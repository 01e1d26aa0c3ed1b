// The CUDA kernel behind the row-wise elementwise ops (modulate, gated residual, ...).
//
// One warp per row. Each lane handles VEC consecutive elements (16 bytes when every row operand
// is 16-byte aligned and the row length allows, else one element) and keeps kRowwiseUnroll
// vectors of every input in flight before computing. Operands that hold one value per row (col_stride 0) are read once per row and
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

constexpr int kRowwiseWarps = 8;   // rows per 256-thread block
constexpr int kRowwiseUnroll = 2;  // vectors per input and lane in flight
// 62 registers at most in the bf16 instantiation: four blocks (32 warps) per SM. Measured on
// the H200 (docs/BENCHMARKS.md): four vectors in flight at three blocks per SM, and a persistent
// grid over (row, chunk) items, were both slower at the Wan 2.1 shape.
constexpr int kRowwiseMinBlocks = 4;

template <typename T, int VEC, typename Fn>
__global__ void __launch_bounds__(kRowwiseWarps * 32, kRowwiseMinBlocks) rowwise_kernel(RowwiseParams p, Fn fn) {
  const uint32_t row = blockIdx.x * kRowwiseWarps + threadIdx.x / 32;
  if (row >= uint32_t(p.geom.rows())) return;
  const int lane = threadIdx.x % 32;
  uint32_t idx[3];
  p.geom.split(row, idx);

  const T* in[3];
  bool per_row[3];
  T row_value[3];
#pragma unroll
  for (int k = 0; k < 3; ++k) {
    in[k] = static_cast<const T*>(p.in[k].data) + p.in[k].offset(idx);
    per_row[k] = p.in[k].col_stride == 0;
    row_value[k] = per_row[k] ? in[k][0] : T{};
  }
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  const int64_t cols = p.geom.cols;
  constexpr int kStep = 32 * VEC;

  for (int64_t base = int64_t(lane) * VEC; base < cols; base += int64_t(kStep) * kRowwiseUnroll) {
    Pack<T, VEC> v[3][kRowwiseUnroll];
#pragma unroll
    for (int u = 0; u < kRowwiseUnroll; ++u) {
      const int64_t c = base + int64_t(u) * kStep;
      if (c < cols) {
#pragma unroll
        for (int k = 0; k < 3; ++k) {
          if (per_row[k])
            v[k][u].fill(row_value[k]);
          else
            v[k][u].load(in[k] + c);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kRowwiseUnroll; ++u) {
      const int64_t c = base + int64_t(u) * kStep;
      if (c < cols) {
        Pack<T, VEC> r;
#pragma unroll
        for (int e = 0; e < VEC; ++e) r.set(e, fn(v[0][u].get(e), v[1][u].get(e), v[2][u].get(e)));
        r.store(out + c);
      }
    }
  }
}

// Launches rowwise_kernel with 16-byte vectors when the operands allow it.
template <typename T, typename Fn>
void launch_rowwise(const RowwiseParams& p, Fn fn, Stream stream) {
  const int64_t rows = p.geom.rows();
  if (rows == 0 || p.geom.cols == 0) return;
  const dim3 grid(uint32_t((rows + kRowwiseWarps - 1) / kRowwiseWarps));
  const dim3 block(kRowwiseWarps * 32);
  auto s = static_cast<cudaStream_t>(stream.handle);
  constexpr int kVec = 16 / sizeof(T);
  if (rowwise_vectorizable(p, 16))
    rowwise_kernel<T, kVec><<<grid, block, 0, s>>>(p, fn);
  else
    rowwise_kernel<T, 1><<<grid, block, 0, s>>>(p, fn);
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
