// diffusion.interleaved_rope_fp64: the CUDA kernel. Contract and arithmetic:
// ops/rope/interleaved_rope_fp64.h.
//
// One pass over q and k: a work item is VEC columns (VEC / 2 whole pairs) of up to kGroupRows heads of a token
// (rows along an outer dim over which the tables broadcast, rope_row_groups.cuh; one head where they broadcast
// over none), in q and in k. The unit index runs fastest from item to item, then the group of heads, then the
// token. The item reads its pairs' fp64 cos/sin once for up to 2 * kGroupRows vectors (consecutive items of one
// token keep its table row in L1/L2), and loads all its vectors before it stores any: they are in flight
// together, and in place is safe. VEC = 16 bytes of q when every q/k/out row is 16-byte aligned and D is a
// multiple of VEC, else 2 (one pair, element accesses). Where the table rows are 16-byte aligned, the table
// pairs (cos[2p], cos[2p+1]) are one 16-byte load each; else element loads.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "ops/rope/interleaved_rope_fp64.h"
#include "ops/rope/rope_launch.cuh"
#include "ops/rope/rope_row_groups.cuh"

namespace dfuse::detail {
namespace {

template <typename T, int VEC, bool kTablePairs>
__global__ void __launch_bounds__(kRopeThreads)
    interleaved_rope_fp64_kernel(InterleavedRopeFp64Params p, RowGroupItems items) {
  const RowOperand* in[2] = {&p.q, &p.k};
  const RowOperand* out[2] = {&p.q_out, &p.k_out};
  for (uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x; item < items.total;
       item += gridDim.x * kRopeThreads) {
    uint32_t idx[3];
    int heads;
    const uint32_t col = items.split(item, idx, heads) * VEC;
    Pack<T, VEC> v[2][kGroupRows];  // q's heads, k's heads
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const T* x = static_cast<const T*>(in[i]->data) + in[i]->offset(idx) + col;
#pragma unroll
      for (int h = 0; h < kGroupRows; ++h)
        if (h < heads) v[i][h].load_elements(x + h * in[i]->stride[2]);
    }
    const double* cos = static_cast<const double*>(p.cos.data) + p.cos.offset(idx) + col;
    const double* sin = static_cast<const double*>(p.sin.data) + p.sin.offset(idx) + col;
    double c[VEC / 2], s[VEC / 2];
#pragma unroll
    for (int j = 0; j < VEC / 2; ++j) {
      if constexpr (kTablePairs) {
        c[j] = reinterpret_cast<const double2*>(cos)[j].x;
        s[j] = reinterpret_cast<const double2*>(sin)[j].y;
      } else {
        c[j] = cos[2 * j];
        s[j] = sin[2 * j + 1];
      }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      T* y = static_cast<T*>(out[i]->data) + out[i]->offset(idx) + col;
#pragma unroll
      for (int h = 0; h < kGroupRows; ++h) {
        if (h >= heads) break;
#pragma unroll
        for (int j = 0; j < VEC / 2; ++j) {
          const auto r = interleaved_rope_fp64_pair<T>(double(Storage<T>::load(v[i][h].get(2 * j))),
                                                       double(Storage<T>::load(v[i][h].get(2 * j + 1))), c[j], s[j]);
          v[i][h].set(2 * j, r.even);
          v[i][h].set(2 * j + 1, r.odd);
        }
        v[i][h].store_elements(y + h * out[i]->stride[2]);
      }
    }
  }
}

template <typename T, int VEC, bool kTablePairs>
void launch(InterleavedRopeFp64Params p, cudaStream_t stream) {
  // rows * D / VEC < 2^31: the guards bound q's elements
  const RowGroupItems items =
      group_rows_by_tables(p.geom, {&p.cos, &p.sin}, {&p.q, &p.k, &p.q_out, &p.k_out}, p.geom.cols / VEC);
  launch_rope_kernel<interleaved_rope_fp64_kernel<T, VEC, kTablePairs>>(p.device, items.total, 1, stream, p, items);
}

void cuda_entry(const InterleavedRopeFp64Params& p, Stream stream) {
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.dtype, "interleaved_rope_fp64 CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    constexpr int kVec = 16 / int(sizeof(T));
    bool vectorizable = p.geom.cols % kVec == 0;
    for (const RowOperand* op : {&p.q, &p.k, &p.q_out, &p.k_out})
      vectorizable = vectorizable && rows_aligned(*op, p.dtype, 16);
    const bool table_pairs = rows_aligned(p.cos, DType::f64, 16) && rows_aligned(p.sin, DType::f64, 16);
    if (vectorizable && table_pairs)
      launch<T, kVec, true>(p, s);
    else if (table_pairs)
      launch<T, 2, true>(p, s);
    else
      launch<T, 2, false>(p, s);
  });
}

DFUSE_REGISTER_ENTRY(cuda, "interleaved_rope_fp64", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
