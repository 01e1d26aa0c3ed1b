// diffusion.rope_rotate_half: the CUDA kernel. Contract and arithmetic: ops/rope/rope_rotate_half.h.
//
// A work item is one unit of columns of a group of heads: the rows along an outer dim over which cos and sin
// broadcast (the heads of a token, rope_row_groups.cuh), up to kGroupHeads of them, or one row where the tables
// broadcast over none. A rotary unit is VEC columns i.. of the first half and the VEC columns i + R/2.. of the
// second half: the item loads their cos/sin vectors once, then walks its heads two at a time (both heads' four
// vectors in flight together, each read before any is written, so in place is safe). A tail unit copies VEC
// columns >= R of its heads, all their loads in flight together. The rotary items come first, then the tail's (two
// ranges, so that a warp takes one kind: warps of both ran both paths one after the other, partial rotary slower
// than full). In each range the unit index runs fastest from item to item, then the group, then the token, so a
// token's cos/sin row is fetched from HBM once and served from L1/L2 to its other groups. Groups of 8 heads (the
// table vectors held over four pairs: Wan 2.1 427 -> 403 us, sessions 17-18) where that leaves at least
// kItemsPerThread items per resident thread; else groups of 2, whose kernel (64 registers, every load of an item
// issued together) keeps small inputs' latency covered. 16-bit x with fp32 opmath from kFlatMinElements up takes
// the flat form instead, torch.compile's layout: one item per thread, one head's 8 bytes of columns, no grid stride
// and no table reuse in registers (the other heads of its token read the same table bytes from L1/L2). On the
// H100 its warps in flight buy more than the groups' reuse (Wan 2.1 573 -> 534 us, session 34); on the H200 both
// forms run Wan 2.1 at 402-403 us, and the flat form loses 3% at FLUX.1 (session 30), below the threshold.
// VEC = 16 bytes of x when every x/out/table row is 16-byte aligned and R/2 and D - R are multiples of VEC, else 1.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/rowwise.cuh"
#include "cuda/vector_io.cuh"
#include "ops/rope/rope_launch.cuh"
#include "ops/rope/rope_rotate_half.h"
#include "ops/rope/rope_row_groups.cuh"

namespace dfuse::detail {
namespace {

constexpr int kMaxGroupHeads = 8;
constexpr int64_t kItemsPerThread = 4;
constexpr int64_t kFlatMinElements = int64_t(1) << 26;  // between FLUX.1's 14M elements and Wan 2.1's 387M
constexpr int kFlatBytes = 8;                           // bytes of x per vector in the flat form

// The cos/sin vectors of a rotary unit: columns i.. (lo) and i + R/2.. (hi).
template <typename Table, int VEC>
struct RotaryUnitTables {
  Table c_lo[VEC], c_hi[VEC], s_lo[VEC], s_hi[VEC];
};

// The tables of the rotary unit at column col of the rows at idx, into t (filled in place: returned by value,
// ptxas spread the 2-head kernel's loads among its arithmetic, 5% slower at FLUX.1 on the H100, session 34).
template <typename Table, int VEC>
__device__ __forceinline__ void load_unit_tables(const RopeRotateHalfParams& p, const uint32_t (&idx)[3],
                                                 uint32_t col, uint32_t half, RotaryUnitTables<Table, VEC>& t) {
  const Table* cos = static_cast<const Table*>(p.cos.data) + p.cos.offset(idx) + col;
  const Table* sin = static_cast<const Table*>(p.sin.data) + p.sin.offset(idx) + col;
  load_elems<Table, VEC>(cos, t.c_lo);
  load_elems<Table, VEC>(cos + half, t.c_hi);
  load_elems<Table, VEC>(sin, t.s_lo);
  load_elems<Table, VEC>(sin + half, t.s_hi);
}

// kHeads (1 or 2) heads (rows x and x + x_step) of one rotary unit: all their vectors loaded, then rotated and
// stored. For a group's odd last head the caller passes x_step = out_step = 0: the second head repeats the first
// (its same bits stored twice), so the loads and stores stay one branch-free sequence.
template <typename T, typename Table, RopeMath M, int VEC, int kHeads>
__device__ __forceinline__ void rotate_heads(const T* x, T* out, int64_t x_step, int64_t out_step, uint32_t half,
                                             const RotaryUnitTables<Table, VEC>& t) {
  Pack<T, VEC> lo[kHeads], hi[kHeads];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    lo[h].load(x + h * x_step);
    hi[h].load(x + h * x_step + half);
  }
  Pack<T, VEC> r_lo[kHeads], r_hi[kHeads];
#pragma unroll
  for (int e = 0; e < VEC; ++e) {  // the heads element by element: the second head's loads cannot wait
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      const float x1 = Storage<T>::load(lo[h].get(e)), x2 = Storage<T>::load(hi[h].get(e));
      r_lo[h].set(e, rotate_half_element<T, M>(x1, -x2, Storage<Table>::load(t.c_lo[e]),
                                               Storage<Table>::load(t.s_lo[e])));
      r_hi[h].set(e, rotate_half_element<T, M>(x2, x1, Storage<Table>::load(t.c_hi[e]),
                                               Storage<Table>::load(t.s_hi[e])));
    }
  }
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    r_lo[h].store_global(out + h * out_step);
    r_hi[h].store_global(out + h * out_step + half);
  }
}

// The `heads` (<= kN) heads of one tail unit copied: kN loads in flight together (past `heads` they repeat the
// last head), then the `heads` stores.
template <typename T, int VEC, int kN>
__device__ __forceinline__ void copy_heads(const T* x, T* out, int64_t x_head, int64_t out_head, int heads) {
  Pack<T, VEC> v[kN];
#pragma unroll
  for (int h = 0; h < kN; ++h) v[h].load(x + (h < heads ? h : heads - 1) * x_head);
#pragma unroll
  for (int h = 0; h < kN; ++h)
    if (h < heads) v[h].store_global(out + h * out_head);
}

// Item `item` of the rotary units, then the tail's: its unit (returned), the indices of its group's first row
// and the group's rows (idx, heads), x and out at that row; `rotary` false for a tail item. Out parameters, as in
// load_unit_tables: a returned struct changed the SASS of 16 of the grouped kernels (session 34).
template <typename T>
__device__ __forceinline__ uint32_t locate_item(const RopeRotateHalfParams& p, const RowGroupItems& pairs,
                                                const RowGroupItems& tail, uint32_t item, uint32_t (&idx)[3],
                                                int& heads, bool& rotary, const T*& x, T*& out) {
  rotary = item < pairs.total;
  const uint32_t unit = rotary ? pairs.split(item, idx, heads) : tail.split(item - pairs.total, idx, heads);
  x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
  out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  return unit;
}

template <typename T, typename Table, RopeMath M, int VEC, int kGroupHeads>
__global__ void __launch_bounds__(kRopeThreads)
    rope_rotate_half_kernel(RopeRotateHalfParams p, RowGroupItems pairs, RowGroupItems tail) {
  const uint32_t half = uint32_t(p.rot_dim / 2);
  const int64_t x_head = p.x.stride[2], out_head = p.out.stride[2];
  for (uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x; item < pairs.total + tail.total;
       item += gridDim.x * kRopeThreads) {
    uint32_t idx[3];
    int heads;
    bool rotary;
    const T* x;
    T* out;
    const uint32_t unit = locate_item(p, pairs, tail, item, idx, heads, rotary, x, out);
    if (!rotary) {  // the untouched tail
      const uint32_t col = uint32_t(p.rot_dim) + unit * VEC;
      copy_heads<T, VEC, kGroupHeads>(x + col, out + col, x_head, out_head, heads);
      continue;
    }
    const uint32_t col = unit * VEC;
    RotaryUnitTables<Table, VEC> t;
    load_unit_tables(p, idx, col, half, t);
    x += col;
    out += col;
    // The pairs' loop kept rolled for fp32 opmath (its table vectors then load in one batch before the loop:
    // Wan 2.1 417 -> 403 us, session 18 run 1) and unrolled for the storage dtype's longer arithmetic (rolled
    // there: HunyuanVideo rot 64 138 -> 173 us).
    constexpr int kPairsUnrolled = M == RopeMath::fp32_opmath ? 1 : kGroupHeads / 2;
#pragma unroll kPairsUnrolled
    for (int h = 0; h < kGroupHeads; h += 2) {
      if (h >= heads) break;
      const bool two = h + 1 < heads;
      rotate_heads<T, Table, M, VEC, 2>(x + h * x_head, out + h * out_head, two ? x_head : 0,
                                         two ? out_head : 0, half, t);
    }
  }
}

// The flat form: item = one unit of one row (pairs and tail numbered as in the grouped kernel, groups of one row),
// one per thread.
template <typename T, typename Table, RopeMath M, int VEC>
__global__ void __launch_bounds__(kRopeThreads)
    rope_rotate_half_flat_kernel(RopeRotateHalfParams p, RowGroupItems pairs, RowGroupItems tail) {
  const uint32_t item = blockIdx.x * kRopeThreads + threadIdx.x;
  if (item >= pairs.total + tail.total) return;
  uint32_t idx[3];
  int heads;
  bool rotary;
  const T* x;
  T* out;
  const uint32_t unit = locate_item(p, pairs, tail, item, idx, heads, rotary, x, out);
  if (!rotary) {
    const uint32_t col = uint32_t(p.rot_dim) + unit * VEC;
    copy_heads<T, VEC, 1>(x + col, out + col, 0, 0, 1);
    return;
  }
  const uint32_t half = uint32_t(p.rot_dim / 2), col = unit * VEC;
  RotaryUnitTables<Table, VEC> t;
  load_unit_tables(p, idx, col, half, t);
  rotate_heads<T, Table, M, VEC, 1>(x + col, out + col, 0, 0, half, t);
}

// p's items of VEC-column units over groups of at most max_group_rows rows that share their tables: the rotary
// units, then the tail's (copy_tail), on a copy of p whose geometry and operands are relabeled for them.
struct RotateHalfItems {
  RopeRotateHalfParams p;
  RowGroupItems pairs, tail;
  int64_t total() const { return int64_t(pairs.total) + tail.total; }
};

template <int VEC>
RotateHalfItems rotate_half_items(const RopeRotateHalfParams& p, bool copy_tail, int max_group_rows) {
  RotateHalfItems items{p, {}, {}};
  items.pairs = group_rows_by_tables(items.p.geom, {&items.p.cos, &items.p.sin}, {&items.p.x, &items.p.out},
                                     p.rot_dim / 2 / VEC, max_group_rows);  // >= 1 unit: the guards keep rot_dim >= 2
  const int64_t tail_units = copy_tail ? (p.geom.cols - p.rot_dim) / VEC : 0;
  if (tail_units > 0) items.tail = items.pairs.with_units(tail_units);
  return items;
}

template <typename T, typename Table, RopeMath M, int VEC>
void launch(const RopeRotateHalfParams& p, bool copy_tail, cudaStream_t stream) {
  if (p.geom.rows() == 0) return;
  // rows * units per row < 2^31: the guards bound x's elements
  if constexpr (VEC > 1 && M == RopeMath::fp32_opmath && sizeof(T) == 2) {
    if (p.geom.rows() * p.geom.cols >= kFlatMinElements) {
      constexpr int kFlatVec = kFlatBytes / int(sizeof(T));
      const RotateHalfItems items = rotate_half_items<kFlatVec>(p, copy_tail, 1);
      rope_rotate_half_flat_kernel<T, Table, M, kFlatVec>
          <<<unsigned((items.total() + kRopeThreads - 1) / kRopeThreads), kRopeThreads, 0, stream>>>(
              items.p, items.pairs, items.tail);
      DFUSE_CUDA_CHECK_LAUNCH();
      return;
    }
  }
  const auto launch_groups = [&]<int kGroupHeads>(bool only_if_enough_items) {
    constexpr auto kKernel = rope_rotate_half_kernel<T, Table, M, VEC, kGroupHeads>;
    const RotateHalfItems items = rotate_half_items<VEC>(p, copy_tail, kGroupHeads);
    if (only_if_enough_items &&
        (items.pairs.group_rows <= 2 ||
         items.total() < kItemsPerThread * resident_blocks<kKernel>(p.device, kRopeThreads) * kRopeThreads))
      return false;
    launch_rope_kernel<kKernel>(p.device, items.total(), 1, stream, items.p, items.pairs, items.tail);
    return true;
  };
  if (!launch_groups.template operator()<kMaxGroupHeads>(true)) launch_groups.template operator()<2>(false);
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
