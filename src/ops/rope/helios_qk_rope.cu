// diffusion.helios_qk_rope: the CUDA kernel. Contract and arithmetic: ops/rope/helios_qk_rope.h.
//
// One pass over q and k (q's items first): a work item is VEC consecutive channels (VEC / 2 whole
// pairs) of one head of one token; it loads them (one 16-byte access when D is a multiple of VEC
// and every row of x and out is 16-byte aligned, else VEC = 2: one pair, element accesses), reads
// the pairs' cos (column 2j) and sin (column D + 2j + 1) from the token's row of the [B, S, 2D]
// table (any strides: the row serves all heads of the token from L1/L2), and writes the rotated
// pairs. Every value is read before any is written, so in place is safe.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "ops/rope/helios_qk_rope.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

template <typename T, int VEC>
__global__ void __launch_bounds__(kRopeThreads)
    helios_qk_rope_kernel(HeliosQkRopeParams p, uint32_t vecs_per_row, uint32_t items_per_tensor) {
  for (uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x; item < 2 * items_per_tensor;
       item += gridDim.x * kRopeThreads) {
    const int tensor = item >= items_per_tensor ? 1 : 0;
    const uint32_t local_item = item - uint32_t(tensor) * items_per_tensor;
    const uint32_t row = local_item / vecs_per_row;
    const uint32_t col = (local_item - row * vecs_per_row) * VEC;
    const uint32_t heads = uint32_t(p.sizes[2]), tokens = uint32_t(p.sizes[1]);
    const uint32_t idx[3] = {row / heads / tokens, row / heads % tokens, row % heads};
    int64_t x_off = 0, out_off = 0;
#pragma unroll
    for (int d = 0; d < 3; ++d) {
      x_off += int64_t(idx[d]) * p.x_strides[tensor][d];
      out_off += int64_t(idx[d]) * p.out_strides[tensor][d];
    }
    T v[VEC];
    load_elems<T, VEC>(static_cast<const T*>(p.x[tensor]) + x_off + col, v);
#pragma unroll
    for (int e = 0; e < VEC; e += 2) {
      const int64_t j = (col + e) / 2;
      const auto r = rope_pair_rounded_each<T>(Storage<T>::load(v[e]), Storage<T>::load(v[e + 1]), p.cos(idx, j),
                                               p.sin(idx, j));
      v[e] = r.even;
      v[e + 1] = r.odd;
    }
    store_elems<T, VEC>(static_cast<T*>(p.out[tensor]) + out_off + col, v);
  }
}

void cuda_entry(const HeliosQkRopeParams& p, Stream stream) {
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.dtype, "helios_qk_rope CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    launch_paired_rope<T>(p, [&]<int VEC>(uint32_t vecs_per_row, uint32_t items_per_tensor) {
      launch_rope_kernel<helios_qk_rope_kernel<T, VEC>>(p.device, 2 * int64_t(items_per_tensor), 1, s, p,
                                                        vecs_per_row, items_per_tensor);
    });
  });
}

DFUSE_REGISTER_ENTRY(cuda, "helios_qk_rope", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
