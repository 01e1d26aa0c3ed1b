// diffusion.interleaved_rope_fp64: the CUDA kernel. Contract and arithmetic:
// ops/rope/interleaved_rope_fp64.h.
//
// One thread per (head, VEC columns) item, doing the same columns of q and of k so that the
// fp64 table values are loaded once for both (and, heads of a token being consecutive items,
// served from L1/L2 to the token's other heads). VEC = 16 bytes of q when every q/k/out row is
// 16-byte aligned, D is a multiple of VEC and the table rows are 16-byte aligned (the table
// pairs (cos[2p], cos[2p+1]) are then one 16-byte load each); else VEC = 2 (one pair, element
// loads).
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "ops/rope/interleaved_rope_fp64.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

template <typename T, int VEC>
__device__ __forceinline__ void rotate(const T* x, T* out, const double (&c)[VEC / 2], const double (&s)[VEC / 2]) {
  T v[VEC];
  load_elems<T, VEC>(x, v);
#pragma unroll
  for (int j = 0; j < VEC / 2; ++j) {
    const auto r = interleaved_rope_fp64_pair<T>(double(Storage<T>::load(v[2 * j])),
                                                 double(Storage<T>::load(v[2 * j + 1])), c[j], s[j]);
    v[2 * j] = r.even;
    v[2 * j + 1] = r.odd;
  }
  store_elems<T, VEC>(out, v);
}

template <typename T, int VEC, bool kTablePairs>
__global__ void __launch_bounds__(kRopeThreads)
    interleaved_rope_fp64_kernel(InterleavedRopeFp64Params p, uint32_t items_per_row, uint32_t items) {
  for (uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x; item < items; item += gridDim.x * kRopeThreads) {
    const uint32_t row = item / items_per_row, col = (item - row * items_per_row) * VEC;
    uint32_t idx[3];
    p.geom.split(row, idx);
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
    rotate<T, VEC>(static_cast<const T*>(p.q.data) + p.q.offset(idx) + col,
                   static_cast<T*>(p.q_out.data) + p.q_out.offset(idx) + col, c, s);
    rotate<T, VEC>(static_cast<const T*>(p.k.data) + p.k.offset(idx) + col,
                   static_cast<T*>(p.k_out.data) + p.k_out.offset(idx) + col, c, s);
  }
}

template <typename T, int VEC, bool kTablePairs>
void launch(const InterleavedRopeFp64Params& p, cudaStream_t stream) {
  const int64_t items_per_row = p.geom.cols / VEC;
  const int64_t items = p.geom.rows() * items_per_row;  // < 2^31: the guards bound q's elements
  if (items == 0) return;
  launch_rope_kernel<interleaved_rope_fp64_kernel<T, VEC, kTablePairs>>(p.device, items, 1, stream,
      p, uint32_t(items_per_row), uint32_t(items));
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
