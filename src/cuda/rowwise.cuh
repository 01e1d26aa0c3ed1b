// The CUDA kernels behind the row-wise elementwise ops (modulate, gated residual, ...).
//
// Two forms of one computation on vectors of VEC consecutive columns (16 bytes when every row operand is
// 16-byte aligned and the row length allows, else one element): the flat form (rowwise_flat_kernel) where the
// output is contiguous and every input is contiguous too or shared by all rows (rowwise_flat_layout), the
// common case, addressed by the vector's position alone; otherwise the row blocks (rowwise_kernel), where each
// thread handles rowwise_unroll<Fn>() vectors of one row, any strides, and operands that hold one value per
// row (col_stride 0) are read once per thread and broadcast. The op is a functor
// `T fn(T a, ...)` of one to four elements (kRowwiseMaxInputs) holding the per-element arithmetic
// that the host kernel shares; an op may also give it on packed pairs of 16-bit elements (RowwisePair,
// cuda/paired_arith.cuh), which the kernel then uses, redoing a vector by element where the pair form
// falls back.
// Measured variants and their numbers: docs/BENCHMARKS.md.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "common/arith.h"
#include "common/dispatch.h"
#include "common/rows.h"
#include "common/uint_divider.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/paired_arith.cuh"
#include "cuda/resident_blocks.cuh"
#include "cuda/vector_io.cuh"
#include "dfuse/core/device.h"
#include "dfuse/core/error.h"

namespace dfuse::detail {

// VEC floats each rounded to T (Storage<T>::store) into a pack; 16-bit T two at a time, by one packed
// conversion (the same rounding).
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> pack_rounded(const float (&f)[VEC]) {
  Pack<T, VEC> r;
  if constexpr (sizeof(T) == 2 && VEC % 2 == 0) {
#pragma unroll
    for (int k = 0; k < VEC / 2; ++k) r.w[k] = PairedArith<T>::pack(f[2 * k], f[2 * k + 1]);
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) r.set(e, Storage<T>::store(f[e]));
  }
  return r;
}

// N consecutive elements of E as floats, in 16-byte accesses (p 16-byte aligned).
template <int N, typename E>
__device__ __forceinline__ void load_as_floats(const E* p, float (&out)[N]) {
  constexpr int kVec = 16 / sizeof(E);
  static_assert(N % kVec == 0, "whole 16-byte accesses");
#pragma unroll
  for (int h = 0; h < N / kVec; ++h) {
    Pack<E, kVec> v;
    v.load(p + h * kVec);
#pragma unroll
    for (int e = 0; e < kVec; ++e) out[h * kVec + e] = Storage<E>::load(v.get(e));
  }
}

// N consecutive elements of E copied bit for bit to global memory, in 16-byte accesses (both 16-byte aligned).
template <int N, typename E>
__device__ __forceinline__ void copy_elements(const E* src, E* dst) {
  constexpr int kVec = 16 / sizeof(E);
  static_assert(N % kVec == 0, "whole 16-byte accesses");
#pragma unroll
  for (int h = 0; h < N / kVec; ++h) {
    Pack<E, kVec> v;
    v.load(src + h * kVec);
    v.store_global(dst + h * kVec);
  }
}

constexpr int kRowwiseThreads = 128;  // threads per block
// Vectors per input and thread, all loaded before any is used: RowwisePair<Fn>::kVectorsPerThread where an op's
// pair form sets it (an op bound by instruction issue), else kDefault.
template <typename Fn, int kDefault>
constexpr int rowwise_vectors_per_thread() {
  if constexpr (requires { RowwisePair<Fn>::kVectorsPerThread; })
    return RowwisePair<Fn>::kVectorsPerThread;
  else
    return kDefault;
}

// The row blocks' (rowwise_kernel): two by default. Measured on the H200 (docs/BENCHMARKS.md, session 9): two
// rather than four made modulate 371.2 -> 367.6 us at Wan 2.1 and left silu_mul level; bias_silu ran 412.2 us with
// four, 423.5 with two. Four-input functors with four took 93 registers (bias_glu, five blocks per SM).
template <typename Fn>
constexpr int rowwise_unroll() {
  return rowwise_vectors_per_thread<Fn, 2>();
}

// The flat form's (rowwise_flat_kernel): one by default. Measured on the H200 (docs/BENCHMARKS.md, session 13,
// "flat U1 dense"): one vector per thread, 128 consecutive vectors a block, ran silu_mul 24.18 -> 23.73 us at
// FLUX.1 size against the row blocks of two, whose second block of a 3072-column row is half idle.
template <typename Fn>
constexpr int rowwise_flat_unroll() {
  return rowwise_vectors_per_thread<Fn, 1>();
}

// Whether rowwise_kernel may load Fn's streamed inputs evict-first: unless RowwisePair<Fn>::kEvictFirstInputs is
// false, where an op's kernel measured slower with the choice compiled in (bias_glu: 562.7 -> 578.1 us at Wan 2.1
// with the policy off, docs/BENCHMARKS.md, session 13); such a kernel compiles without it.
template <typename Fn>
constexpr bool rowwise_evict_first_inputs() {
  if constexpr (requires { RowwisePair<Fn>::kEvictFirstInputs; })
    return RowwisePair<Fn>::kEvictFirstInputs;
  else
    return true;
}

// RowwisePair<Fn>::apply on word w of every input's vector (two 16-bit elements).
template <typename Fn, typename T, int VEC, size_t... K>
__device__ __forceinline__ uint32_t apply_rowwise_pair(const Pack<T, VEC> (&v)[sizeof...(K)], int w, bool& fallback,
                                                       std::index_sequence<K...>) {
  return RowwisePair<Fn>::apply(fallback, v[K].w[w]...);
}

// fn applied to element e of every input's vector.
template <typename T, int VEC, typename Fn, size_t... K>
__device__ __forceinline__ T apply_rowwise(const Fn& fn, const Pack<T, VEC> (&v)[sizeof...(K)], int e,
                                           std::index_sequence<K...>) {
  return fn(v[K].get(e)...);
}

// Fn on one vector of every input: by the pair form where Fn has one, by element without one or where the
// pair form falls back.
template <typename T, int VEC, typename Fn, int kInputs>
__device__ __forceinline__ Pack<T, VEC> rowwise_vector(const Fn& fn, const Pack<T, VEC> (&v)[kInputs]) {
  Pack<T, VEC> result;
  bool by_element = true;
  if constexpr (sizeof(T) == 2 && VEC % 2 == 0 && RowwisePair<Fn>::kDefined) {
    by_element = false;
#pragma unroll
    for (int w = 0; w < Pack<T, VEC>::kWords; ++w)
      result.w[w] = apply_rowwise_pair<Fn>(v, w, by_element, std::make_index_sequence<kInputs>{});
  }
  if (by_element) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) result.set(e, apply_rowwise(fn, v, e, std::make_index_sequence<kInputs>{}));
  }
  return result;
}

// The block-uniform index arithmetic of rowwise_kernel by multiply and shift (uint_divider.h), set at
// launch: block b covers column block b % blocks_per_row of row b / blocks_per_row, and row r has the
// outer indices of RowGeometry::split.
struct RowwiseGrid {
  UintDivider blocks_per_row, outer2, outer1;

  __device__ __forceinline__ uint32_t row_and_column_block(uint32_t b, uint32_t& column_block) const {
    const uint32_t row = blocks_per_row.div(b);
    column_block = blocks_per_row.mod(b, row);
    return row;
  }
  __device__ __forceinline__ void split(uint32_t r, uint32_t idx[3]) const {
    const uint32_t q = outer2.div(r);
    idx[2] = outer2.mod(r, q);
    idx[0] = outer1.div(q);
    idx[1] = outer1.mod(q, idx[0]);
  }
};

// Block b covers column block b % blocks_per_row of row b / blocks_per_row, a block being
// rowwise_unroll steps of kRowwiseThreads * VEC columns: consecutive blocks stream through memory
// in row-major order, the order the tensors are laid out in, and each thread has rowwise_unroll
// 16-byte loads of every input in flight. The grid is bounded by 2^31 blocks.
// evict_first: the inputs that change from row to row (streamed: read once) are loaded with an L2 evict-first
// policy (16-byte vectors only), so that the output stays in L2 for the kernel that reads it next (see
// launch_rowwise_vec).
template <typename T, int VEC, typename Fn>
__global__ void __launch_bounds__(kRowwiseThreads)
    rowwise_kernel(RowwiseParams p, Fn fn, RowwiseGrid grid, bool evict_first) {
  constexpr int kInputs = rowwise_arity<T, Fn>();
  constexpr int kRowwiseUnroll = rowwise_unroll<Fn>();
  constexpr int kStep = kRowwiseThreads * VEC;
  uint32_t column_block;
  const uint32_t row = grid.row_and_column_block(blockIdx.x, column_block);
  const int64_t first = int64_t(column_block) * (kStep * kRowwiseUnroll) + int64_t(threadIdx.x) * VEC;
  const int64_t cols = p.geom.cols;
  if (first >= cols) return;
  // This thread's vectors inside the row (kStep is a power of two: a shift).
  const int vectors = int(std::min<int64_t>(kRowwiseUnroll, (cols - first + kStep - 1) / kStep));
  uint32_t idx[3];
  grid.split(row, idx);
  Pack<T, VEC> v[kRowwiseUnroll][kInputs];
  const bool streamed_first = sizeof(T) * VEC == 16 && rowwise_evict_first_inputs<Fn>() && evict_first;
  const uint64_t policy = streamed_first ? l2_evict_first_policy() : 0;
#pragma unroll
  for (int k = 0; k < kInputs; ++k) {
    const T* in = static_cast<const T*>(p.in[k].data) + p.in[k].offset(idx);
    if (p.in[k].col_stride == 0) {
      const T value = in[0];
#pragma unroll
      for (int u = 0; u < kRowwiseUnroll; ++u) v[u][k].fill(value);
    } else if (streamed_first && p.in[k].stride[2] != 0) {
#pragma unroll
      for (int u = 0; u < kRowwiseUnroll; ++u)
        if (u < vectors) v[u][k].load_evict_first(in + first + u * kStep, policy);
    } else {
#pragma unroll
      for (int u = 0; u < kRowwiseUnroll; ++u)
        if (u < vectors) v[u][k].load(in + first + u * kStep);
    }
  }
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
#pragma unroll
  for (int u = 0; u < kRowwiseUnroll; ++u) {
    if (u >= vectors) break;
    rowwise_vector<T>(fn, v[u]).store_global(out + first + u * kStep);
  }
}

// The flat form, for operands that rowwise_flat_layout places (contiguous activations beside a row shared by
// every row, e.g. a batch's modulation values): block b takes kRowwiseThreads * U consecutive VEC-element vectors
// of the output (U = rowwise_flat_unroll), thread t vectors b * kRowwiseThreads * U + u * kRowwiseThreads + t, and
// every input is addressed by that position alone (FlatAccess): no row index is split and every block is full but
// the grid's last. vectors = rows * cols / VEC < 2^31; evict_first as in rowwise_kernel, for the flat inputs.
template <typename T, int VEC, typename Fn>
__global__ void __launch_bounds__(kRowwiseThreads)
    rowwise_flat_kernel(RowwiseParams p, Fn fn, RowwiseFlatLayout layout, UintDivider vectors_per_row,
                        uint32_t vectors, bool evict_first) {
  constexpr int kInputs = rowwise_arity<T, Fn>();
  constexpr int U = rowwise_flat_unroll<Fn>();
  const uint32_t first = blockIdx.x * (kRowwiseThreads * U) + threadIdx.x;
  const bool streamed_first = sizeof(T) * VEC == 16 && rowwise_evict_first_inputs<Fn>() && evict_first;
  const uint64_t policy = streamed_first ? l2_evict_first_policy() : 0;
  bool columns = false;
#pragma unroll
  for (int k = 0; k < kInputs; ++k) columns = columns || layout.in[k] == FlatAccess::column;
  Pack<T, VEC> v[U][kInputs];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const uint32_t i = first + u * kRowwiseThreads;
    if (i >= vectors) break;
    const int64_t at = int64_t(i) * VEC;
    const int64_t column = columns ? int64_t(vectors_per_row.mod(i, vectors_per_row.div(i))) * VEC : 0;
#pragma unroll
    for (int k = 0; k < kInputs; ++k) {
      const T* in = static_cast<const T*>(p.in[k].data);
      if (layout.in[k] == FlatAccess::value)
        v[u][k].fill(in[0]);
      else if (layout.in[k] == FlatAccess::column)
        v[u][k].load(in + column);
      else if (streamed_first)
        v[u][k].load_evict_first(in + at, policy);
      else
        v[u][k].load(in + at);
    }
  }
  T* out = static_cast<T*>(p.out.data);
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const uint32_t i = first + u * kRowwiseThreads;
    if (i >= vectors) break;
    rowwise_vector<T>(fn, v[u]).store_global(out + int64_t(i) * VEC);
  }
}

// Inputs are loaded evict-first (rowwise_kernel) when the output fits in L2: it then stays there for its consumer
// (measured on the H200 at FLUX.1 size, the op followed by a reader of its output: 2.7-8.5% faster as a pair, and
// the op itself faster), while above L2's size the same loads made the ops 2-7% slower (Wan 2.1 size;
// docs/BENCHMARKS.md, session 13).
// The flat form where rowwise_flat_layout places every operand, else the row blocks.
template <typename T, int VEC, typename Fn>
void launch_rowwise_vec(const RowwiseParams& p, Fn fn, cudaStream_t stream) {
  const bool evict_first = p.geom.rows() * p.geom.cols * int64_t(sizeof(T)) <= l2_cache_bytes(p.device);
  const RowwiseFlatLayout layout = rowwise_flat_layout(p);
  const int64_t vectors = p.geom.rows() * (p.geom.cols / VEC);
  if (layout.applies && vectors < (int64_t(1) << 31)) {
    constexpr int64_t kBlockVectors = int64_t(kRowwiseThreads) * rowwise_flat_unroll<Fn>();
    const auto blocks = uint32_t((vectors + kBlockVectors - 1) / kBlockVectors);
    rowwise_flat_kernel<T, VEC, Fn><<<blocks, kRowwiseThreads, 0, stream>>>(
        p, fn, layout, UintDivider(uint32_t(p.geom.cols / VEC)), uint32_t(vectors), evict_first);
    DFUSE_CUDA_CHECK_LAUNCH();
    return;
  }
  constexpr int64_t kBlockCols = int64_t(kRowwiseThreads) * VEC * rowwise_unroll<Fn>();
  const int64_t blocks_per_row = (p.geom.cols + kBlockCols - 1) / kBlockCols;
  // rows * blocks_per_row < 2^31: the rowwise guards bound rows * ceil(cols / 64) below 2^31.
  const int64_t blocks = p.geom.rows() * blocks_per_row;
  // Every divisor and numerator is below 2^31 (rows and blocks are).
  const RowwiseGrid grid{UintDivider(uint32_t(blocks_per_row)), UintDivider(uint32_t(p.geom.outer[2])),
                         UintDivider(uint32_t(p.geom.outer[1]))};
  rowwise_kernel<T, VEC, Fn><<<uint32_t(blocks), kRowwiseThreads, 0, stream>>>(p, fn, grid, evict_first);
  DFUSE_CUDA_CHECK_LAUNCH();
}

// Row staging for the norm kernels that keep a row in shared memory: a block of kThreads threads copies
// the n elements of x to `row` bit for bit, VEC at a time, in whole-vector accesses (staging as float
// left the rows bound by the L1/shared pipe). Each thread loads kStageBatch vectors before it stores
// any, so that a block has up to kThreads * kStageBatch vector loads in flight (one at a time left a row's
// HBM latency exposed once per vector; measured in docs/BENCHMARKS.md: faster for the RMSNorm rows,
// slower for the fp32 norm rows, which stage one at a time). The caller synchronizes before reading `row`.
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

// Whether a staged-row kernel with VEC-element vectors of T stages ahead (its 16-byte path), and the
// staging bytes per column it needs: two rows if so, one otherwise.
template <typename T, int VEC>
constexpr bool stages_ahead() {
  return VEC * sizeof(T) == 16;
}
template <typename T, int VEC>
constexpr size_t staged_bytes_per_column() {
  return stages_ahead<T, VEC>() ? 2 * sizeof(T) : sizeof(T);
}

// The copies of a row of n elements (whole 16-byte vectors, 16-byte aligned) from x to `row`, issued
// asynchronously by a block of kThreads threads (copy_async_16) and committed as one group per thread.
template <typename T, int kThreads>
__device__ __forceinline__ void copy_row_async(const T* x, T* row, int64_t n) {
  constexpr int VEC = 16 / sizeof(T);
  for (int64_t j = int64_t(threadIdx.x) * VEC; j < n; j += int64_t(kThreads) * VEC) copy_async_16(row + j, x + j);
  copy_async_commit();
}

// A row staged now: on the 16-byte path (stages_ahead) by asynchronous copies, every copy in flight at once and
// no registers held, waited for before return; else stage_row's vectors, kStageBatch at a time. The caller
// synchronizes before reading `row`.
template <typename T, int kThreads, int VEC, int kStageBatch>
__device__ __forceinline__ void stage_row_async_or_batched(const T* x, T* row, int64_t n) {
  if constexpr (stages_ahead<T, VEC>()) {
    copy_row_async<T, kThreads>(x, row, n);
    copy_async_wait_all();
  } else {
    stage_row<T, kThreads, VEC, kStageBatch>(x, row, n);
  }
}

// Rows staged ahead: a persistent block's loop over its rows (r = first, first + stride, ... < rows) that
// stages each row of n elements (x_of(r)) into one of two buffers of `staging` by asynchronous 16-byte copies
// (copy_async_16) issued before the block works on the previous row, so that a row's HBM latency overlaps
// the statistics and epilogue of the one before; body(r, row) then runs on the staged row, by the whole
// block. Every row start 16-byte aligned and n whole 16-byte vectors (the kernels' 16-byte path); `staging`
// holds 2 n elements. The block's threads each copy their own vectors; the wait and a barrier before body
// make the whole row visible, and the barrier also keeps a buffer from being refilled while still read.
template <typename T, int kThreads, typename XOf, typename Body>
__device__ __forceinline__ void for_each_row_staged_ahead(T* staging, int64_t n, uint32_t first, uint32_t stride,
                                                          uint32_t rows, XOf x_of, Body body) {
  const auto stage = [&](uint32_t r, T* row) { copy_row_async<T, kThreads>(x_of(r), row, n); };
  if (first < rows) stage(first, staging);
  int buffer = 0;
  for (uint32_t r = first; r < rows; r += stride, buffer ^= 1) {
    T* row = staging + buffer * n;
    copy_async_wait_all();
    __syncthreads();  // row r staged; every thread done with the other buffer (row r - stride)
    if (r + stride < rows) stage(r + stride, staging + (buffer ^ 1) * n);
    body(r, static_cast<const T*>(row));
  }
}

// Readers of a row staged by stage_row (as float or in T) for the statistics of cuda/layer_norm_stats.cuh
// and cuda/rms_norm_stats.cuh: staged_element(row)(k) is element k as float; staged_chunks4(row)(i, v) puts
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

constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;

// Lets Kernel take `smem` bytes of dynamic shared memory: an opt-in above the default limit, up to the device's.
// The kernel's static shared memory (its reductions' slots) counts against the same default limit.
template <auto Kernel>
void allow_dynamic_shared_bytes(size_t smem) {
  static const size_t static_smem = [] {
    cudaFuncAttributes attributes{};
    DFUSE_CUDA_CHECK(cudaFuncGetAttributes(&attributes, Kernel));
    return attributes.sharedSizeBytes;
  }();
  if (smem + static_smem > kDefaultDynamicSharedBytes)
    DFUSE_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
}

// The launch of a norm kernel that stages a row of `cols` elements of `staged_bytes` each in dynamic
// shared memory and loops over rows persistently (rms_norm_rows with a cached operand): as many blocks as
// `device` keeps resident, at most one per row.
template <auto Kernel, typename... Args>
void launch_staged_rows(int threads, int64_t rows, int64_t cols, size_t staged_bytes, int device, cudaStream_t stream,
                        const Args&... args) {
  const size_t smem = size_t(cols) * staged_bytes;
  allow_dynamic_shared_bytes<Kernel>(smem);
  const int64_t resident = resident_blocks<Kernel>(device, threads, smem);
  Kernel<<<uint32_t(std::min<int64_t>(rows, resident)), threads, smem, stream>>>(args...);
  DFUSE_CUDA_CHECK_LAUNCH();
}

// The launch of a norm kernel that takes one row per block, staged in `smem` bytes of dynamic shared memory.
template <auto Kernel, typename... Args>
void launch_row_per_block(int threads, int64_t rows, size_t smem, cudaStream_t stream, const Args&... args) {
  allow_dynamic_shared_bytes<Kernel>(smem);
  Kernel<<<uint32_t(rows), threads, smem, stream>>>(args...);
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
