// diffusion.ltx25_decoder_rope: the CUDA kernel. Contract and arithmetic:
// ops/rope/ltx25_decoder_rope.h.
//
// One pass over q and k: a work item is VEC consecutive channels (VEC / 2 whole pairs) of one head of
// one token of q or of k (q's items first). The item splits its row index into (b, t, h, w, head),
// loads its VEC elements (one 16-byte access when D is a multiple of VEC and every row of x and out
// is 16-byte aligned, else VEC = 2: one pair, element accesses), and takes each pair's cos/sin from
// the compact table of the pair's axis at the token's position on that axis: the tables are a few
// KiB, so they stay in L1/L2 and no [tokens, D] table is ever read. Every value of the item is read
// before any is written, so in place is safe. Consecutive items take consecutive vectors of a row.
#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "ops/rope/ltx25_decoder_rope.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

template <typename T, int VEC>
__global__ void __launch_bounds__(kRopeThreads)
    ltx25_decoder_rope_kernel(Ltx25DecoderRopeParams p, uint32_t vecs_per_row, uint32_t items_per_tensor) {
  for (uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x; item < 2 * items_per_tensor;
       item += gridDim.x * kRopeThreads) {
    const int tensor = item >= items_per_tensor ? 1 : 0;
    const uint32_t local_item = item - uint32_t(tensor) * items_per_tensor;
    uint32_t row = local_item / vecs_per_row;
    const uint32_t col = (local_item - row * vecs_per_row) * VEC;
    uint32_t idx[5];
#pragma unroll
    for (int d = 4; d >= 0; --d) {
      const uint32_t n = uint32_t(p.sizes[d]);
      idx[d] = row % n;
      row /= n;
    }
    int64_t x_off = 0, out_off = 0;
#pragma unroll
    for (int d = 0; d < 5; ++d) {
      x_off += int64_t(idx[d]) * p.x_strides[tensor][d];
      out_off += int64_t(idx[d]) * p.out_strides[tensor][d];
    }
    T v[VEC];
    load_elems<T, VEC>(static_cast<const T*>(p.x[tensor]) + x_off + col, v);
#pragma unroll
    for (int e = 0; e < VEC; e += 2) {
      int64_t local = 0;
      const int a = p.axis_of((col + e) / 2, local);
      const Ltx25AxisTable& t = p.axis[a];
      const int64_t pos = idx[1 + a];
      const auto r = rope_pair_rounded_each<T>(Storage<T>::load(v[e]), Storage<T>::load(v[e + 1]),
                                        __ldg(t.cos + pos * t.cos_stride + local),
                                        __ldg(t.sin + pos * t.sin_stride + local));
      v[e] = r.even;
      v[e + 1] = r.odd;
    }
    store_elems<T, VEC>(static_cast<T*>(p.out[tensor]) + out_off + col, v);
  }
}

void cuda_entry(const Ltx25DecoderRopeParams& p, Stream stream) {
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.dtype, "ltx25_decoder_rope CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    launch_paired_rope<T>(p, [&]<int VEC>(uint32_t vecs_per_row, uint32_t items_per_tensor) {
      launch_rope_kernel<ltx25_decoder_rope_kernel<T, VEC>>(p.device, 2 * int64_t(items_per_tensor), 1, s, p,
                                                            vecs_per_row, items_per_tensor);
    });
  });
}

DFUSE_REGISTER_ENTRY(cuda, "ltx25_decoder_rope", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
