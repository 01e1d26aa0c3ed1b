// diffusion.ltx2_qknorm_split_rope: the CUDA kernel. Contract and arithmetic:
// ops/rope/ltx2_qknorm_split_rope.h.
//
// One block per token row of q or of k (persistent over the rows of both, q's and k's rows of one token
// side by side: side_row): the row of C = H * D elements is read once into shared memory (in T, whole
// VEC-element accesses), its rstd is folded in F.rms_norm's order (cuda/rms_norm_rows.cuh: aten's 128-thread
// vectorized order, or its 512-thread generic Welford order; LTX-2's norms are torch.nn.RMSNorm, the only
// chain compiled here), then each thread takes VEC columns i..i+VEC-1 of one head's first half: it normalizes
// them and their partners at i + D/2 (rounded to T as the chain's norm output is), loads VEC cos and sin
// values of (b, h, s), and writes both halves once. The row is staged before any output is written, so in
// place is safe. VEC = 16 bytes of T when D/2 is a multiple of it and every row (x, out, weight, tables per
// token and per head) is 16-byte aligned, else 1.
#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/resident_blocks.cuh"
#include "cuda/rms_norm_rows.cuh"
#include "cuda/vector_io.cuh"
#include "ops/rope/ltx2_qknorm_split_rope.h"

namespace dfuse::detail {
namespace {

// Columns i..i+VEC-1 of head h's halves (i < D/2) of the staged row, whose outer indices are idx; element: the
// chain's RmsNormElement (the chain and whether there is a weight fixed at compile time).
template <typename T, int VEC, typename Element>
__device__ __forceinline__ void split_rope_item(const Ltx2SplitRopeSide& s, Element element, const T* row, float inv,
                                                const uint32_t idx[3], int h, int i) {
  using S = Storage<T>;
  const RmsNormRowsParams& n = s.norm;
  const int half = int(s.half), e1 = h * 2 * half + i, e2 = e1 + half;
  Pack<T, VEC> w1, w2;
  if constexpr (Element::kHasWeight) {
    w1.load(static_cast<const T*>(n.weight) + e1);
    w2.load(static_cast<const T*>(n.weight) + e2);
  }
  float c[VEC], sn[VEC];
  load_elems<float, VEC>(static_cast<const float*>(s.cos.data) + s.cos.offset(idx) + h * s.cos_head_stride + i, c);
  load_elems<float, VEC>(static_cast<const float*>(s.sin.data) + s.sin.offset(idx) + h * s.sin_head_stride + i, sn);
  Pack<T, VEC> v1, v2, o1, o2;
  v1.load(row + e1);
  v2.load(row + e2);
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    const float w1e = Element::kHasWeight ? S::load(w1.get(e)) : 1.0f;
    const float w2e = Element::kHasWeight ? S::load(w2.get(e)) : 1.0f;
    const float x1 = S::load(S::store(element(S::load(v1.get(e)), inv, w1e)));
    const float x2 = S::load(S::store(element(S::load(v2.get(e)), inv, w2e)));
    const auto r = ltx2_split_rope_pair<T>(x1, x2, c[e], sn[e]);
    o1.set(e, r.even);
    o2.set(e, r.odd);
  }
  T* out = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx);
  o1.store_global(out + e1);
  o2.store_global(out + e2);
}

// The side (second: k) and row of the kernel's row g: rows 2t and 2t + 1 are q's and k's token t while both sides
// have tokens, the longer side's remaining tokens follow. Self-attention's k reads q's tables: with a token's two
// rows in flight together the second read finds the tables in L2. With q's rows all before k's, k re-read token t's
// tables S rows after q (at LTX-2's shape 6144 rows, some 200 MB of traffic later, four times L2's 50 MB): the
// 100 MB of tables came from HBM twice.
__device__ __forceinline__ uint32_t side_row(uint32_t g, uint32_t rows0, uint32_t rows1, bool& second) {
  const uint32_t paired = rows0 < rows1 ? rows0 : rows1;
  if (g < 2 * paired) {
    second = g % 2 == 1;
    return g / 2;
  }
  second = rows1 > rows0;
  return g - paired;
}

// Row r of side s by the block into the staged `row`: stage, rstd, the split RoPE of its items.
template <typename T, int kThreads, int VEC>
__device__ __forceinline__ void ltx2_qknorm_split_rope_row(const Ltx2SplitRopeSide& s, T* row, uint32_t r) {
  uint32_t idx[3];
  s.norm.rows.geom.split(r, idx);
  const T* x = static_cast<const T*>(s.norm.rows.in[0].data) + s.norm.rows.in[0].offset(idx);
  stage_row<T, kThreads, VEC, 4>(x, row, s.norm.rows.geom.cols);
  __syncthreads();
  const float inv = block_rms_norm_row_inv<T, kThreads, RmsNormChain::torch_rms_norm>(s.norm, row, r);
  // 32-bit items and head split: items = C / (2 VEC) < 2^31 (the guards bound x below 2^31 elements).
  const uint32_t vecs_per_head = uint32_t(s.half) / VEC, items = uint32_t(s.heads) * vecs_per_head;
  with_rms_norm_element_of<T, RmsNormChain::torch_rms_norm>(s.norm, [&](auto element) {
    for (uint32_t it = threadIdx.x; it < items; it += kThreads) {
      const uint32_t h = it / vecs_per_head;
      split_rope_item<T, VEC>(s, element, row, inv, idx, int(h), int(it - h * vecs_per_head) * VEC);
    }
  });
  __syncthreads();  // the next row overwrites the staged one
}

// Rows of both sides as side_row orders them (`sides` = 1: side 0 only). Each side has its own copy of the row
// code, which reads that side's parameters from the constant bank at fixed offsets (one copy on the side picked per
// row kept them in registers: 128 bytes of spills in bf16 at the 64-register bound).
// 128-thread blocks of 16-bit T at 8 per SM (64 registers; 6 at the 78 the compiler chose: ltx-2 105.3 -> 98.0
// us in bf16, session 12 run 2); f32 rows left to the compiler (the bound made one of them spill).
template <typename T, int kThreads, int VEC>
__global__ void __launch_bounds__(kThreads, kThreads == kRmsNormVecThreads && sizeof(T) == 2 ? 8 : 1)
    ltx2_qknorm_split_rope_kernel(Ltx2QkNormSplitRopeParams p, int sides) {
  extern __shared__ __align__(16) unsigned char staged[];
  T* row = reinterpret_cast<T*>(staged);
  const uint32_t rows0 = uint32_t(p.side[0].norm.rows.geom.rows());
  const uint32_t rows1 = sides > 1 ? uint32_t(p.side[1].norm.rows.geom.rows()) : 0u;
  for (uint32_t g = blockIdx.x; g < rows0 + rows1; g += gridDim.x) {
    bool second;
    const uint32_t r = side_row(g, rows0, rows1, second);
    if (second)
      ltx2_qknorm_split_rope_row<T, kThreads, VEC>(p.side[1], row, r);
    else
      ltx2_qknorm_split_rope_row<T, kThreads, VEC>(p.side[0], row, r);
  }
}

int64_t side_rows(const Ltx2QkNormSplitRopeParams& p, int first, int sides) {
  int64_t rows = 0;
  for (int i = first; i < first + sides; ++i) rows += p.side[i].norm.rows.geom.rows();
  return rows;
}

template <typename T, int kThreads, int VEC>
void launch(const Ltx2QkNormSplitRopeParams& p, int sides, cudaStream_t stream) {
  constexpr auto kernel = ltx2_qknorm_split_rope_kernel<T, kThreads, VEC>;
  const int64_t cols = std::max(p.side[0].norm.rows.geom.cols, sides > 1 ? p.side[1].norm.rows.geom.cols : 0);
  const size_t smem = size_t(cols) * sizeof(T);
  const int64_t rows = side_rows(p, 0, sides);
  if (rows == 0) return;
  const int64_t resident = resident_blocks<kernel>(p.side[0].norm.rows.device, kThreads, smem);
  kernel<<<unsigned(std::min(rows, resident)), kThreads, smem, stream>>>(p, sides);
  DFUSE_CUDA_CHECK_LAUNCH();
}

// 16-byte vectors when both halves of every head, the weight and the tables allow them.
template <typename T>
bool side_vectorizable(const Ltx2SplitRopeSide& s) {
  constexpr int kVec = 16 / sizeof(T);
  const bool weight_ok = !s.norm.weight || reinterpret_cast<uintptr_t>(s.norm.weight) % 16 == 0;
  const bool heads_ok = (s.cos_head_stride * 4) % 16 == 0 && (s.sin_head_stride * 4) % 16 == 0;
  return s.half % kVec == 0 && weight_ok && heads_ok && rowwise_vectorizable(s.norm.rows, 16) &&
         rows_aligned(s.cos, DType::f32, 16) && rows_aligned(s.sin, DType::f32, 16);
}

template <typename T, int kThreads>
void launch_vectorized_if_possible(const Ltx2QkNormSplitRopeParams& p, int sides, cudaStream_t stream) {
  bool vectorizable = true;
  for (int i = 0; i < sides; ++i) vectorizable = vectorizable && side_vectorizable<T>(p.side[i]);
  if (vectorizable)
    launch<T, kThreads, 16 / sizeof(T)>(p, sides, stream);
  else
    launch<T, kThreads, 1>(p, sides, stream);
}

template <typename T>
void launch_sides(const Ltx2QkNormSplitRopeParams& p, int sides, cudaStream_t stream) {
  if (p.side[0].norm.path == LayerNormPath::generic)
    launch_vectorized_if_possible<T, kLayerNormMomentsThreads>(p, sides, stream);
  else
    launch_vectorized_if_possible<T, kRmsNormVecThreads>(p, sides, stream);
}

void cuda_entry(const Ltx2QkNormSplitRopeParams& p, Stream stream) {
  for (const Ltx2SplitRopeSide& side : p.side)
    if (side.norm.chain != RmsNormChain::torch_rms_norm)
      throw Unsupported("diffusion.ltx2_qknorm_split_rope", "F.rms_norm chain",
                        "diffusion.ltx2_qknorm_split_rope: the CUDA kernel compiles F.rms_norm's statistics only");
  const DeviceGuard guard(p.side[0].norm.rows.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  dispatch_bf16_f16_f32(p.side[0].norm.rows.dtype, "ltx2_qknorm_split_rope CUDA kernel", [&](auto tag) {
    using T = decltype(tag);
    if (p.side[0].norm.path == p.side[1].norm.path) return launch_sides<T>(p, 2, s);
    // q and k take different F.rms_norm paths (block sizes): one launch each.
    Ltx2QkNormSplitRopeParams k;
    k.side[0] = p.side[1];
    launch_sides<T>(p, 1, s);
    launch_sides<T>(k, 1, s);
  });
}

DFUSE_REGISTER_ENTRY(cuda, "ltx2_qknorm_split_rope", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
