// diffusion.qk_head_layernorm: the CUDA kernel. q and k rows (heads) in one launch, one warp per
// head: the warp computes the statistics aten's 128-thread (vectorized) or 512-thread (generic)
// block would, in that block's exact order (cuda/layer_norm_stats.cuh, warp_* forms), so a short
// head does not leave three quarters of a block idle; then each lane writes its elements (4-element
// accesses where the rows are aligned). Contract: qk_head_layernorm.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "ops/norm/qk_head_layernorm.h"

namespace dfuse::detail {
namespace {

constexpr int kWarpsPerBlock = 8;

struct HeadAccess {
  bool x_vec[2], out_vec[2];  // per head: rows allow 4-element accesses
};

template <typename T>
__device__ void head_layer_norm_row(const HeadLayerNorm& h, float eps, uint32_t row, bool x_vec, bool out_vec) {
  using S = Storage<T>;
  const int lane = threadIdx.x % 32;
  uint32_t idx[3];
  h.geom.split(row, idx);
  const T* x = static_cast<const T*>(h.x.data) + h.x.offset(idx);
  T* out = static_cast<T*>(h.out.data) + h.out.offset(idx);
  const auto* weight = static_cast<const T*>(h.weight);
  const auto* bias = static_cast<const T*>(h.bias);
  const int64_t n = h.geom.cols;
  if (h.path == LayerNormPath::vectorized) {
    const auto load4 = [&](int64_t i) { return load_chunk4(x, i, 1, x_vec); };
    const LayerNormStats st = warp_layer_norm_stats_vectorized(
        [&](int64_t i, float v[4]) {
          const Chunk4<T> c = load4(i);
#pragma unroll
          for (int k = 0; k < 4; ++k) v[k] = S::load(c.get(k));
        },
        n);
    const float rstd = layer_norm_rstd(st.var, eps);
    for (int64_t i = lane; i < n / 4; i += 32) {
      const Chunk4<T> c = load4(i);
      Chunk4<T> o;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t col = 4 * i + k;
        const float g = weight ? S::load(weight[col * h.weight_stride]) : 1.0f;
        const float b = bias ? S::load(bias[col * h.bias_stride]) : 0.0f;
        o.set(k, S::store(layer_norm_element(LayerNormPath::vectorized, S::load(c.get(k)), st.mean, rstd,
                                             weight != nullptr, g, bias != nullptr, b, k)));
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
    head_layer_norm_row<T>(p.head[0], p.eps, uint32_t(warp), a.x_vec[0], a.out_vec[0]);
  } else if (warp - q_rows < p.head[1].geom.rows()) {
    head_layer_norm_row<T>(p.head[1], p.eps, uint32_t(warp - q_rows), a.x_vec[1], a.out_vec[1]);
  }
}

void cuda_qk_head_layernorm(const QkHeadLayerNormParams& p, Stream stream) {
  const int64_t rows = p.head[0].geom.rows() + p.head[1].geom.rows();
  if (rows == 0) return;
  const DeviceGuard guard(p.device);
  const int vec_bytes = 4 * int(dtype_size(p.dtype));
  HeadAccess a{};
  for (int h = 0; h < 2; ++h) {
    const bool cols_ok = p.head[h].geom.cols % 4 == 0;
    a.x_vec[h] = cols_ok && rows_aligned(p.head[h].x, p.dtype, vec_bytes);
    a.out_vec[h] = cols_ok && rows_aligned(p.head[h].out, p.dtype, vec_bytes);
  }
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  dispatch_bf16_f16_f32(p.dtype, "qk_head_layernorm", [&](auto tag) {
    qk_head_layernorm_kernel<decltype(tag)>
        <<<unsigned(blocks), 32 * kWarpsPerBlock, 0, static_cast<cudaStream_t>(stream.handle)>>>(p, a);
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "qk_head_layernorm", &cuda_qk_head_layernorm);

}  // namespace
}  // namespace dfuse::detail
