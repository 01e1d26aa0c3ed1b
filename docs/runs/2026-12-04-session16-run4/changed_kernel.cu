// diffusion.rope_rotate_half: the CUDA kernel. Contract and arithmetic: ops/rope/rope_rotate_half.h.
//
// One thread per work item of a head (row), or of two heads of one token when the tables do not vary over the
// heads (each cos/sin vector then loaded once for both): a rotary item is VEC columns i.. of the first half and
// the VEC columns i + R/2.. of the second half (both read before either is written, so in place is safe); a tail
// item copies VEC columns >= R. Consecutive threads take consecutive items of one head and then the next head of
// the same token, so the token's cos/sin row is fetched from HBM once and served from L1/L2 to its other heads.
// VEC = 16 bytes of x when every x/out/table row is 16-byte aligned and R/2 and D - R are multiples of VEC, else 1.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rowwise.cuh"
#include "cuda/vector_io.cuh"
#include "ops/rope/rope_launch.cuh"
#include "ops/rope/rope_rotate_half.h"

namespace dfuse::detail {
namespace {

template <typename T, typename Table, RopeMath M, int VEC, int kHeads>
__global__ void __launch_bounds__(kRopeThreads, kHeads > 1 ? 4 : 1)
    rope_rotate_half_kernel(RopeRotateHalfParams p, uint32_t pair_items, uint32_t items_per_row, uint32_t items) {
  const uint32_t half = uint32_t(p.rot_dim / 2);
  for (uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x; item < items; item += gridDim.x * kRopeThreads) {
    const uint32_t group = item / items_per_row, unit = item - group * items_per_row;
    uint32_t idx[3];
    p.geom.split(group * kHeads, idx);
    const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
    T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
    const int64_t x_head = p.x.stride[2], out_head = p.out.stride[2];
    if (unit >= pair_items) {  // the untouched tail
      const uint32_t col = uint32_t(p.rot_dim) + (unit - pair_items) * VEC;
      Pack<T, VEC> v[kHeads];
#pragma unroll
      for (int h = 0; h < kHeads; ++h) v[h].load(x + h * x_head + col);
#pragma unroll
      for (int h = 0; h < kHeads; ++h) v[h].store_global(out + h * out_head + col);
      continue;
    }
    const uint32_t col = unit * VEC;
    Pack<T, VEC> lo[kHeads], hi[kHeads];
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      lo[h].load(x + h * x_head + col);
      hi[h].load(x + h * x_head + col + half);
    }
    const Table* cos = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx) + col;
    const Table* sin = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx) + col;
    Table c_lo[VEC], c_hi[VEC], s_lo[VEC], s_hi[VEC];
    load_elems<Table, VEC>(cos, c_lo);
    load_elems<Table, VEC>(cos + half, c_hi);
    load_elems<Table, VEC>(sin, s_lo);
    load_elems<Table, VEC>(sin + half, s_hi);
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      Pack<T, VEC> r_lo, r_hi;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float x1 = Storage<T>::load(lo[h].get(e)), x2 = Storage<T>::load(hi[h].get(e));
        r_lo.set(e, rotate_half_element<T, M>(x1, -x2, Storage<Table>::load(c_lo[e]), Storage<Table>::load(s_lo[e])));
        r_hi.set(e, rotate_half_element<T, M>(x2, x1, Storage<Table>::load(c_hi[e]), Storage<Table>::load(s_hi[e])));
      }
      r_lo.store_global(out + h * out_head + col);
      r_hi.store_global(out + h * out_head + col + half);
    }
  }
}

// kHeads consecutive rows of the innermost outer dim per item when the tables do not vary along it (the heads of
// one token): their cos/sin vectors are loaded once for all kHeads.
template <typename T, typename Table, RopeMath M, int VEC>
void launch(const RopeRotateHalfParams& p, bool copy_tail, cudaStream_t stream) {
  const int64_t pair_items = p.rot_dim / 2 / VEC;
  const int64_t items_per_row = pair_items + (copy_tail ? (p.geom.cols - p.rot_dim) / VEC : 0);
  const auto launch_heads = [&]<int kHeads>() {
    const int64_t items = p.geom.rows() / kHeads * items_per_row;  // < 2^31: the guards bound x's elements
    if (items == 0) return;
    launch_rope_kernel<rope_rotate_half_kernel<T, Table, M, VEC, kHeads>>(p.device, items, 1, stream,
        p, uint32_t(pair_items), uint32_t(items_per_row), uint32_t(items));
  };
  if (p.geom.outer[2] % 2 == 0 && p.cos.stride[2] == 0 && p.sin.stride[2] == 0)
    launch_heads.template operator()<2>();
  else
    launch_heads.template operator()<1>();
}

template <typename T, typename Table, RopeMath M>
void launch_vectorized_if_possible(const RopeRotateHalfParams& p, cudaStream_t stream) {
  constexpr int kVec = 16 / int(sizeof(T));
  const bool copy_tail = p.out.data != p.x.data;  // in place needs identical views (guards)
  const int64_t half = p.rot_dim / 2, tail = p.geom.cols - p.rot_dim;
  const bool vectorizable = half % kVec == 0 && (!copy_tail || tail % kVec == 0) &&
                            rows_aligned(p.x, p.dtype, 16) && rows_aligned(p.out, p.dtype, 16) &&
                            rows_aligned(p.cos, p.table_dtype, 16) &&
                            rows_aligned(p.sin, p.table_dtype, 16);
  if (vectorizable)
    launch<T, Table, M, kVec>(p, copy_tail, stream);
  else
    launch<T, Table, M, 1>(p, copy_tail, stream);
}

void cuda_entry(const RopeRotateHalfParams& p, Stream stream) {
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.dtype, "rope_rotate_half CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 4) {  // fp32: both maths are the same roundings
      launch_vectorized_if_possible<T, float, RopeMath::fp32_opmath>(p, s);
    } else {
      if (p.math == RopeMath::storage_dtype)
        launch_vectorized_if_possible<T, T, RopeMath::storage_dtype>(p, s);
      else if (p.table_dtype == DType::f32)
        launch_vectorized_if_possible<T, float, RopeMath::fp32_opmath>(p, s);
      else
        launch_vectorized_if_possible<T, T, RopeMath::fp32_opmath>(p, s);
    }
  });
}

DFUSE_REGISTER_ENTRY(cuda, "rope_rotate_half", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
