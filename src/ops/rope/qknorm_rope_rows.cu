// The QK-norm + RoPE rows: the CUDA kernels. Arithmetic: ops/rope/qknorm_rope_rows.h.
//
// Two forms, the same results bit for bit. blockIdx.y picks the part (q, k, ...); blocks grid-stride over
// its heads; every element of a head is read before any is written, so the destination may be x itself.
// - Vectorized (every row operand 16-byte aligned, the whole head rotated; the common case): half a warp
//   per head, eight elements per lane, described below qknorm_rope_kernel.
// - General: one warp per head (D = 128 K): lane l holds elements 4(l + 32k) .. 4(l + 32k) + 3, the
//   layout of cuda/rms_norm_stats.cuh's warp reductions, which give the head's rstd / inverse RMS in the
//   eager chain's order. Interleaved pairs lie inside a lane's four elements. For rotate-half the
//   normalized head is staged in shared memory (one head per warp) so that each lane finds the partner
//   R/2 away, whatever R.
// The ops' CUDA entries (one launch each) are registered at the end of this file.
#include <algorithm>
#include <numeric>
#include <type_traits>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rms_norm_stats.cuh"
#include "cuda/rowwise.cuh"
#include "ops/rope/head_groups.h"
#include "ops/rope/qknorm_rope_rows.h"
#include "ops/rope/rope_launch.cuh"

namespace dfuse::detail {
namespace {

constexpr int kWarps = kRopeThreads / 32;

template <typename T, typename Table, RopeMath M, RopePairing P, int K>
__global__ void __launch_bounds__(kRopeThreads) qknorm_rope_kernel(QkNormRopeLaunch launch) {
  __shared__ float staged[P == RopePairing::rotate_half ? kWarps : 1][128 * K];
  const QkNormRopeRows& p = launch.part[blockIdx.y];
  const RmsNormRowsParams& n = p.norm;
  const uint32_t rows = uint32_t(n.rows.geom.rows());  // < 2^31 / 128: the guards bound the elements
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const T* weight = static_cast<const T*>(n.weight);
  const int rot = int(p.rot_dim);
  for (uint32_t row = blockIdx.x * kWarps + warp; row < rows; row += gridDim.x * kWarps) {
    uint32_t idx[3];
    n.rows.geom.split(row, idx);
    const T* x = static_cast<const T*>(n.rows.in[0].data) + n.rows.in[0].offset(idx);
    T* out = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx);
    float v[K][4];
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) v[k][i] = Storage<T>::load(x[4 * (lane + 32 * k) + i]);
    const float inv = n.chain == RmsNormChain::torch_rms_norm ? warp_torch_rms_norm_rstd<K>(v, n.eps)
                                                              : warp_decomposed_inv_rms<K>(v, n.mean_factor, n.eps);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = 4 * (lane + 32 * k) + i;
        v[k][i] = qknorm_rope_normalized<T>(p, v[k][i], inv, weight ? Storage<T>::load(weight[e]) : 1.0f);
      }
    const Table* cos = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx);
    const Table* sin = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx);
    if constexpr (P == RopePairing::interleaved_pairs) {  // R = D: every element is rotated
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; i += 2) {
          const int e = 4 * (lane + 32 * k) + i;
          const auto pair = rope_interleaved_pair<T>(v[k][i], v[k][i + 1], Storage<Table>::load(cos[e]),
                                                     Storage<Table>::load(cos[e + 1]), Storage<Table>::load(sin[e]),
                                                     Storage<Table>::load(sin[e + 1]));
          out[e] = pair.even;
          out[e + 1] = pair.odd;
        }
    } else {
      float* head = staged[warp];
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; ++i) head[4 * (lane + 32 * k) + i] = v[k][i];
      __syncwarp();
      const auto value = [head](int e) { return head[e]; };
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int e = 4 * (lane + 32 * k) + i;
          out[e] = e >= rot ? Storage<T>::store(v[k][i])  // the normalized tail
                            : qknorm_rotate_half_output<T, M>(value, e, rot, Storage<Table>::load(cos[e]),
                                                              Storage<Table>::load(sin[e]));
        }
      __syncwarp();  // the next head reuses the staging row
    }
    if (p.copies) {
      const T* src = static_cast<const T*>(p.copy_src.data) + p.copy_src.offset(idx);
      T* dst = static_cast<T*>(p.copy_dst.data) + p.copy_dst.offset(idx);
#pragma unroll
      for (int k = 0; k < K; ++k)
#pragma unroll
        for (int i = 0; i < 4; ++i) dst[4 * (lane + 32 * k) + i] = src[4 * (lane + 32 * k) + i];
    }
  }
}

// ---- the vectorized form: half a warp per group of a token's heads, 16-byte accesses ------------------------
//
// Lane j of a half-warp holds elements 8j .. 8j + 7 of each 128-element half k of a head, and the
// statistics come from cuda/rms_norm_stats.cuh's half-warp functions (the warp form's bits). The launcher
// moves the outer dim along which cos and sin broadcast (the heads of a token) to outer dim 2; a
// half-warp's work item is a group of up to max_group_heads consecutive heads along it (ops/rope/head_groups.h),
// whose tables it loads once, and whose heads it takes R at a time, all loaded before any is reduced. The
// weight is loaded once per thread; every access is 16 bytes. Taken when every row operand allows 16-byte
// accesses and the whole head is rotated (interleaved pairs, or rotate-half with R = D): the partner R/2 away
// is in lane j ^ 8 (D = 128) or in the lane's other half (D = 256). Without such a dim a group is one head.
struct HeadGroupLaunch {
  QkNormRopeLaunch rows;                            // outer dim 2: the heads that share a token's tables
  uint32_t group_heads[kQkNormRopeMaxParts] = {};   // heads per group (the last may have fewer)
  uint32_t groups_per_token[kQkNormRopeMaxParts] = {};
  uint32_t items[kQkNormRopeMaxParts] = {};         // groups of the part
};

// Output of one head from its normalized values v (lane j's elements 128k + 8j ..) and its tables c, s:
// the RoPE, then the stores, where `writes`. Every lane of the warp calls it (the partner shuffle).
template <typename T, RopeMath M, RopePairing P, int K>
__device__ __forceinline__ void qknorm_rope_vec_output(const QkNormRopeRows& p, const float (&v)[K][kLaneElements],
                                                       const float (&c)[K][kLaneElements],
                                                       const float (&s)[K][kLaneElements], int64_t out_offset,
                                                       bool writes) {
  constexpr int kVec = 16 / sizeof(T);
  const int j = threadIdx.x % 16;
  T* out = static_cast<T*>(p.norm.rows.out.data) + out_offset;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    Pack<T, kVec> result[kLaneElements / kVec];
#pragma unroll
    for (int e = 0; e < kLaneElements; ++e) {
      T r;
      if constexpr (P == RopePairing::interleaved_pairs) {
        const int even = e & ~1;
        const auto pair = rope_interleaved_pair<T>(v[k][even], v[k][even + 1], c[k][even], c[k][even + 1],
                                                   s[k][even], s[k][even + 1]);
        r = e % 2 ? pair.odd : pair.even;
      } else {
        float partner;
        if constexpr (K == 1) {
          const float other = __shfl_xor_sync(0xffffffffu, v[0][e], 8, 16);
          partner = j < 8 ? -other : other;
        } else {
          partner = k == 0 ? -v[1][e] : v[0][e];
        }
        r = rotate_half_element<T, M>(v[k][e], partner, c[k][e], s[k][e]);
      }
      result[e / kVec].set(e % kVec, r);
    }
    if (writes)
#pragma unroll
      for (int h = 0; h < kLaneElements / kVec; ++h) result[h].store_global(out + 128 * k + h * kVec);
  }
}

// Register bounds: D = 128 at 80 (three blocks per SM: its four 16-bit heads in flight spilled at 64), D = 256
// at 128 (two blocks).
template <typename T, typename Table, RopeMath M, RopePairing P, int K>
__global__ void __launch_bounds__(kRopeThreads, K == 1 ? 3 : 2)
    qknorm_rope_head_group_kernel(HeadGroupLaunch launch) {
  constexpr int R = half_warp_rows_in_flight<T>(K);  // heads loaded before any is reduced
  const uint32_t part = blockIdx.y;
  const QkNormRopeRows& p = launch.rows.part[part];
  const RmsNormRowsParams& n = p.norm;
  const RowOperand &in = n.rows.in[0], &out = n.rows.out;
  const uint32_t items = launch.items[part], group = launch.group_heads[part];
  const uint32_t groups = launch.groups_per_token[part], heads = uint32_t(n.rows.geom.outer[2]);
  const uint32_t tokens_inner = uint32_t(n.rows.geom.outer[1]);
  const int64_t first = kLaneElements * (threadIdx.x % 16);
  LaneHead<T> weight[K];  // held in T (fewer registers); read only where the chain has a weight
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (n.weight)
      weight[k].load(static_cast<const T*>(n.weight) + 128 * k + first);
    else
      weight[k].zero();
  }
  // Both halves of a warp take items warp_first and warp_first + 1 (half_warp_row: a half given an item past
  // the last redoes warp_first's and writes nothing; the shuffles span the warp).
  for (uint32_t warp_first = (blockIdx.x * kRopeThreads + threadIdx.x) / 32 * 2; warp_first < items;
       warp_first += gridDim.x * (kRopeThreads / 16)) {
    bool item_writes;
    const uint32_t item = half_warp_row(warp_first, 0, items, item_writes);
    const uint32_t token = item / groups, h0 = item % groups * group, h_end = min(heads, h0 + group);
    const uint32_t idx[3] = {token / tokens_inner, token % tokens_inner, h0};
    float c[K][kLaneElements], s[K][kLaneElements];
    const Table* cos = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx) + first;
    const Table* sin = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx) + first;
#pragma unroll
    for (int k = 0; k < K; ++k) {
      load_as_floats(cos + 128 * k, c[k]);
      load_as_floats(sin + 128 * k, s[k]);
    }
    const T* x = static_cast<const T*>(in.data) + in.offset(idx) + first;
    const int64_t out_first = out.offset(idx) + first;
    // Every half takes ceil(group / R) steps (the same count); a slot past its group's last head redoes h0.
    for (uint32_t h = h0; h < h0 + group; h += R) {
      int64_t head[R];
      bool writes[R];
      LaneHead<T> packed[R][K];
#pragma unroll
      for (int b = 0; b < R; ++b) {
        const bool inside = h + b < h_end;
        writes[b] = item_writes && inside;
        head[b] = inside ? int64_t(h + b - h0) : 0;
#pragma unroll
        for (int k = 0; k < K; ++k) packed[b][k].load(x + head[b] * in.stride[2] + 128 * k);
      }
      // The step's arithmetic, specialized on the chain and on the rounding before the RoPE (a runtime flag
      // there costs a register move per element).
      const auto step = [&](auto element, auto round_norm) {
#pragma unroll
        for (int b = 0; b < R; ++b) {
          float v[K][kLaneElements];
          lane_floats<T>(packed[b], v);
          const float inv = half_warp_rms_norm_inv<K>(n, element, v);
#pragma unroll
          for (int k = 0; k < K; ++k)
#pragma unroll
            for (int e = 0; e < kLaneElements; ++e) {
              const float w = decltype(element)::kHasWeight ? Storage<T>::load(weight[k].get(e)) : 1.0f;
              v[k][e] = qknorm_rope_normalized<T>(element, round_norm, v[k][e], inv, w);
            }
          qknorm_rope_vec_output<T, M, P, K>(p, v, c, s, out_first + head[b] * out.stride[2], writes[b]);
          if (p.copies && writes[b]) {
            uint32_t hidx[3] = {idx[0], idx[1], h0 + uint32_t(head[b])};
            const T* src = static_cast<const T*>(p.copy_src.data) + p.copy_src.offset(hidx) + first;
            T* dst = static_cast<T*>(p.copy_dst.data) + p.copy_dst.offset(hidx) + first;
#pragma unroll
            for (int k = 0; k < K; ++k) copy_elements<kLaneElements>(src + 128 * k, dst + 128 * k);
          }
        }
      };
      with_rms_norm_element<T>(n, [&](auto element) {
        if constexpr (M == RopeMath::storage_dtype)  // the one-rounding form is fp32-opmath only (the guards)
          step(element, std::true_type{});
        else if (p.round_norm)
          step(element, std::true_type{});
        else
          step(element, std::false_type{});
      });
    }
  }
}

// Moves outer dim `a` of every row operand of `p` to outer dim 2 (the others keep their order): rows are
// independent, so any order of the outer dims gives the same results.
void move_outer_dim_last(QkNormRopeRows& p, int a) {
  const auto rotate = [a](int64_t (&d)[3]) {
    const int64_t moved = d[a];
    for (int i = a; i < 2; ++i) d[i] = d[i + 1];
    d[2] = moved;
  };
  rotate(p.norm.rows.geom.outer);
  for (RowOperand* op : {&p.norm.rows.in[0], &p.norm.rows.out, &p.cos, &p.sin, &p.copy_src, &p.copy_dst})
    rotate(op->stride);
}

// The launch of the head-group form: per part, the largest outer dim along which both tables broadcast
// moved last and cut into equal groups of at most max_group heads; without one, groups of one head (each
// with its own tables).
HeadGroupLaunch head_group_launch(const QkNormRopeLaunch& launch, int max_group) {
  HeadGroupLaunch g;
  g.rows = launch;
  for (int i = 0; i < launch.parts; ++i) {
    QkNormRopeRows& p = g.rows.part[i];
    const int64_t* outer = p.norm.rows.geom.outer;
    int axis = -1;
    for (int a = 0; a < 3; ++a)
      if (p.cos.stride[a] == 0 && p.sin.stride[a] == 0 && outer[a] > 1 && (axis < 0 || outer[a] > outer[axis]))
        axis = a;
    if (axis >= 0) move_outer_dim_last(p, axis);
    const HeadGroups cut = head_groups(outer[2], axis < 0 ? 1 : max_group);
    g.group_heads[i] = cut.group_heads;
    g.groups_per_token[i] = cut.groups_per_token;
    g.items[i] = uint32_t(outer[0] * outer[1] * cut.groups_per_token);
  }
  return g;
}

// Whether every part allows the vectorized form: the whole head rotated and every row operand (x, the
// destination, the copied rows, the tables, the weight) 16-byte aligned at every row.
bool vectorized_form_applies(const QkNormRopeLaunch& launch) {
  for (int i = 0; i < launch.parts; ++i) {
    const QkNormRopeRows& p = launch.part[i];
    const DType t = p.norm.rows.dtype;
    if (p.pairing == RopePairing::rotate_half && p.rot_dim != p.norm.rows.geom.cols) return false;
    if (!rows_aligned(p.norm.rows.in[0], t, 16) || !rows_aligned(p.norm.rows.out, t, 16)) return false;
    if (!rows_aligned(p.cos, p.table_dtype, 16) || !rows_aligned(p.sin, p.table_dtype, 16)) return false;
    if (p.norm.weight && reinterpret_cast<uintptr_t>(p.norm.weight) % 16) return false;
    if (p.copies && (!rows_aligned(p.copy_src, t, 16) || !rows_aligned(p.copy_dst, t, 16))) return false;
  }
  return true;
}

template <typename T, typename Table, RopeMath M, RopePairing P>
void launch_kernel(const QkNormRopeLaunch& launch, cudaStream_t stream) {
  int64_t rows = 0;
  for (int i = 0; i < launch.parts; ++i) rows = std::max(rows, launch.part[i].norm.rows.geom.rows());
  if (rows == 0) return;
  const bool d128 = launch.part[0].norm.rows.geom.cols == 128;
  const int device = launch.part[0].norm.rows.device;
  const auto parts = unsigned(launch.parts);
  if (vectorized_form_applies(launch)) {  // half a warp per group of heads
    const auto launch_groups = [&]<int K>() {
      constexpr auto kKernel = qknorm_rope_head_group_kernel<T, Table, M, P, K>;
      const auto items_of = [&](int max_group) {
        const HeadGroupLaunch g = head_group_launch(launch, max_group);
        return std::accumulate(g.items, g.items + launch.parts, int64_t(0));
      };
      const int64_t resident_half_warps = resident_blocks<kKernel>(device, kRopeThreads) * (kRopeThreads / 16);
      const HeadGroupLaunch groups = head_group_launch(launch, max_group_heads(items_of, resident_half_warps));
      const uint32_t items = *std::max_element(groups.items, groups.items + launch.parts);
      launch_rope_kernel<kKernel>(device, int64_t(items) * 16, parts, stream, groups);
    };
    if (d128)
      launch_groups.template operator()<1>();
    else
      launch_groups.template operator()<2>();
  } else if (d128) {  // a warp per head
    launch_rope_kernel<qknorm_rope_kernel<T, Table, M, P, 1>>(device, rows * 32, parts, stream, launch);
  } else {
    launch_rope_kernel<qknorm_rope_kernel<T, Table, M, P, 2>>(device, rows * 32, parts, stream, launch);
  }
}

template <typename T, typename Table, RopeMath M>
void launch_pairing(const QkNormRopeLaunch& launch, cudaStream_t stream) {
  if constexpr (M == RopeMath::fp32_opmath) {
    if (launch.part[0].pairing == RopePairing::interleaved_pairs)
      return launch_kernel<T, Table, M, RopePairing::interleaved_pairs>(launch, stream);
  }
  launch_kernel<T, Table, M, RopePairing::rotate_half>(launch, stream);
}

}  // namespace

// Every part of a launch shares the dtype, table dtype, math, pairing and head dim (the ops' guards);
// the other fields are per part.
void qknorm_rope_cuda(const QkNormRopeLaunch& launch, Stream stream) {
  const QkNormRopeRows& first = launch.part[0];
  const DeviceGuard guard(first.norm.rows.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(first.norm.rows.dtype, "QK-norm + RoPE CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 4) {  // fp32: both maths are the same roundings
      launch_pairing<T, float, RopeMath::fp32_opmath>(launch, s);
    } else {
      if (first.math == RopeMath::storage_dtype)
        launch_pairing<T, T, RopeMath::storage_dtype>(launch, s);
      else if (first.table_dtype == DType::f32)
        launch_pairing<T, float, RopeMath::fp32_opmath>(launch, s);
      else
        launch_pairing<T, T, RopeMath::fp32_opmath>(launch, s);
    }
  });
}

// The CUDA entries of the ops built on these rows (their guards and host entries: the ops' .cpp files).
namespace {
void cuda_entry(const QkNormRopeLaunch& launch, Stream stream) { qknorm_rope_cuda(launch, stream); }
}  // namespace
DFUSE_REGISTER_ENTRY(cuda, "fused_inplace_qknorm_rope", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "fused_inplace_qknorm_rope_one_rounding", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "fused_qknorm_rope", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "fused_qknorm_rope_pack_kv", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "flux2_strided_qknorm_rope", &cuda_entry);
DFUSE_REGISTER_ENTRY(cuda, "flux2_qkv_epilogue", &cuda_entry);

}  // namespace dfuse::detail
