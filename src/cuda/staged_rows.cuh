// Rows staged in shared memory for the persistent norm kernels (rms_norm_rows, norm_fp32_rows): each block
// loops over rows blockIdx.x, blockIdx.x + gridDim.x, ...; a row of x is copied bit for bit into shared
// memory, the statistics are folded from there in the eager chain's order, then the epilogue reads it again.
//
// Two ways to stage (for_each_staged_row):
//  - bulk: the Hopper bulk-copy engine (cp.async.bulk, completion counted on an mbarrier), two rows deep: while
//    the block works on one row, the next row it will work on is already in flight, and no thread spends
//    registers or instructions on the copy. Needs x's rows contiguous, 16-byte aligned and a multiple of 16
//    bytes long, and two rows in the shared memory a block may use without opting in (48 KB).
//  - by the threads (stage_row): VEC-element vector loads, kStageBatch of them in flight per thread, then
//    stores to shared memory; one row at a time.
// Dynamic shared memory: kStagedRowsHeader bytes (the two mbarriers), then one or two row slots of
// staged_row_slot_bytes each. In place (out == x) is safe: a block prefetches only rows it alone writes, and
// each row is fully staged before any of it is written.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/arith.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rowwise.cuh"
#include "dfuse/core/device.h"

namespace dfuse::detail {

constexpr size_t kStagedRowsHeader = 16;              // two 8-byte mbarriers
constexpr size_t kStagedRowsSharedLimit = 48 * 1024;  // dynamic shared memory without cudaFuncSetAttribute

constexpr size_t staged_row_slot_bytes(int64_t cols, size_t element_bytes) {
  return (size_t(cols) * element_bytes + 15) / 16 * 16;
}

// ---- the bulk-copy engine (sm_90) ----------------------------------------------------------------------------

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void init_stage_barriers(uint64_t* bars) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&bars[0])) : "memory");
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(&bars[1])) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One thread: `bytes` (a multiple of 16) from global src to shared dst (both 16-byte aligned); bar's current
// phase completes when they have arrived.
__device__ __forceinline__ void bulk_copy_row(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}

// Every thread: until bar's phase with the given parity has completed.
__device__ __forceinline__ void wait_stage_barrier(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT;\n"
      "}\n" ::"r"(shared_address(bar)),
      "r"(parity)
      : "memory");
}

// ---- staging by the threads ------------------------------------------------------------------------------------

// A block of kThreads threads copies the n elements of x to `row` bit for bit, VEC at a time, in whole-vector
// accesses (staging as float left the rows bound by the L1/shared pipe). Each thread loads kStageBatch vectors
// before it stores any, so that a block has up to kThreads * kStageBatch vector loads in flight (one at a time
// left a row's HBM latency exposed once per vector; measured in docs/BENCHMARKS.md). The caller synchronizes
// before reading `row`.
template <typename T, int kThreads, int VEC, int kStageBatch>
__device__ __forceinline__ void stage_row(const T* x, T* row, int64_t n) {
  constexpr int64_t kStride = int64_t(kThreads) * VEC;
  for (int64_t j0 = int64_t(threadIdx.x) * VEC; j0 < n; j0 += kStride * kStageBatch) {
    Pack<T, VEC> v[kStageBatch];
#pragma unroll
    for (int b = 0; b < kStageBatch; ++b)
      if (j0 + b * kStride < n) v[b].load(x + j0 + b * kStride);
#pragma unroll
    for (int b = 0; b < kStageBatch; ++b)
      if (j0 + b * kStride < n) v[b].store(row + j0 + b * kStride);
  }
}

// ---- the row loop ------------------------------------------------------------------------------------------------

// For each of the block's rows r: stages row_of(r) (n elements of T), then calls body(r, staged row), then
// synchronizes the block. `bulk` (block-uniform) picks the bulk-copy engine, else stage_row.
template <typename T, int kThreads, int VEC, int kStageBatch, typename RowOf, typename Body>
__device__ __forceinline__ void for_each_staged_row(uint32_t rows, int64_t n, bool bulk, RowOf row_of, Body body) {
  extern __shared__ __align__(16) unsigned char staged[];
  uint64_t* const bars = reinterpret_cast<uint64_t*>(staged);
  const size_t slot_bytes = staged_row_slot_bytes(n, sizeof(T));
  const auto slot = [&](uint32_t k) { return reinterpret_cast<T*>(staged + kStagedRowsHeader + k * slot_bytes); };
  const uint32_t row_bytes = uint32_t(n * int64_t(sizeof(T)));
  if (bulk) {
    if (threadIdx.x == 0) {
      init_stage_barriers(bars);
      if (blockIdx.x < rows) bulk_copy_row(slot(0), row_of(blockIdx.x), row_bytes, &bars[0]);
    }
    __syncthreads();
  }
  uint32_t k = 0;  // the block's row count so far: slot k % 2, its barrier's phase k / 2
  for (uint32_t r = blockIdx.x; r < rows; r += gridDim.x, ++k) {
    T* row;
    if (bulk) {
      // The other slot was last read for row k - 1, before the synchronization that ended it.
      const uint32_t next = r + gridDim.x;
      if (threadIdx.x == 0 && next < rows)
        bulk_copy_row(slot((k + 1) % 2), row_of(next), row_bytes, &bars[(k + 1) % 2]);
      row = slot(k % 2);
      wait_stage_barrier(&bars[k % 2], (k / 2) % 2);
    } else {
      row = slot(0);
      stage_row<T, kThreads, VEC, kStageBatch>(row_of(r), row, n);
      __syncthreads();
    }
    body(r, static_cast<const T*>(row));
    __syncthreads();  // the slot is refilled after this
  }
}

// Readers of a staged row (as float or in T) for the statistics of cuda/layer_norm_stats.cuh and
// cuda/rms_norm_stats.cuh: staged_element(row)(k) is element k as float; staged_chunks4(row)(i, v) puts
// elements 4i..4i+3 in v as floats, read in one 8-byte (16-bit T) or 16-byte (float) shared access.
template <typename Staged>
__device__ __forceinline__ auto staged_element(const Staged* row) {
  return [row](int64_t k) { return Storage<Staged>::load(row[k]); };
}

template <typename Staged>
__device__ __forceinline__ auto staged_chunks4(const Staged* row) {
  return [row](int64_t i, float v[4]) {
    Pack<Staged, 4> c;
    c.load(row + 4 * i);
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = Storage<Staged>::load(c.get(k));
  };
}

// Whether for_each_staged_row may use the bulk-copy engine for rows of x (`x` the operand, `cols` elements of
// `element_bytes`): contiguous, 16-byte aligned rows of whole 16-byte words, two slots within the limit.
inline bool staged_rows_bulk(const RowOperand& x, DType dtype, int64_t cols) {
  const size_t bytes = size_t(cols) * dtype_size(dtype);
  return x.col_stride == 1 && bytes % 16 == 0 && rows_aligned(x, dtype, 16) &&
         kStagedRowsHeader + 2 * staged_row_slot_bytes(cols, dtype_size(dtype)) <= kStagedRowsSharedLimit;
}

// Launches a kernel built on for_each_staged_row, Kernel(args..., bulk), as many blocks as `device` keeps
// resident (at most one per row) with the shared memory the staging needs.
template <auto Kernel, typename... Args>
void launch_staged_rows(int threads, int64_t rows, int64_t cols, size_t element_bytes, bool bulk, int device,
                        cudaStream_t stream, const Args&... args) {
  const size_t smem = kStagedRowsHeader + (bulk ? 2 : 1) * staged_row_slot_bytes(cols, element_bytes);
  int per_sm = 0;
  DFUSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel, threads, smem));
  const int64_t resident = int64_t(multiprocessor_count(device)) * std::max(per_sm, 1);
  Kernel<<<uint32_t(std::min<int64_t>(rows, resident)), threads, smem, stream>>>(args..., bulk);
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
