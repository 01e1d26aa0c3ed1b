// Eager LayerNorm replica on CUDA: one block per row with the statistics block of the path aten
// takes (cuda/layer_norm_stats.cuh: 128 threads for the vectorized kernel, 512 for
// RowwiseMomentsCUDAKernel), then each element of the row from the path's output formula.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/layer_norm_stats.cuh"
#include "eager/layer_norm_params.h"

namespace dfuse::eager::detail {
namespace {

using dfuse::detail::LayerNormPath;

template <typename T, LayerNormPath Path>
__global__ void layer_norm_kernel(LayerNormParams p) {
  using S = dfuse::detail::Storage<T>;
  uint32_t idx[3];
  p.geom.split(blockIdx.x, idx);
  const T* x = static_cast<const T*>(p.x.data) + p.x.offset(idx);
  T* out = static_cast<T*>(p.out.data) + p.out.offset(idx);
  const int64_t n = p.geom.cols;
  dfuse::detail::LayerNormStats stats;
  if constexpr (Path == LayerNormPath::vectorized) {
    stats = dfuse::detail::block_layer_norm_stats_vectorized(
        [&](int64_t i, float v[4]) {
          for (int k = 0; k < 4; ++k) v[k] = S::load(x[4 * i + k]);
        },
        n, dfuse::detail::WelfordBlockFold{});
  } else {
    stats = dfuse::detail::block_layer_norm_stats_generic([&](int64_t k) { return S::load(x[k]); }, n);
  }
  const float rstd = dfuse::detail::layer_norm_rstd(stats.var, p.eps);
  const auto* weight = static_cast<const T*>(p.weight);
  const auto* bias = static_cast<const T*>(p.bias);
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
    const float g = weight ? S::load(weight[k * p.weight_stride]) : 1.0f;
    const float b = bias ? S::load(bias[k * p.bias_stride]) : 0.0f;
    out[k] = S::store(dfuse::detail::layer_norm_element(Path, S::load(x[k]), stats.mean, rstd, weight != nullptr, g,
                                                        bias != nullptr, b, int(k % 4)));
  }
}

void cuda_layer_norm(const LayerNormParams& p, Stream stream) {
  const int64_t rows = p.geom.rows();
  if (rows == 0) return;
  const dfuse::detail::DeviceGuard guard(p.device);
  const auto s = static_cast<cudaStream_t>(stream.handle);
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.layer_norm", [&](auto tag) {
    using T = decltype(tag);
    if (p.path == LayerNormPath::vectorized)
      layer_norm_kernel<T, LayerNormPath::vectorized>
          <<<unsigned(rows), dfuse::detail::kLayerNormVecThreads, 0, s>>>(p);
    else
      layer_norm_kernel<T, LayerNormPath::generic><<<unsigned(rows), dfuse::detail::kLayerNormMomentsThreads, 0, s>>>(p);
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "eager.layer_norm", &cuda_layer_norm);

}  // namespace
}  // namespace dfuse::eager::detail
