// The grid-stride launch geometry shared by the rope family's CUDA kernels.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/resident_blocks.cuh"

namespace dfuse::detail {

constexpr int kRopeThreads = 256;

// Blocks for `items` work items, one per thread, grid-stride: at most the resident blocks, so that every
// block starts in the first wave and the items spread evenly over them. Items < 2^31 (the rope guards), so
// 32-bit indices plus one grid stride never wrap.
template <auto Kernel>
unsigned rope_blocks(int device, int64_t items) {
  const int64_t resident = resident_blocks<Kernel>(device, kRopeThreads);
  return unsigned(std::max<int64_t>(1, std::min<int64_t>((items + kRopeThreads - 1) / kRopeThreads, resident)));
}

// Launches Kernel(args...) with rope_blocks' grid for `items` (times `parts` in y) on `stream`.
template <auto Kernel, typename... Args>
void launch_rope_kernel(int device, int64_t items, unsigned parts, cudaStream_t stream, const Args&... args) {
  Kernel<<<dim3(rope_blocks<Kernel>(device, items), parts), kRopeThreads, 0, stream>>>(args...);
  DFUSE_CUDA_CHECK_LAUNCH();
}

// The launch shared by the paired q/k RoPE kernels (helios_qk_rope, ltx25_decoder_rope), whose Params
// hold device, sizes[N] (a head's outer indices), head_dim, x[2], out[2], x_strides[2][N] and
// out_strides[2][N] (elements; the last dim contiguous): calls launch_vec.template operator()<VEC>(vectors
// per head, vectors per tensor) with VEC = 16 bytes of T when every head of q, k and both outputs starts on
// a 16-byte boundary and D splits into such vectors, else VEC = 2; nothing for empty tensors.
template <typename T, typename Params, typename LaunchVec>
void launch_paired_rope(const Params& p, LaunchVec launch_vec) {
  constexpr int kVec = 16 / int(sizeof(T));
  int64_t rows = 1;
  for (int64_t s : p.sizes) rows *= s;
  const auto aligned16 = [](const void* data, const auto& strides) {
    if (reinterpret_cast<uintptr_t>(data) % 16) return false;
    for (int64_t s : strides)
      if ((s * int64_t(sizeof(T))) % 16) return false;
    return true;
  };
  bool vectorizable = p.head_dim % kVec == 0;
  for (int i = 0; i < 2; ++i)
    vectorizable = vectorizable && aligned16(p.x[i], p.x_strides[i]) && aligned16(p.out[i], p.out_strides[i]);
  const auto launch = [&]<int VEC>() {
    const int64_t vecs_per_row = p.head_dim / VEC, items_per_tensor = rows * vecs_per_row;  // < 2^31 (guards)
    if (items_per_tensor > 0)
      launch_vec.template operator()<VEC>(uint32_t(vecs_per_row), uint32_t(items_per_tensor));
  };
  if (vectorizable)
    launch.template operator()<kVec>();
  else
    launch.template operator()<2>();
}

}  // namespace dfuse::detail
