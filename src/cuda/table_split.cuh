// The CUDA kernel behind the table-split adaLN value ops (see common/table_split.h).
//
// One thread per (row, VEC columns): it loads VEC columns of every part of its row (16-byte
// vectors when common/table_split.h's alignment test passes, else one element), the matching
// table columns (L2-resident: the table is parts x cols), applies the element functor, and
// only then stores the parts, so that up to kTableSplitMaxParts loads per thread are in flight
// before the first store. Every output row is written densely.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/table_split.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "dfuse/core/device.h"

namespace dfuse::detail {

constexpr int kTableSplitThreads = 256;

template <typename Tab, typename Val, typename Out, int VEC, typename Fn>
__global__ void __launch_bounds__(kTableSplitThreads)
    table_split_kernel(TableSplitParams p, Fn fn, int64_t vecs_per_row, int64_t items) {
  const int64_t threads = int64_t(gridDim.x) * kTableSplitThreads;
  for (int64_t item = int64_t(blockIdx.x) * kTableSplitThreads + threadIdx.x; item < items; item += threads) {
    const int64_t row = item / vecs_per_row;
    const int64_t col = (item - row * vecs_per_row) * VEC;
    const int64_t b = row / p.outer[1], t = row - b * p.outer[1];
    const Val* values = static_cast<const Val*>(p.values) + b * p.values_stride[0] + t * p.values_stride[1] + col;
    const Tab* table = static_cast<const Tab*>(p.table) + col;

    Out result[kTableSplitMaxParts][VEC];
#pragma unroll
    for (int k = 0; k < kTableSplitMaxParts; ++k) {
      if (k < p.parts) {
        Val v[VEC];
        Tab w[VEC];
        load_elems<Val, VEC>(values + k * p.values_part_stride, v);
        load_elems<Tab, VEC>(table + k * p.table_part_stride, w);
#pragma unroll
        for (int e = 0; e < VEC; ++e) result[k][e] = fn(w[e], v[e]);
      }
    }
#pragma unroll
    for (int k = 0; k < kTableSplitMaxParts; ++k)
      if (k < p.parts) store_elems<Out, VEC>(static_cast<Out*>(p.out[k]) + row * p.cols + col, result[k]);
  }
}

template <typename Tab, typename Val, typename Out, int VEC, typename Fn>
void launch_table_split_vec(const TableSplitParams& p, Fn fn, cudaStream_t stream) {
  const int64_t vecs_per_row = p.cols / VEC;  // VEC divides cols (VEC == 1 or vectorizable)
  const int64_t items = p.rows() * vecs_per_row;
  auto kernel = table_split_kernel<Tab, Val, Out, VEC, Fn>;
  static const int per_sm = [&] {
    int blocks = 0;
    DFUSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kTableSplitThreads, 0));
    return blocks > 0 ? blocks : 1;
  }();
  const int64_t resident = int64_t(multiprocessor_count(p.device)) * per_sm;
  const int64_t wanted = (items + kTableSplitThreads - 1) / kTableSplitThreads;
  const auto grid = uint32_t(std::min(wanted, resident));
  kernel<<<grid, kTableSplitThreads, 0, stream>>>(p, fn, vecs_per_row, items);
  DFUSE_CUDA_CHECK_LAUNCH();
}

// Launches with 8-element vectors (16 bytes of the narrowest 16-bit operand) when the operands
// allow it.
template <typename Tab, typename Val, typename Out, typename Fn>
void launch_table_split(const TableSplitParams& p, Fn fn, Stream stream) {
  if (p.rows() == 0 || p.cols == 0 || p.parts == 0) return;
  const DeviceGuard device(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (table_split_vectorizable(p, 8, int(sizeof(Out))))
    launch_table_split_vec<Tab, Val, Out, 8>(p, fn, s);
  else
    launch_table_split_vec<Tab, Val, Out, 1>(p, fn, s);
}

}  // namespace dfuse::detail
