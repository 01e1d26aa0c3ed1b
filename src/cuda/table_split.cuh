// The CUDA kernel behind the table-split adaLN value ops (see common/table_split.h).
//
// One pass over a 1-D grid sized to the work: block x * parts + k writes kTableSplitThreads *
// kTableSplitUnroll consecutive VEC-element vectors of the dense output k, thread t the vectors
// x * kTableSplitThreads * kTableSplitUnroll + u * kTableSplitThreads + t (u < kTableSplitUnroll),
// so that every warp access of the values and of out[k] is one contiguous run of one stream, and the
// parts of a run of rows go to consecutive blocks: the values are read nearly in memory order (part
// by part in a 2-D grid, at a stride of parts x cols, was 1% slower: session 20, H100). Each
// thread loads all its vectors (the values and the matching table columns, which stay L1/L2-resident:
// the table is parts x cols) before it stores any. A vector is 16 bytes of the wider of the values
// and the outputs when common/table_split.h's alignment test passes (its table columns one access,
// or two for an fp32 table beside 16-bit values), else one element. Row and column come from the
// output position by multiply-shift division (common/uint_divider.h) in 32 bits:
// check_table_split_outputs bounds each output below 2^31 elements.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/table_split.h"
#include "common/uint_divider.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "dfuse/core/device.h"

namespace dfuse::detail {

constexpr int kTableSplitThreads = 256;
constexpr int kTableSplitUnroll = 2;  // vectors per thread

// The index arithmetic of table_split_kernel, set at launch: vector i of an output is column
// vector i % vectors_per_row of row r = i / vectors_per_row, whose outer indices are
// b = i / vectors_per_outer0 and t = r - b * outer[1].
struct TableSplitGrid {
  UintDivider vectors_per_row, vectors_per_outer0;
};

// VEC consecutive elements from p into a pack: one access up to 16 bytes (p aligned to their
// size), 16-byte accesses above (p 16-byte aligned).
template <typename T, int VEC>
__device__ __forceinline__ void load_table_split_pack(const T* p, Pack<T, VEC>& q) {
  if constexpr (sizeof(T) * VEC > 16) {
#pragma unroll
    for (int h = 0; h < int(sizeof(T) * VEC / 16); ++h) {
      const uint4 x = reinterpret_cast<const uint4*>(p)[h];
      q.w[4 * h] = x.x, q.w[4 * h + 1] = x.y, q.w[4 * h + 2] = x.z, q.w[4 * h + 3] = x.w;
    }
  } else {
    q.load(p);
  }
}

template <typename Tab, typename Val, typename Out, int VEC, typename Fn>
__global__ void __launch_bounds__(kTableSplitThreads)
    table_split_kernel(TableSplitParams p, Fn fn, TableSplitGrid grid, uint32_t vectors) {
  const uint32_t block = blockIdx.x / uint32_t(p.parts);  // the parts of one run of rows in consecutive blocks
  const int k = int(blockIdx.x - block * uint32_t(p.parts));
  const uint32_t first = block * (kTableSplitThreads * kTableSplitUnroll) + threadIdx.x;
  const Val* values = static_cast<const Val*>(p.values) + k * p.values_part_stride;
  const Tab* table = static_cast<const Tab*>(p.table) + k * p.table_part_stride;
  const auto outer1 = uint32_t(p.outer[1]);
  Pack<Val, VEC> v[kTableSplitUnroll];
  Pack<Tab, VEC> w[kTableSplitUnroll];
#pragma unroll
  for (int u = 0; u < kTableSplitUnroll; ++u) {
    const uint32_t i = first + u * kTableSplitThreads;
    if (i >= vectors) break;
    const uint32_t row = grid.vectors_per_row.div(i);
    const uint32_t col = grid.vectors_per_row.mod(i, row) * VEC;
    const uint32_t b = grid.vectors_per_outer0.div(i);
    const uint32_t t = row - b * outer1;
    load_table_split_pack(values + b * p.values_stride[0] + t * p.values_stride[1] + col, v[u]);
    load_table_split_pack(table + col, w[u]);
  }
  Out* out = static_cast<Out*>(p.out[k]);
#pragma unroll
  for (int u = 0; u < kTableSplitUnroll; ++u) {
    const uint32_t i = first + u * kTableSplitThreads;
    if (i >= vectors) break;
    Pack<Out, VEC> result;
#pragma unroll
    for (int e = 0; e < VEC; ++e) result.set(e, fn(w[u].get(e), v[u].get(e)));
    result.store_global(out + int64_t(i) * VEC);
  }
}

template <typename Tab, typename Val, typename Out, int VEC, typename Fn>
void launch_table_split_vec(const TableSplitParams& p, Fn fn, cudaStream_t stream) {
  // VEC divides cols (VEC == 1 or vectorizable); vectors <= rows * cols < 2^31 (check_table_split_outputs), so
  // every divisor and numerator below is under 2^31, and the grid (parts <= kTableSplitMaxParts) under 2^26 blocks.
  const int64_t vectors_per_row = p.cols / VEC;
  const int64_t vectors = p.rows() * vectors_per_row;
  const TableSplitGrid grid{UintDivider(uint32_t(vectors_per_row)),
                            UintDivider(uint32_t(vectors_per_row * p.outer[1]))};
  constexpr int64_t kBlockVectors = int64_t(kTableSplitThreads) * kTableSplitUnroll;
  const auto blocks = uint32_t((vectors + kBlockVectors - 1) / kBlockVectors * p.parts);
  table_split_kernel<Tab, Val, Out, VEC, Fn><<<blocks, kTableSplitThreads, 0, stream>>>(p, fn, grid,
                                                                                        uint32_t(vectors));
  DFUSE_CUDA_CHECK_LAUNCH();
}

// Launches with vectors of 16 bytes of the wider of Val and Out (8 elements for 16-bit values and
// outputs, 4 where either is fp32) when the operands allow it.
template <typename Tab, typename Val, typename Out, typename Fn>
void launch_table_split(const TableSplitParams& p, Fn fn, Stream stream) {
  if (p.rows() == 0 || p.cols == 0 || p.parts == 0) return;
  const DeviceGuard device(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  constexpr int kVec = 16 / int(std::max(sizeof(Val), sizeof(Out)));
  if (table_split_vectorizable(p, kVec, int(sizeof(Out))))
    launch_table_split_vec<Tab, Val, Out, kVec>(p, fn, s);
  else
    launch_table_split_vec<Tab, Val, Out, 1>(p, fn, s);
}

}  // namespace dfuse::detail
