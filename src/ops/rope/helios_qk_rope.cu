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

template <typename T, int VEC>
void launch(const HeliosQkRopeParams& p, cudaStream_t stream) {
  const int64_t rows = p.sizes[0] * p.sizes[1] * p.sizes[2];
  const int64_t vecs_per_row = p.head_dim / VEC, items_per_tensor = rows * vecs_per_row;  // < 2^31 (guards)
  if (items_per_tensor == 0) return;
  launch_rope_kernel<helios_qk_rope_kernel<T, VEC>>(p.device, 2 * items_per_tensor, 1, stream,
      p, uint32_t(vecs_per_row), uint32_t(items_per_tensor));
}

// True when every row of `data` with these strides starts on a 16-byte boundary.
bool rows_aligned16(const void* data, const int64_t (&strides)[3], DType t) {
  if (reinterpret_cast<uintptr_t>(data) % 16) return false;
  for (int64_t s : strides)
    if ((s * int64_t(dtype_size(t))) % 16) return false;
  return true;
}

template <typename T>
void launch_vectorized_if_possible(const HeliosQkRopeParams& p, cudaStream_t stream) {
  constexpr int kVec = 16 / int(sizeof(T));
  bool vectorizable = p.head_dim % kVec == 0;
  for (int i = 0; i < 2; ++i)
    vectorizable = vectorizable && rows_aligned16(p.x[i], p.x_strides[i], p.dtype) &&
                   rows_aligned16(p.out[i], p.out_strides[i], p.dtype);
  if (vectorizable)
    launch<T, kVec>(p, stream);
  else
    launch<T, 2>(p, stream);
}

void cuda_entry(const HeliosQkRopeParams& p, Stream stream) {
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.dtype, "helios_qk_rope CUDA kernel",
                        [&](auto tag) { launch_vectorized_if_possible<decltype(tag)>(p, s); });
}

DFUSE_REGISTER_ENTRY(cuda, "helios_qk_rope", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
