// diffusion.qk_head_layernorm: the CUDA kernel. q and k rows (heads) in one launch, one warp per
// head: the warp computes the statistics aten's 128-thread (vectorized) or 512-thread (generic)
// block would, in that block's exact order (cuda/layer_norm_stats.cuh, warp_* forms), so a short
// head does not leave three quarters of a block idle; then each lane writes its elements (4-element
// accesses, for x and the affine parameters too, where the rows are aligned). On the vectorized path a head
// of up to 128 elements is read once: a lane keeps its chunk from the statistics to the output.
// Contract: qk_head_layernorm.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "cuda/rms_norm_stats.cuh"
#include "cuda/rowwise.cuh"
#include "ops/rope/rope_launch.cuh"
#include "ops/norm/qk_head_layernorm.h"

namespace dfuse::detail {
namespace {

constexpr int kWarpsPerBlock = 8;

// Per tensor (q, k): which operands allow one access per 4-element chunk (rows, or the affine parameters
// contiguous, 4-element aligned).
struct HeadAccess {
  bool x_vec[2], out_vec[2], weight_vec[2], bias_vec[2];
};

// Elements 4i..4i+3 of an affine parameter with element stride `stride`.
template <typename T>
__device__ __forceinline__ Chunk4<T> load_affine_chunk4(const T* v, int64_t i, int64_t stride, bool vec) {
  if (vec) return load_chunk4(v, i, 1, true);
  Chunk4<T> c;
#pragma unroll
  for (int k = 0; k < 4; ++k) c.set(k, v[(4 * i + k) * stride]);
  return c;
}

template <typename T>
__device__ void head_layer_norm_row(const HeadLayerNorm& h, float eps, uint32_t row, const HeadAccess& a, int part) {
  using S = Storage<T>;
  const int lane = threadIdx.x % 32;
  uint32_t idx[3];
  h.geom.split(row, idx);
  const T* x = static_cast<const T*>(h.x.data) + h.x.offset(idx);
  T* out = static_cast<T*>(h.out.data) + h.out.offset(idx);
  const auto* weight = static_cast<const T*>(h.weight);
  const auto* bias = static_cast<const T*>(h.bias);
  const int64_t n = h.geom.cols;
  const bool x_vec = a.x_vec[part], out_vec = a.out_vec[part];
  if (h.path == LayerNormPath::vectorized) {
    // Heads of up to 128 elements: a lane's one chunk is read once and kept from the statistics to the output.
    const bool held = n <= 128;
    Chunk4<T> mine;
    if (held && lane < n / 4) mine = load_chunk4(x, lane, 1, x_vec);
    const auto chunk = [&](int64_t i) { return held ? mine : load_chunk4(x, i, 1, x_vec); };
    const LayerNormStats st = warp_layer_norm_stats_vectorized(
        [&](int64_t i, float v[4]) {
          const Chunk4<T> c = chunk(i);
#pragma unroll
          for (int k = 0; k < 4; ++k) v[k] = S::load(c.get(k));
        },
        n);
    const float rstd = layer_norm_rstd(st.var, eps);
    for (int64_t i = lane; i < n / 4; i += 32) {
      const Chunk4<T> c = chunk(i);
      Chunk4<T> g, b;
      if (weight) g = load_affine_chunk4(weight, i, h.weight_stride, a.weight_vec[part]);
      if (bias) b = load_affine_chunk4(bias, i, h.bias_stride, a.bias_vec[part]);
      Chunk4<T> o;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        o.set(k, S::store(layer_norm_element(LayerNormPath::vectorized, S::load(c.get(k)), st.mean, rstd,
                                             weight != nullptr, weight ? S::load(g.get(k)) : 1.0f, bias != nullptr,
                                             bias ? S::load(b.get(k)) : 0.0f, k)));
      }
      store_chunk4(out, i, o, out_vec);
    }
  } else {
    const LayerNormStats st = warp_layer_norm_stats_generic([&](int64_t c) { return S::load(x[c]); }, n);
    const float rstd = layer_norm_rstd(st.var, eps);
    for (int64_t c = lane; c < n; c += 32) {
      const float g = weight ? S::load(weight[c * h.weight_stride]) : 1.0f;
      const float b = bias ? S::load(bias[c * h.bias_stride]) : 0.0f;
      out[c] = S::store(layer_norm_element(LayerNormPath::generic, S::load(x[c]), st.mean, rstd, weight != nullptr, g,
                                           bias != nullptr, b, 0));
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(32 * kWarpsPerBlock) qk_head_layernorm_kernel(QkHeadLayerNormParams p, HeadAccess a) {
  const int64_t warp = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t q_rows = p.head[0].geom.rows();
  if (warp < q_rows) {
    head_layer_norm_row<T>(p.head[0], p.eps, uint32_t(warp), a, 0);
  } else if (warp - q_rows < p.head[1].geom.rows()) {
    head_layer_norm_row<T>(p.head[1], p.eps, uint32_t(warp - q_rows), a, 1);
  }
}

// ---- the vectorized form: half a warp per head, 16-byte accesses ---------------------------------------------
// Heads of 128 K elements (K = 1, 2) on aten's vectorized path whose rows, weight and bias allow 16-byte
// accesses: lane j of a half-warp holds elements 128k + 8j .. 128k + 8j + 7, the statistics come from
// half_warp_layer_norm_stats (aten's block order), the affine parameters are read once per thread, and a
// half-warp keeps half_warp_rows_in_flight<T>(K) heads in flight (the QK-norm + RoPE rows' layout,
// cuda/rms_norm_stats.cuh). blockIdx.y is the tensor (q, k); blocks grid-stride over its heads, launched as the
// RoPE kernels are (ops/rope/rope_launch.cuh). kAffine: both tensors have a weight and a bias (the models'
// norm_q / norm_k), known when compiling; otherwise their presence is read per tensor. Register bounds: D = 128
// at 80 (three blocks per SM; at four, 64 registers, the 16-bit forms spilled and Wan 2.1 ran 4.5% slower on an
// H100: session 23 run 1), D = 256 at 128.
template <typename T, int K, bool kAffine>
__global__ void __launch_bounds__(kRopeThreads, K == 1 ? 3 : 2)
    qk_head_layernorm_vec_kernel(QkHeadLayerNormParams p, QkRowSplits splits) {
  using S = Storage<T>;
  constexpr int R = half_warp_rows_in_flight<T>(K);
  constexpr uint32_t kBlockRows = kRopeThreads / 16 * R;
  constexpr int kVec = 16 / sizeof(T);
  const HeadLayerNorm& h = p.head[blockIdx.y];
  const uint32_t rows = uint32_t(h.geom.rows());
  const int64_t first = kLaneElements * (threadIdx.x % 16);
  const bool has_gamma = kAffine || h.weight != nullptr, has_beta = kAffine || h.bias != nullptr;
  float gamma[K][kLaneElements], beta[K][kLaneElements];
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int e = 0; e < kLaneElements; ++e) gamma[k][e] = 1.0f, beta[k][e] = 0.0f;
#pragma unroll
  for (int k = 0; k < K; ++k) {
    if (has_gamma) load_as_floats(static_cast<const T*>(h.weight) + 128 * k + first, gamma[k]);
    if (has_beta) load_as_floats(static_cast<const T*>(h.bias) + 128 * k + first, beta[k]);
  }
  for (uint32_t warp_first = blockIdx.x * kBlockRows + threadIdx.x / 32 * (2 * R); warp_first < rows;
       warp_first += gridDim.x * kBlockRows) {
    uint32_t idx[R][3];
    bool writes[R];
    LaneHead<T> packed[R][K];
    load_half_warp_rows<T>(splits.part[blockIdx.y], h.x, warp_first, rows, first, idx, writes, packed);
#pragma unroll
    for (int b = 0; b < R; ++b) {
      float v[K][kLaneElements];
      lane_floats<T>(packed[b], v);
      const LayerNormStats st = half_warp_layer_norm_stats<K>(v);
      const float rstd = layer_norm_rstd(st.var, p.eps);
      T* out = static_cast<T*>(h.out.data) + h.out.offset(idx[b]) + first;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        Pack<T, kVec> o[kLaneElements / kVec];
#pragma unroll
        for (int e = 0; e < kLaneElements; ++e)
          o[e / kVec].set(e % kVec, S::store(layer_norm_element(LayerNormPath::vectorized, v[k][e], st.mean, rstd,
                                                                has_gamma, gamma[k][e], has_beta, beta[k][e], e % 4)));
        if (writes[b])
#pragma unroll
          for (int q = 0; q < kLaneElements / kVec; ++q) o[q].store_global(out + 128 * k + q * kVec);
      }
    }
  }
}

// Whether both tensors take the vectorized form: aten's vectorized path, heads of 128 or 256, and x, out,
// weight and bias allowing 16-byte accesses at every head.
bool vectorized_form_applies(const QkHeadLayerNormParams& p) {
  for (const HeadLayerNorm& h : p.head) {
    const int64_t n = h.geom.cols;
    if (h.path != LayerNormPath::vectorized || (n != 128 && n != 256) || n != p.head[0].geom.cols) return false;
    if (!rows_aligned(h.x, p.dtype, 16) || !rows_aligned(h.out, p.dtype, 16)) return false;
    for (const auto& [v, stride] : {std::pair{h.weight, h.weight_stride}, std::pair{h.bias, h.bias_stride}})
      if (v && (stride != 1 || reinterpret_cast<uintptr_t>(v) % 16)) return false;
  }
  return true;
}

void cuda_qk_head_layernorm(const QkHeadLayerNormParams& p, Stream stream) {
  const int64_t rows = p.head[0].geom.rows() + p.head[1].geom.rows();
  if (rows == 0) return;
  const DeviceGuard guard(p.device);
  const int vec_bytes = 4 * int(dtype_size(p.dtype));
  HeadAccess a{};
  const auto affine_vec = [&](const void* v, int64_t stride) {
    return v && stride == 1 && reinterpret_cast<uintptr_t>(v) % vec_bytes == 0;
  };
  for (int h = 0; h < 2; ++h) {
    a.weight_vec[h] = affine_vec(p.head[h].weight, p.head[h].weight_stride);
    a.bias_vec[h] = affine_vec(p.head[h].bias, p.head[h].bias_stride);
    const bool cols_ok = p.head[h].geom.cols % 4 == 0;
    a.x_vec[h] = cols_ok && rows_aligned(p.head[h].x, p.dtype, vec_bytes);
    a.out_vec[h] = cols_ok && rows_aligned(p.head[h].out, p.dtype, vec_bytes);
  }
  const auto s = static_cast<cudaStream_t>(stream.handle);
  if (vectorized_form_applies(p)) {  // half a warp per head
    const int64_t heads = std::max(p.head[0].geom.rows(), p.head[1].geom.rows());
    const QkRowSplits splits{{RowSplit(p.head[0].geom), RowSplit(p.head[1].geom)}};
    const bool affine = p.head[0].weight && p.head[0].bias && p.head[1].weight && p.head[1].bias;
    dispatch_bf16_f16_f32(p.dtype, "qk_head_layernorm", [&](auto tag) {
      using T = decltype(tag);
      const auto launch = [&]<int K, bool kAffine>() {
        launch_rope_kernel<qk_head_layernorm_vec_kernel<T, K, kAffine>>(
            p.device, heads * 16 / half_warp_rows_in_flight<T>(K), 2, s, p, splits);
      };
      if (p.head[0].geom.cols == 128)
        affine ? launch.template operator()<1, true>() : launch.template operator()<1, false>();
      else
        affine ? launch.template operator()<2, true>() : launch.template operator()<2, false>();
    });
    return;
  }
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  dispatch_bf16_f16_f32(p.dtype, "qk_head_layernorm", [&](auto tag) {
    qk_head_layernorm_kernel<decltype(tag)><<<unsigned(blocks), 32 * kWarpsPerBlock, 0, s>>>(p, a);
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "qk_head_layernorm", &cuda_qk_head_layernorm);

}  // namespace
}  // namespace dfuse::detail
