// The grid-stride loop of the data-movement kernels (strided copy, varlen row gather): the unit
// move, and the launch: a grid of at most eight 256-thread blocks per SM on the operands' device,
// and 32-bit index arithmetic whenever the index plus the loop's stride cannot wrap.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "dfuse/core/device.h"

namespace dfuse::detail {

// Units each thread loads before it stores any: one unit per thread in flight left a third of
// the copy bandwidth unused on the H200 (pack_qkv_destination_major at 70% of copy).
inline constexpr int kUnitsInFlight = 4;

// One unit to move: `bytes` (16, 8, 4, 2 or 1) from src to dst; a null src writes zero bytes
// (+0.0), the padding of the varlen scatter.
struct UnitMove {
  const uint8_t* src;
  uint8_t* dst;
  int bytes;
};

__device__ __forceinline__ uint4 load_unit(const UnitMove& m) {
  uint4 v{};
  if (m.src == nullptr) return v;
  switch (m.bytes) {
    case 16: return *reinterpret_cast<const uint4*>(m.src);
    case 8: *reinterpret_cast<uint64_t*>(&v) = *reinterpret_cast<const uint64_t*>(m.src); break;
    case 4: v.x = *reinterpret_cast<const uint32_t*>(m.src); break;
    case 2: v.x = *reinterpret_cast<const uint16_t*>(m.src); break;
    default: v.x = *m.src; break;
  }
  return v;
}

__device__ __forceinline__ void store_unit(const UnitMove& m, const uint4& v) {
  switch (m.bytes) {
    case 16: *reinterpret_cast<uint4*>(m.dst) = v; break;
    case 8: *reinterpret_cast<uint64_t*>(m.dst) = *reinterpret_cast<const uint64_t*>(&v); break;
    case 4: *reinterpret_cast<uint32_t*>(m.dst) = v.x; break;
    case 2: *reinterpret_cast<uint16_t*>(m.dst) = uint16_t(v.x); break;
    default: *m.dst = uint8_t(v.x); break;
  }
}

// Moves units 0 .. total-1, `locate(i)` saying where unit i comes from and goes. Each thread
// takes kUnitsInFlight units a grid stride apart (so a warp's accesses stay contiguous) and loads
// them all before storing.
template <typename Index, typename Locate>
__device__ __forceinline__ void move_units(Index total, Locate locate) {
  const Index step = Index(gridDim.x) * blockDim.x;
  for (Index base = Index(blockIdx.x) * blockDim.x + threadIdx.x; base < total; base += kUnitsInFlight * step) {
    UnitMove moves[kUnitsInFlight];
    uint4 values[kUnitsInFlight];
#pragma unroll
    for (int u = 0; u < kUnitsInFlight; ++u) {
      const Index i = base + Index(u) * step;
      if (i < total) {
        moves[u] = locate(i);
        values[u] = load_unit(moves[u]);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnitsInFlight; ++u)
      if (base + Index(u) * step < total) store_unit(moves[u], values[u]);
  }
}

// Calls launch(Index{}, blocks, threads, stream) with Index uint32_t or uint64_t; the callback
// launches its kernel<Index>.
template <typename Launch>
void launch_grid_stride(int device, int64_t total, Stream stream, Launch launch) {
  if (total == 0) return;
  const DeviceGuard guard(device);
  constexpr int kThreads = 256, kBlocksPerSm = 8;
  const int64_t resident = int64_t(multiprocessor_count(device)) * kBlocksPerSm;
  const int blocks = int(std::min<int64_t>((total + kThreads - 1) / kThreads, resident));
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (total <= int64_t(UINT32_MAX) - int64_t(blocks) * kThreads * kUnitsInFlight)
    launch(uint32_t{}, blocks, kThreads, s);
  else
    launch(uint64_t{}, blocks, kThreads, s);
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace dfuse::detail
