// diffusion.rope_interleaved_pairs: the CUDA kernel. Contract and arithmetic:
// ops/rope/rope_interleaved_pairs.h.
//
// One pass over x. A work item is VEC columns (VEC / 2 whole pairs: 16 bytes of x, so 4 pairs of
// bf16/f16 or 2 of fp32) of up to kHeadsPerItem rows that share their cos/sin row: the rows
// along the outer dim the tables broadcast over (the heads: H of [B, S, H, D] against [S, 1, D],
// or of [B, H, S, D] against [S, D]). The item loads its table vectors once, then all its heads'
// vectors (several 16-byte loads in flight per thread), rotates them and stores them; every
// value is read before any is written, so in place is safe. Consecutive items take consecutive
// column vectors of one row, so warps read whole rows. VEC = 16 bytes of x when D is a multiple
// of it and every x/out/cos/sin row is 16-byte aligned, else 2 (one pair, element loads). Without
// a broadcast dim (tables as large as x) an item is one row.
#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "ops/rope/rope_interleaved_pairs.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

constexpr int kHeadsPerItem = 4;

template <typename T, typename Table, int VEC, int HEADS>
__global__ void __launch_bounds__(kRopeThreads)
    rope_interleaved_pairs_kernel(RopeInterleavedPairsParams p, int reuse_dim, uint32_t vecs_per_row,
                                  uint32_t chunks, uint32_t items) {
  // The two outer dims other than reuse_dim, slowest first.
  const int slow = reuse_dim == 0 ? 1 : 0, fast = reuse_dim == 2 ? 1 : 2;
  const uint32_t heads_total = uint32_t(p.geom.outer[reuse_dim]);
  for (uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x; item < items; item += gridDim.x * kRopeThreads) {
    uint32_t t = item / vecs_per_row;
    const uint32_t col = (item - t * vecs_per_row) * VEC;
    const uint32_t chunk = t % chunks;
    t /= chunks;
    uint32_t idx[3];
    idx[fast] = t % uint32_t(p.geom.outer[fast]);
    idx[slow] = t / uint32_t(p.geom.outer[fast]);
    idx[reuse_dim] = chunk * HEADS;
    const uint32_t heads = min(uint32_t(HEADS), heads_total - idx[reuse_dim]);

    Table c_raw[VEC], s_raw[VEC];
    load_elems<Table, VEC>(static_cast<const Table*>(p.cos.data) + p.cos.offset(idx) + col, c_raw);
    load_elems<Table, VEC>(static_cast<const Table*>(p.sin.data) + p.sin.offset(idx) + col, s_raw);
    const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx) + col;
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx) + col;
    const int64_t x_step = p.x.stride[reuse_dim], out_step = p.out.stride[reuse_dim];

    T v[HEADS][VEC];
#pragma unroll
    for (int h = 0; h < HEADS; ++h)
      if (uint32_t(h) < heads) load_elems<T, VEC>(x + h * x_step, v[h]);
#pragma unroll
    for (int h = 0; h < HEADS; ++h) {
      if (uint32_t(h) >= heads) break;
#pragma unroll
      for (int e = 0; e < VEC; e += 2) {
        const auto r = rope_interleaved_pair<T>(Storage<T>::load(v[h][e]), Storage<T>::load(v[h][e + 1]),
                                                Storage<Table>::load(c_raw[e]), Storage<Table>::load(c_raw[e + 1]),
                                                Storage<Table>::load(s_raw[e]), Storage<Table>::load(s_raw[e + 1]));
        v[h][e] = r.even;
        v[h][e + 1] = r.odd;
      }
      store_elems<T, VEC>(out + h * out_step, v[h]);
    }
  }
}

// The outer dim with the most rows over which both tables broadcast (stride 0), or -1.
int broadcast_dim(const RopeInterleavedPairsParams& p) {
  int best = -1;
  for (int d = 0; d < 3; ++d)
    if (p.geom.outer[d] > 1 && p.cos.stride[d] == 0 && p.sin.stride[d] == 0 &&
        (best < 0 || p.geom.outer[d] > p.geom.outer[best]))
      best = d;
  return best;
}

template <typename T, typename Table, int VEC, int HEADS>
void launch(const RopeInterleavedPairsParams& p, int reuse_dim, cudaStream_t stream) {
  const int64_t vecs_per_row = p.geom.cols / VEC;
  const int64_t chunks = (p.geom.outer[reuse_dim] + HEADS - 1) / HEADS;
  const int64_t items = p.geom.rows() / p.geom.outer[reuse_dim] * chunks * vecs_per_row;  // < 2^31 (guards)
  if (items == 0) return;
  launch_rope_kernel<rope_interleaved_pairs_kernel<T, Table, VEC, HEADS>>(p.device, items, 1, stream,
      p, reuse_dim, uint32_t(vecs_per_row), uint32_t(chunks), uint32_t(items));
}

template <typename T, typename Table, int VEC>
void launch_reusing_tables_if_possible(const RopeInterleavedPairsParams& p, cudaStream_t stream) {
  const int reuse_dim = broadcast_dim(p);
  if (reuse_dim >= 0)
    launch<T, Table, VEC, kHeadsPerItem>(p, reuse_dim, stream);
  else
    launch<T, Table, VEC, 1>(p, 2, stream);
}

template <typename T, typename Table>
void launch_vectorized_if_possible(const RopeInterleavedPairsParams& p, cudaStream_t stream) {
  constexpr int kVec = 16 / int(sizeof(T));
  const bool vectorizable = p.geom.cols % kVec == 0 && rows_aligned(p.x, p.dtype, 16) &&
                            rows_aligned(p.out, p.dtype, 16) && rows_aligned(p.cos, p.table_dtype, 16) &&
                            rows_aligned(p.sin, p.table_dtype, 16);
  if (vectorizable)
    launch_reusing_tables_if_possible<T, Table, kVec>(p, stream);
  else
    launch_reusing_tables_if_possible<T, Table, 2>(p, stream);
}

void cuda_entry(const RopeInterleavedPairsParams& p, Stream stream) {
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.dtype, "rope_interleaved_pairs CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    if (p.table_dtype == DType::f32)
      launch_vectorized_if_possible<T, float>(p, s);
    else if constexpr (sizeof(T) != 4)
      launch_vectorized_if_possible<T, T>(p, s);
  });
}

DFUSE_REGISTER_ENTRY(cuda, "rope_interleaved_pairs", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
