// diffusion.ltx25_decoder_rope: the CUDA kernel. Contract and arithmetic:
// ops/rope/ltx25_decoder_rope.h.
//
// One pass over q and k: a work item is VEC consecutive channels (VEC / 2 whole pairs) of up to
// kHeadsPerItem consecutive heads of one token, in q and in k (the vector index runs fastest from item
// to item, then the group of heads, then the token). All of them share the token's (t, h, w)
// positions, so the item splits its index into (b, t, h, w, first head) once (multiply and shift,
// uint_divider.h) and reads each of its pairs' cos/sin once for up to 2 * kHeadsPerItem vectors, from
// the compact table of the pair's axis (a few KiB: they stay in L1/L2; no [tokens, D] table is ever
// read). It loads all its vectors (one 16-byte access each when D is a multiple of VEC and every row of
// x and out is 16-byte aligned, else VEC = 2: one pair, element accesses) before it stores any: they
// are in flight together, and in place is safe.
#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/uint_divider.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "ops/rope/ltx25_decoder_rope.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

// Heads of q and of k per item: eight vectors per thread in flight together (32 registers of data at 16 bytes).
constexpr int kHeadsPerItem = 4;

// The work items, numbered with 32 bits (fewer than 2^30: at most one per VEC >= 2 elements of q), split
// by multiply and shift.
struct DecoderRopeItems {
  UintDivider vecs_per_row, head_groups, width, height, frames;
  uint32_t total;

  // Item i's vector index within a head; idx = {b, t, h, w, first head}.
  __device__ __forceinline__ uint32_t split(uint32_t i, uint32_t (&idx)[5]) const {
    const uint32_t group = vecs_per_row.div(i), token = head_groups.div(group);
    idx[4] = head_groups.mod(group, token) * kHeadsPerItem;
    const uint32_t row = width.div(token), frame = height.div(row);
    idx[3] = width.mod(token, row);
    idx[2] = height.mod(row, frame);
    idx[0] = frames.div(frame);
    idx[1] = frames.mod(frame, idx[0]);
    return vecs_per_row.mod(i, group);
  }
};

// v[a] by selects (v in registers: a runtime index would move it to local memory).
template <typename V>
__device__ __forceinline__ V pick(int a, const V (&v)[3]) {
  return a == 0 ? v[0] : a == 1 ? v[1] : v[2];
}

// The cos and sin table rows of one axis at a token's position on it.
struct AngleRows {
  const float* cos;
  const float* sin;
};

// Axis a's rows at position pos[a] (pos: a token's frame, row and column).
__device__ __forceinline__ AngleRows angle_rows(const Ltx25DecoderRopeParams& p, int a, const uint32_t (&pos)[3]) {
  const float* cos[3] = {p.axis[0].cos, p.axis[1].cos, p.axis[2].cos};
  const float* sin[3] = {p.axis[0].sin, p.axis[1].sin, p.axis[2].sin};
  const int64_t cos_stride[3] = {p.axis[0].cos_stride, p.axis[1].cos_stride, p.axis[2].cos_stride};
  const int64_t sin_stride[3] = {p.axis[0].sin_stride, p.axis[1].sin_stride, p.axis[2].sin_stride};
  const uint32_t at = pick(a, pos);
  return {pick(a, cos) + at * pick(a, cos_stride), pick(a, sin) + at * pick(a, sin_stride)};
}

// cos and sin of the N pairs from pair j of a head whose token sits at positions pos. Where the N pairs
// lie in one axis (every vector, where the axes' pair counts are multiples of N): N consecutive entries
// of one row; else each pair's entry in the row of its own axis.
template <int N>
__device__ __forceinline__ void pair_angles(const Ltx25DecoderRopeParams& p, uint32_t j, const uint32_t (&pos)[3],
                                            float (&cos)[N], float (&sin)[N]) {
  uint32_t first = 0, last = 0;
  const int a = p.axis_of(j, first);
  if (N == 1 || p.axis_of(j + N - 1, last) == a) {
    const AngleRows rows = angle_rows(p, a, pos);
#pragma unroll
    for (int e = 0; e < N; ++e) {
      cos[e] = __ldg(rows.cos + first + e);
      sin[e] = __ldg(rows.sin + first + e);
    }
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) {
      uint32_t local = 0;
      const AngleRows rows = angle_rows(p, p.axis_of(j + e, local), pos);
      cos[e] = __ldg(rows.cos + local);
      sin[e] = __ldg(rows.sin + local);
    }
  }
}

// The element offset of head idx[4] of token idx[0..3] in a tensor of `strides` (elements, dims 0..4).
__device__ __forceinline__ int64_t head_offset(const int64_t (&strides)[5], const uint32_t (&idx)[5]) {
  int64_t off = 0;
#pragma unroll
  for (int d = 0; d < 5; ++d) off += int64_t(idx[d]) * strides[d];
  return off;
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kRopeThreads)
    ltx25_decoder_rope_kernel(Ltx25DecoderRopeParams p, DecoderRopeItems items) {
  const uint32_t heads = uint32_t(p.sizes[4]);
  for (uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x; item < items.total; item += gridDim.x * kRopeThreads) {
    uint32_t idx[5];
    const uint32_t col = items.split(item, idx) * VEC;
    const int item_heads = int(std::min<uint32_t>(kHeadsPerItem, heads - idx[4]));
    Pack<T, VEC> v[2][kHeadsPerItem];  // q's heads, k's heads
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const T* x = static_cast<const T*>(p.x[i]) + col;
      int64_t at = head_offset(p.x_strides[i], idx);
#pragma unroll
      for (int k = 0; k < kHeadsPerItem; ++k, at += p.x_strides[i][4])
        if (k < item_heads) v[i][k].load_elements(x + at);
    }
    const uint32_t pos[3] = {idx[1], idx[2], idx[3]};
    float cos[VEC / 2], sin[VEC / 2];
    pair_angles(p, col / 2, pos, cos, sin);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      T* out = static_cast<T*>(p.out[i]) + col;
      int64_t at = head_offset(p.out_strides[i], idx);
#pragma unroll
      for (int k = 0; k < kHeadsPerItem; ++k, at += p.out_strides[i][4]) {
        if (k >= item_heads) break;
#pragma unroll
        for (int e = 0; e < VEC / 2; ++e) {
          const auto r = rope_pair_rounded_each<T>(Storage<T>::load(v[i][k].get(2 * e)),
                                                   Storage<T>::load(v[i][k].get(2 * e + 1)), cos[e], sin[e]);
          v[i][k].set(2 * e, r.even);
          v[i][k].set(2 * e + 1, r.odd);
        }
        v[i][k].store_elements(out + at);
      }
    }
  }
}

void cuda_entry(const Ltx25DecoderRopeParams& p, Stream stream) {
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.dtype, "ltx25_decoder_rope CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    launch_paired_rope<T>(p, [&]<int VEC>(uint32_t vecs_per_row, uint32_t) {
      const int64_t head_groups = (p.sizes[4] + kHeadsPerItem - 1) / kHeadsPerItem;
      const int64_t total = p.sizes[0] * p.sizes[1] * p.sizes[2] * p.sizes[3] * head_groups * vecs_per_row;
      const DecoderRopeItems items{UintDivider(vecs_per_row), UintDivider(uint32_t(head_groups)),
                                   UintDivider(uint32_t(p.sizes[3])), UintDivider(uint32_t(p.sizes[2])),
                                   UintDivider(uint32_t(p.sizes[1])), uint32_t(total)};
      launch_rope_kernel<ltx25_decoder_rope_kernel<T, VEC>>(p.device, total, 1, s, p, items);
    });
  });
}

DFUSE_REGISTER_ENTRY(cuda, "ltx25_decoder_rope", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
