// The CUDA kernel behind the row-wise elementwise ops (modulate, gated residual, ...).
//
// One warp per row. Each lane handles VEC consecutive elements (16 bytes when every row
// operand is 16-byte aligned and the row length allows, else one element) and keeps UNROLL
// vectors of every input in flight before computing, so a warp has UNROLL * 3 loads
// outstanding. Operands that hold one value per row (col_stride 0) are read once per row and
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

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

constexpr int kRowwiseWarps = 8;  // rows per 256-thread block
constexpr int kRowwiseUnroll = 4;

template <typename T, int VEC, typename Fn>
__global__ void __launch_bounds__(kRowwiseWarps * 32) rowwise_kernel(RowwiseParams p, Fn fn) {
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
    Vec<T, VEC> v[3][kRowwiseUnroll];
#pragma unroll
    for (int u = 0; u < kRowwiseUnroll; ++u) {
      const int64_t c = base + int64_t(u) * kStep;
      if (c >= cols) break;
#pragma unroll
      for (int k = 0; k < 3; ++k) {
        if (per_row[k]) {
#pragma unroll
          for (int e = 0; e < VEC; ++e) v[k][u].v[e] = row_value[k];
        } else {
          v[k][u] = *reinterpret_cast<const Vec<T, VEC>*>(in[k] + c);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kRowwiseUnroll; ++u) {
      const int64_t c = base + int64_t(u) * kStep;
      if (c >= cols) break;
      Vec<T, VEC> r;
#pragma unroll
      for (int e = 0; e < VEC; ++e) r.v[e] = fn(v[0][u].v[e], v[1][u].v[e], v[2][u].v[e]);
      *reinterpret_cast<Vec<T, VEC>*>(out + c) = r;
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
