// The joint-QKV epilogue's CUDA kernels (ops/rope/joint_qkv_epilogue.h), the CUDA entry of
// qwen_qkv_epilogue and hunyuan_qkv_rope_pack.
//
// One launch over the six parts, in one of two forms with the same results bit for bit:
// - Head groups (the common case: every row of x, out and the tables 16-byte aligned, the tables broadcast
//   over a token's heads, the weights 16-byte aligned, one rotation kind): half a warp per work item, a group
//   of up to max_group_heads consecutive heads of one token (ops/rope/head_groups.h). Lane j holds elements
//   8j .. 8j + 7 of a head in 16-byte accesses (two for f32), the layout of cuda/rms_norm_stats.cuh's
//   half-warp statistics (the warp form's bits); the pairs (8j + 2p, 8j + 2p + 1) lie inside the lane. An
//   item loads the lane's weights and table values once (those its part has), then takes the group's heads
//   two at a time, both loaded before either is reduced: per head the inverse RMS, the normalized elements
//   rounded to T, the pairs rotated from the rounded values, one store (v: the loaded bits stored). The
//   parts' items form one range, each part's count rounded up to even, so that the two halves of a warp take
//   items of one part and run its shuffles together (half_warp_row: a half given the padding item redoes its
//   partner's and writes nothing); every half of a launch takes the same number of steps per item.
// - General (any other alignment): a warp takes a unit of up to kRowsPerWarp consecutive rows (heads) of
//   one part; lane l holds elements 4l .. 4l + 3 of each row, the layout of cuda/rms_norm_stats.cuh's
//   warp_decomposed_inv_rms (Reduce.cuh's 32 lanes of float4 over a row of 128). Every row of the unit is
//   loaded before any is computed (several loads in flight per lane); then per row: the inverse RMS, the
//   normalized elements rounded to T, the pairs (4l, 4l + 1) and (4l + 2, 4l + 3) rotated within the lane,
//   one store. Rows of 4 elements per lane are 8-byte (bf16/f16) or 16-byte (f32) accesses and the tables'
//   float4s 16-byte ones when every row of every operand is aligned to them, else element accesses.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/dispatch.h"
#include "common/rms_norm_arith.h"
#include "common/uint_divider.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rms_norm_stats.cuh"
#include "cuda/rowwise.cuh"
#include "cuda/vector_io.cuh"
#include "ops/rope/head_groups.h"
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
void launch(const JointQkvParams& p, cudaStream_t stream) {
  JointQkvUnits u;
  for (int i = 0; i < p.parts; ++i)
    u.start[i + 1] = u.start[i] + uint32_t((p.part[i].geom.rows() + kRowsPerWarp - 1) / kRowsPerWarp);
  launch_rope_kernel<joint_qkv_kernel<T, VEC>>(p.device, int64_t(u.start[p.parts]) * 32, 1, stream, p, u);
}

// ---- the head-group form: half a warp per group of a token's heads, 16-byte accesses ---------------------------

// The items of the head-group form. The guards give every part the first q's batch and head counts, so one cut
// of the heads serves all six; item i of part k is group i % groups_per_token of token i / groups_per_token
// (b * S + s, S = the part's outer dim 1).
struct JointQkvGroups {
  uint32_t start[kJointQkvParts + 1] = {};  // part k's items from start[k], their count rounded up to even
  uint32_t items[kJointQkvParts] = {};      // part k's items: B * S * groups_per_token
  UintDivider tokens[kJointQkvParts];       // part k's S
  UintDivider groups_per_token;
  uint32_t group_heads = 0, heads = 0;
};

// Pair (e, e + 1) of a lane's elements rotated by kRotation; x1, x2 the pair's values, c and s the lane's table
// values (complex_mul: c alone, the (re, im) pairs).
template <typename T, PairRotation kRotation>
__device__ __forceinline__ RotatedPair<T> rotated_pair(float x1, float x2, const float (&c)[kLaneElements],
                                                       const float (&s)[kLaneElements], int e) {
  if constexpr (kRotation == PairRotation::complex_mul)
    return qwen_complex_pair<T>(x1, x2, c[e], c[e + 1]);
  else
    return rope_interleaved_pair<T>(x1, x2, c[e], c[e + 1], s[e], s[e + 1]);
}

// Every rotated part of the launch rotates by kRotation. Register bound: 64 (four blocks per SM), as the D = 128
// QK-norm + RoPE head-group kernel.
template <typename T, PairRotation kRotation>
__global__ void __launch_bounds__(kRopeThreads, 4)
    joint_qkv_head_group_kernel(const __grid_constant__ JointQkvParams p, const __grid_constant__ JointQkvGroups g) {
  static_assert(kRotation != PairRotation::none, "the kernel of a launch's rotation kind");
  using S = Storage<T>;
  // Heads loaded before any is reduced: two, not half_warp_rows_in_flight's four 16-bit heads, which ran no faster
  // here at three blocks per SM and slower at four (spills; docs/BENCHMARKS.md, session 22 run 1).
  constexpr int R = 2;
  const int first = kLaneElements * (threadIdx.x % 16);
  const uint32_t items = g.start[p.parts];
  int k = 0;  // the part of item warp_first, which only grows
  // Both halves of a warp take items warp_first and warp_first + 1, of one part (its start and warp_first are
  // even).
  for (uint32_t warp_first = (blockIdx.x * kRopeThreads + threadIdx.x) / 32 * 2; warp_first < items;
       warp_first += gridDim.x * (kRopeThreads / 16)) {
    while (warp_first >= g.start[k + 1]) ++k;
    const JointQkvPart& part = p.part[k];
    bool item_writes;
    const uint32_t item = half_warp_row(warp_first - g.start[k], 0, g.items[k], item_writes);
    const uint32_t token = g.groups_per_token.div(item), batch = g.tokens[k].div(token);
    const uint32_t h0 = g.groups_per_token.mod(item, token) * g.group_heads, size = min(g.heads - h0, g.group_heads);
    const uint32_t idx[3] = {batch, g.tokens[k].mod(token, batch), h0};
    const T* x = static_cast<const T*>(part.x.data) + part.x.offset(idx) + first;
    T* out = static_cast<T*>(part.out.data) + part.out.offset(idx) + first;
    const int64_t x_step = part.x.stride[2], out_step = part.out.stride[2];
    const bool has_weight = part.weight != nullptr, rotates = part.rotation != PairRotation::none;
    LaneHead<T> weight;  // held in T (fewer registers); zeros without a weight, which the norm then ignores
    if (has_weight)
      weight.load(static_cast<const T*>(part.weight) + first);
    else
      weight.zero();
    float c[kLaneElements], s[kLaneElements];
    if (rotates) {  // the token's table row, broadcast over its heads
      load_as_floats(static_cast<const float*>(part.cos.data) + part.cos.offset(idx) + first, c);
      if constexpr (kRotation == PairRotation::real_pairs)
        load_as_floats(static_cast<const float*>(part.sin.data) + part.sin.offset(idx) + first, s);
    }
    // Every half takes ceil(group_heads / R) steps (the same shuffles); a slot past the group's last head holds
    // zeros and writes nothing.
    for (uint32_t h = 0; h < g.group_heads; h += R, x += R * x_step, out += R * out_step) {
      LaneHead<T> v[R];
      bool writes[R];
#pragma unroll
      for (int b = 0; b < R; ++b) {
        const bool inside = h + b < size;  // head h0 + h + b of the group
        writes[b] = item_writes && inside;
        if (inside)
          v[b].load(x + b * x_step);
        else
          v[b].zero();
      }
#pragma unroll
      for (int b = 0; b < R; ++b) {
        if (part.normalize) {  // v[b] becomes the normalized head rounded to T
          float f[1][kLaneElements];
          v[b].to_floats(f[0]);
          const float inv = half_warp_decomposed_inv_rms<1>(f, part.mean_factor, p.eps);
#pragma unroll
          for (int e = 0; e < kLaneElements; ++e)
            v[b].set(e, S::store(decomposed_rms_norm_element<T>(f[0][e], inv, has_weight, S::load(weight.get(e)))));
        }
        if (rotates)
#pragma unroll
          for (int e = 0; e < kLaneElements; e += 2) {
            const RotatedPair<T> r =
                rotated_pair<T, kRotation>(S::load(v[b].get(e)), S::load(v[b].get(e + 1)), c, s, e);
            v[b].set(e, r.even);
            v[b].set(e + 1, r.odd);
          }
        if (writes[b]) v[b].store(out + b * out_step);
      }
    }
  }
}

// The rotation kind of p's rotated parts (each op rotates by one): real_pairs if a part rotates by it, else
// complex_mul.
PairRotation rotation_kind(const JointQkvParams& p) {
  for (int i = 0; i < p.parts; ++i)
    if (p.part[i].rotation == PairRotation::real_pairs) return PairRotation::real_pairs;
  return PairRotation::complex_mul;
}

// Whether the head-group form takes p with its kernel for `rotation`: every rotated part rotates by it, every row of
// x and out and every table row starts on a 16-byte boundary, the tables broadcast over a token's heads (outer dim
// 2: one table row per group), every weight 16-byte aligned.
bool head_group_form_applies(const JointQkvParams& p, PairRotation rotation) {
  const auto table_rows = [](const RowOperand& t) { return rows_aligned(t, DType::f32, 16) && t.stride[2] == 0; };
  for (int i = 0; i < p.parts; ++i) {
    const JointQkvPart& part = p.part[i];
    if (!rows_aligned(part.x, p.dtype, 16) || !rows_aligned(part.out, p.dtype, 16)) return false;
    if (part.normalize && reinterpret_cast<uintptr_t>(part.weight) % 16) return false;
    if (part.rotation == PairRotation::none) continue;
    if (part.rotation != rotation || !table_rows(part.cos)) return false;
    if (rotation == PairRotation::real_pairs && !table_rows(part.sin)) return false;
  }
  return true;
}

// p has rows, so its head count (every part's) is at least 1.
JointQkvGroups joint_qkv_groups(const JointQkvParams& p, int max_group) {
  JointQkvGroups g;
  const int64_t heads = p.part[0].geom.outer[2];
  const HeadGroups cut = head_groups(heads, max_group);
  g.heads = uint32_t(heads);
  g.group_heads = cut.group_heads;
  g.groups_per_token = UintDivider(cut.groups_per_token);
  for (int i = 0; i < p.parts; ++i) {
    const int64_t* outer = p.part[i].geom.outer;
    g.items[i] = uint32_t(outer[0] * outer[1] * cut.groups_per_token);  // below 2^24: the outputs' extent guard
    g.start[i + 1] = g.start[i] + g.items[i] + g.items[i] % 2;
    g.tokens[i] = UintDivider(uint32_t(std::max<int64_t>(outer[1], 1)));
  }
  return g;
}

// Groups of max_group_heads (ops/rope/head_groups.h): at the ops' model shapes (24 heads; Qwen-Image 4096 + 512
// tokens, HunyuanVideo 32760 + 256) groups of 8 give 4.91 and 35.2 items per resident half-warp of the H200 (8448
// at four blocks per SM), 1.8% and 2.3% of their rounds' capacity idle.
template <typename T, PairRotation kRotation>
void launch_head_groups(const JointQkvParams& p, cudaStream_t stream) {
  constexpr auto kKernel = joint_qkv_head_group_kernel<T, kRotation>;
  const auto items_of = [&](int max_group) { return int64_t(joint_qkv_groups(p, max_group).start[p.parts]); };
  const int64_t resident_half_warps = resident_blocks<kKernel>(p.device, kRopeThreads) * (kRopeThreads / 16);
  const JointQkvGroups g = joint_qkv_groups(p, max_group_heads(items_of, resident_half_warps));
  const int64_t items = g.start[p.parts];  // one per half-warp
  launch_rope_kernel<kKernel>(p.device, items * 16, 1, stream, p, g);
}

}  // namespace

void joint_qkv_cuda(const JointQkvParams& p, Stream stream) {
  int64_t rows = 0;
  for (int i = 0; i < p.parts; ++i) rows += p.part[i].geom.rows();
  if (rows == 0) return;
  const DeviceGuard guard(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  const PairRotation rotation = rotation_kind(p);
  const bool grouped = head_group_form_applies(p, rotation), vec = vectorizable(p);
  dispatch_bf16_f16_f32(p.dtype, "joint qkv epilogue CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    if (grouped && rotation == PairRotation::real_pairs)
      launch_head_groups<T, PairRotation::real_pairs>(p, s);
    else if (grouped)
      launch_head_groups<T, PairRotation::complex_mul>(p, s);
    else if (vec)
      launch<T, true>(p, s);
    else
      launch<T, false>(p, s);
  });
}

}  // namespace dfuse::detail
