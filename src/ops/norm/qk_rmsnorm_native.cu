// diffusion.qk_rmsnorm_native / diffusion.qk_rmsnorm / diffusion.qk_rmsnorm_storage_dtype: the CUDA kernel, in
// two forms with the same bits.
// - Vectorized (every row and weight 16-byte aligned; the common case): half a warp per row
//   (half_warp_rows_in_flight of them loaded at once), lane j holding elements 128k + 8j .. + 7, the
//   statistics from cuda/rms_norm_stats.cuh's half-warp functions (the storage-dtype chain's, rows of 128,
//   below), 16-byte accesses, the weight loaded once per thread; blockIdx.y picks q or k, each part given up to
//   the resident block count (rope_launch.cuh, as qk_head_layernorm; half of it each ran FLUX.1 5-7% slower on
//   the H100, session 34).
// - General: a warp per row of q, then of k, in one grid: lane l reads chunks l, l + 32, ... (4 elements
//   each) of the row, the row's statistic comes from the warp functions, and the lane writes its
//   elements back.
// Contract and arithmetic: ops/norm/qk_rmsnorm_native.h.
#include <algorithm>
#include <string>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/resident_blocks.cuh"
#include "cuda/rms_norm_stats.cuh"
#include "cuda/rowwise.cuh"
#include "ops/rope/rope_launch.cuh"
#include "ops/norm/qk_rmsnorm_native.h"

namespace dfuse::detail {
namespace {

constexpr int kQkWarps = 8;  // rows per 256-thread block

// Four consecutive elements as float: one 8-byte (bf16, f16) or 16-byte (f32) access when `aligned`.
template <typename T>
__device__ __forceinline__ void load4(const T* p, bool aligned, float (&v)[4]) {
  using S = Storage<T>;
  if (aligned) {
    if constexpr (sizeof(T) == 4) {
      const float4 q = *reinterpret_cast<const float4*>(p);
      v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
    } else {
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      const uint32_t w[2] = {q.x, q.y};
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = S::load(T{uint16_t(w[e / 2] >> (16 * (e % 2)))});
    }
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = S::load(p[e]);
  }
}

template <typename T>
__device__ __forceinline__ void store4(T* p, bool aligned, const T (&v)[4]) {
  if (aligned) {
    if constexpr (sizeof(T) == 4) {
      *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      *reinterpret_cast<uint2*>(p) = make_uint2(uint32_t(v[0].bits) | (uint32_t(v[1].bits) << 16),
                                                uint32_t(v[2].bits) | (uint32_t(v[3].bits) << 16));
    }
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) p[e] = v[e];
  }
}

// Row r of p: lane l holds chunks l, l + 32, ... (elements 4(l + 32k) .. 4(l + 32k) + 3).
template <typename T, int K>
__device__ void qk_rmsnorm_row(const RmsNormRowsParams& p, bool aligned, uint32_t r) {
  using S = Storage<T>;
  uint32_t idx[3];
  p.rows.geom.split(r, idx);
  const T* x = static_cast<const T*>(p.rows.in[0].data) + p.rows.in[0].offset(idx);
  T* out = static_cast<T*>(p.rows.out.data) + p.rows.out.offset(idx);
  const T* weight = static_cast<const T*>(p.weight);
  const int lane = threadIdx.x % 32;
  float v[K][4];
#pragma unroll
  for (int k = 0; k < K; ++k) load4(x + 4 * (lane + 32 * k), aligned, v[k]);
  float inv = 0.0f;
  if (p.chain == RmsNormChain::torch_rms_norm) {
    inv = warp_torch_rms_norm_rstd<K>(v, p.eps);
  } else if (p.chain == RmsNormChain::diffusers_decomposed) {
    inv = warp_decomposed_inv_rms<K>(v, p.mean_factor, p.eps);
  } else if constexpr (K == 1) {
    inv = warp_storage_rms_norm_rstd<T>(v, p.mean_factor, p.eps);
  } else {
    __trap();  // the guards allow the storage-dtype chain for rows of 128 only
  }
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t j = 4 * (lane + 32 * k);
    float w[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    if (weight) load4(weight + j, aligned, w);
    T y[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) y[e] = rms_norm_normalized<T>(p, v[k][e], inv, w[e]);
    store4(out + j, aligned, y);
  }
}

template <typename T, int K>
__global__ void __launch_bounds__(kQkWarps * 32) qk_rmsnorm_kernel(QkRmsNormParams p, bool aligned) {
  const uint32_t q_rows = uint32_t(p.q.rows.geom.rows());
  const uint32_t rows = q_rows + uint32_t(p.k.rows.geom.rows());
  for (uint32_t r = blockIdx.x * kQkWarps + threadIdx.x / 32; r < rows; r += gridDim.x * kQkWarps) {
    if (r < q_rows)
      qk_rmsnorm_row<T, K>(p.q, aligned, r);
    else
      qk_rmsnorm_row<T, K>(p.k, aligned, r - q_rows);
  }
}

// warp_storage_rms_norm_rstd<T> on a row of 128 held as the half-warp layout (lane j: elements 8j .. 8j + 7).
// For 16-bit T lane j's elements are Reduce.cuh's lane j's one vector: its eight squares (rounded to T) summed
// in order, then shuffle-down 8 .. 1 over the 16 sums, the warp form's tree on the same values; for f32 lane j
// holds the warp form's chunks 2j and 2j + 1, whose sums half_warp_chunk_sum folds in the warp form's order.
template <typename T>
__device__ float half_warp_storage_rms_norm_rstd(const float (&x)[1][kLaneElements], float factor, float eps) {
  float s;
  if constexpr (sizeof(T) == 2) {
    s = 0.0f;
#pragma unroll
    for (int e = 0; e < kLaneElements; ++e) s = add_rn(s, storage_square<T>(x[0][e]));
#pragma unroll
    for (int off = 8; off >= 1; off /= 2) s = add_rn(s, __shfl_down_sync(0xffffffffu, s, off, 16));
    s = __shfl_sync(0xffffffffu, s, 0, 16);
  } else {
    float c[2] = {0.0f, 0.0f};
#pragma unroll
    for (int b = 0; b < 2; ++b)
#pragma unroll
      for (int i = 0; i < 4; ++i) c[b] = add_rn(c[b], storage_square<T>(x[0][4 * b + i]));
    s = half_warp_chunk_sum(c[0], c[1]);
  }
  return storage_rms_norm_rstd<T>(s, factor, eps);
}

// The row's statistic for the chain of `element`; the storage-dtype chain only for rows of 128 (K = 1, the guards).
template <typename T, int K, typename Element>
__device__ float half_warp_qk_rms_norm_inv(const RmsNormRowsParams& n, Element element,
                                           const float (&x)[K][kLaneElements]) {
  if constexpr (K == 1 && Element::kChain == RmsNormChain::storage_dtype)
    return half_warp_storage_rms_norm_rstd<T>(x, n.mean_factor, n.eps);
  else
    return half_warp_rms_norm_inv<K>(n, element, x);
}

// Register bound for rows of 128 and 256: 64 (four blocks per SM; unbounded, ptxas took 78 for four 16-bit rows in
// flight: three blocks).
template <typename T, int K>
__global__ void __launch_bounds__(kQkWarps * 32, K <= 2 ? 4 : 1)
    qk_rmsnorm_vec_kernel(QkRmsNormParams p, QkRowSplits splits) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kPacks = kLaneElements / kVec;
  const RmsNormRowsParams& n = blockIdx.y == 0 ? p.q : p.k;
  const uint32_t rows = uint32_t(n.rows.geom.rows());
  const int64_t first = kLaneElements * (threadIdx.x % 16);
  Pack<T, kVec> weight[K][kPacks];
  if (n.weight)
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int h = 0; h < kPacks; ++h) weight[k][h].load(static_cast<const T*>(n.weight) + 128 * k + first + h * kVec);
  constexpr int R = half_warp_rows_in_flight<T>(K);
  constexpr uint32_t kBlockRows = 2 * kQkWarps * R;
  for (uint32_t warp_first = blockIdx.x * kBlockRows + threadIdx.x / 32 * (2 * R); warp_first < rows;
       warp_first += gridDim.x * kBlockRows) {
    uint32_t idx[R][3];
    bool writes[R];
    LaneHead<T> packed[R][K];
    load_half_warp_rows<T>(splits.part[blockIdx.y], n.rows.in[0], warp_first, rows, first, idx, writes,
                           packed);
    with_rms_norm_element<T>(n, [&](auto element) {
#pragma unroll
      for (int b = 0; b < R; ++b) {
        float v[K][kLaneElements];
        lane_floats<T>(packed[b], v);
        const float inv = half_warp_qk_rms_norm_inv<T, K>(n, element, v);
        if (!writes[b]) continue;
        T* out = static_cast<T*>(n.rows.out.data) + n.rows.out.offset(idx[b]) + first;
#pragma unroll
        for (int k = 0; k < K; ++k)
#pragma unroll
          for (int h = 0; h < kPacks; ++h) {
            float y[kVec];
#pragma unroll
            for (int e = 0; e < kVec; ++e) {
              const float w = decltype(element)::kHasWeight ? Storage<T>::load(weight[k][h].get(e)) : 1.0f;
              y[e] = element(v[k][h * kVec + e], inv, w);
            }
            pack_rounded<T>(y).store_global(out + 128 * k + h * kVec);
          }
      }
    });
  }
}

// Whether the vectorized form applies: every row and weight 16-byte aligned.
bool vectorized_form_applies(const QkRmsNormParams& p) {
  for (const RmsNormRowsParams* n : {&p.q, &p.k}) {
    if (!rows_aligned(n->rows.in[0], n->rows.dtype, 16) || !rows_aligned(n->rows.out, n->rows.dtype, 16)) return false;
    if (n->weight && reinterpret_cast<uintptr_t>(n->weight) % 16) return false;
  }
  return true;
}

static_assert(kQkWarps * 32 == kRopeThreads);

template <typename T, int K>
void launch_qk_rmsnorm_vec(const QkRmsNormParams& p, cudaStream_t stream) {
  const int64_t rows = std::max(p.q.rows.geom.rows(), p.k.rows.geom.rows());
  const QkRowSplits splits{{RowSplit(p.q.rows.geom), RowSplit(p.k.rows.geom)}};
  launch_rope_kernel<qk_rmsnorm_vec_kernel<T, K>>(p.q.rows.device, rows * 16 / half_warp_rows_in_flight<T>(K), 2,
                                                  stream, p, splits);
}

template <typename T, int K>
void launch_qk_rmsnorm(const QkRmsNormParams& p, cudaStream_t stream) {
  if (vectorized_form_applies(p)) return launch_qk_rmsnorm_vec<T, K>(p, stream);
  constexpr auto kernel = qk_rmsnorm_kernel<T, K>;
  const int64_t rows = p.q.rows.geom.rows() + p.k.rows.geom.rows();
  const int64_t wanted = (rows + kQkWarps - 1) / kQkWarps;
  const int64_t resident = resident_blocks<kernel>(p.q.rows.device, kQkWarps * 32);
  // Rows of 128 * K elements: 4-element accesses are aligned when every row start and the weights are.
  const int bytes = 4 * int(sizeof(T));
  const auto weight_aligned = [bytes](const void* w) { return !w || reinterpret_cast<uintptr_t>(w) % bytes == 0; };
  const bool aligned = rows_aligned(p.q.rows.in[0], p.q.rows.dtype, bytes) &&
                       rows_aligned(p.q.rows.out, p.q.rows.dtype, bytes) &&
                       rows_aligned(p.k.rows.in[0], p.k.rows.dtype, bytes) &&
                       rows_aligned(p.k.rows.out, p.k.rows.dtype, bytes) && weight_aligned(p.q.weight) &&
                       weight_aligned(p.k.weight);
  kernel<<<unsigned(std::min(wanted, resident)), kQkWarps * 32, 0, stream>>>(p, aligned);
  DFUSE_CUDA_CHECK_LAUNCH();
}

void cuda_qk_rmsnorm(const QkRmsNormParams& p, Stream stream) {
  const DeviceGuard device(p.q.rows.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  const int k = int(p.q.rows.geom.cols / 128);
  dispatch_bf16_f16_f32(p.q.rows.dtype, "qk_rmsnorm kernel", [&](auto tag) {
    using T = decltype(tag);
    switch (k) {
      case 1: return launch_qk_rmsnorm<T, 1>(p, s);
      case 2: return launch_qk_rmsnorm<T, 2>(p, s);
      case 3: return launch_qk_rmsnorm<T, 3>(p, s);
      case 4: return launch_qk_rmsnorm<T, 4>(p, s);
      default: throw InvalidArgument("qk_rmsnorm: head dim " + std::to_string(p.q.rows.geom.cols) + " not supported");
    }
  });
}

}  // namespace

DFUSE_REGISTER_ENTRY(cuda, "qk_rmsnorm", &cuda_qk_rmsnorm);
DFUSE_REGISTER_ENTRY(cuda, "qk_rmsnorm_native", &cuda_qk_rmsnorm);
DFUSE_REGISTER_ENTRY(cuda, "qk_rmsnorm_storage_dtype", &cuda_qk_rmsnorm);

}  // namespace dfuse::detail
