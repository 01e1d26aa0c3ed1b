// The joint-QKV epilogue's CUDA kernel (ops/rope/joint_qkv_epilogue.h), the CUDA entry of
// qwen_qkv_epilogue and hunyuan_qkv_rope_pack.
//
// One launch over the six parts. A warp takes a unit of up to kRowsPerWarp consecutive rows (heads)
// of one part; lane l holds elements 4l .. 4l + 3 of each row, the layout of
// cuda/rms_norm_stats.cuh's warp_decomposed_inv_rms (Reduce.cuh's 32 lanes of float4 over a row of
// 128). Every row of the unit is loaded before any is computed (several loads in flight per lane);
// then per row: the inverse RMS, the normalized elements rounded to T, the pairs (4l, 4l + 1) and
// (4l + 2, 4l + 3) rotated within the lane, one store. Rows of 4 elements per lane are 8-byte
// (bf16/f16) or 16-byte (f32) accesses and the tables' float4s 16-byte ones when every row of every
// operand is aligned to them, else element accesses.
#include <cstring>

#include "common/dispatch.h"
#include "common/rms_norm_arith.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rms_norm_stats.cuh"
#include "ops/rope/joint_qkv_epilogue.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

constexpr int kWarps = kRopeThreads / 32;
constexpr int kRowsPerWarp = 4;

// Unit u of the launch belongs to part i for start[i] <= u < start[i + 1].
struct JointQkvUnits {
  uint32_t start[kJointQkvParts + 1] = {};
};

// Four consecutive elements: one access of 4 * sizeof(U) bytes when VEC (the address aligned to it).
template <typename U, bool VEC>
__device__ __forceinline__ void load4(const U* p, U (&v)[4]) {
  if constexpr (VEC && sizeof(U) == 2) {
    const uint2 q = *reinterpret_cast<const uint2*>(p);
    memcpy(v, &q, sizeof(q));
  } else if constexpr (VEC && sizeof(U) == 4) {
    const uint4 q = *reinterpret_cast<const uint4*>(p);
    memcpy(v, &q, sizeof(q));
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = p[e];
  }
}

template <typename U, bool VEC>
__device__ __forceinline__ void store4(U* p, const U (&v)[4]) {
  if constexpr (VEC && sizeof(U) == 2) {
    uint2 q;
    memcpy(&q, v, sizeof(q));
    *reinterpret_cast<uint2*>(p) = q;
  } else if constexpr (VEC && sizeof(U) == 4) {
    uint4 q;
    memcpy(&q, v, sizeof(q));
    *reinterpret_cast<uint4*>(p) = q;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) p[e] = v[e];
  }
}

template <typename T, bool VEC>
__device__ __forceinline__ void finish_row(const JointQkvParams& p, const JointQkvPart& part, const uint32_t idx[3],
                                           int lane, T (&v)[4]) {
  using S = Storage<T>;
  const int col = 4 * lane;
  if (part.normalize) {
    float f[1][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) f[0][i] = S::load(v[i]);
    const float inv = warp_decomposed_inv_rms<1>(f, part.mean_factor, p.eps);
    const T* weight = static_cast<const T*>(part.weight);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      v[i] = S::store(decomposed_rms_norm_element<T>(f[0][i], inv, weight != nullptr,
                                                     weight ? S::load(weight[col + i]) : 1.0f));
  }
  if (part.rotation == PairRotation::none) return;
  float c[4], s[4];
  load4<float, VEC>(static_cast<const float*>(part.cos.data) + part.cos.offset(idx) + col, c);
  if (part.rotation == PairRotation::real_pairs)
    load4<float, VEC>(static_cast<const float*>(part.sin.data) + part.sin.offset(idx) + col, s);
#pragma unroll
  for (int e = 0; e < 4; e += 2) {
    const float x1 = S::load(v[e]), x2 = S::load(v[e + 1]);
    const RotatedPair<T> r = part.rotation == PairRotation::complex_mul
                                 ? qwen_complex_pair<T>(x1, x2, c[e], c[e + 1])
                                 : rope_interleaved_pair<T>(x1, x2, c[e], c[e + 1], s[e], s[e + 1]);
    v[e] = r.even;
    v[e + 1] = r.odd;
  }
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(kRopeThreads)
    joint_qkv_kernel(const __grid_constant__ JointQkvParams p, const __grid_constant__ JointQkvUnits u) {
  const int lane = threadIdx.x % 32;
  const uint32_t total = u.start[p.parts];
  for (uint32_t unit = blockIdx.x * kWarps + threadIdx.x / 32; unit < total; unit += gridDim.x * kWarps) {
    int pi = 0;
    while (unit >= u.start[pi + 1]) ++pi;
    const JointQkvPart& part = p.part[pi];
    const uint32_t first = (unit - u.start[pi]) * kRowsPerWarp;
    const uint32_t rows = min(uint32_t(kRowsPerWarp), uint32_t(part.geom.rows()) - first);
    uint32_t idx[kRowsPerWarp][3];
    T v[kRowsPerWarp][4];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      if (uint32_t(r) >= rows) break;
      part.geom.split(first + r, idx[r]);
      load4<T, VEC>(static_cast<const T*>(part.x.data) + part.x.offset(idx[r]) + 4 * lane, v[r]);
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      if (uint32_t(r) >= rows) break;
      finish_row<T, VEC>(p, part, idx[r], lane, v[r]);
      store4<T, VEC>(static_cast<T*>(part.out.data) + part.out.offset(idx[r]) + 4 * lane, v[r]);
    }
  }
}

bool vectorizable(const JointQkvParams& p) {
  const int row_bytes = 4 * int(dtype_size(p.dtype));
  for (int i = 0; i < p.parts; ++i) {
    const JointQkvPart& part = p.part[i];
    if (!rows_aligned(part.x, p.dtype, row_bytes) || !rows_aligned(part.out, p.dtype, row_bytes)) return false;
    if (part.rotation != PairRotation::none && !rows_aligned(part.cos, DType::f32, 16)) return false;
    if (part.rotation == PairRotation::real_pairs && !rows_aligned(part.sin, DType::f32, 16)) return false;
  }
  return true;
}

template <typename T, bool VEC>
void launch(const JointQkvParams& p, const JointQkvUnits& u, cudaStream_t stream) {
  const uint32_t total = u.start[p.parts];
  launch_rope_kernel<joint_qkv_kernel<T, VEC>>(p.device, int64_t(total) * 32, 1, stream, p, u);
}

}  // namespace

void joint_qkv_cuda(const JointQkvParams& p, Stream stream) {
  JointQkvUnits u;
  for (int i = 0; i < p.parts; ++i)
    u.start[i + 1] = u.start[i] + uint32_t((p.part[i].geom.rows() + kRowsPerWarp - 1) / kRowsPerWarp);
  if (u.start[p.parts] == 0) return;
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  const bool vec = vectorizable(p);
  dispatch_bf16_f16_f32(p.dtype, "joint qkv epilogue CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    if (vec)
      launch<T, true>(p, u, s);
    else
      launch<T, false>(p, u, s);
  });
}

}  // namespace dfuse::detail
