// diffusion.timestep_embedding: the CUDA kernel, one thread per output element (the embedding
// is N x embedding_dim floats, a few KB). Contract and arithmetic: ops/adaln/timestep_embedding.h.
#include <cuda_runtime.h>

#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "ops/adaln/timestep_embedding.h"

namespace dfuse::detail {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) timestep_embedding_kernel(TimestepEmbeddingParams p) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= p.count * p.dim) return;
  const int64_t n = i / p.dim, j = i - n * p.dim;
  const float t = timestep_as_float(static_cast<const T*>(p.timesteps)[n * p.timesteps_stride]);
  p.out[n * p.out_row_stride + j] = timestep_embedding_element(p, t, j);
}

void timestep_embedding_cuda(const TimestepEmbeddingParams& p, Stream stream) {
  const int64_t elements = p.count * p.dim;
  if (elements == 0) return;
  const DeviceGuard device(p.device);
  const auto grid = uint32_t((elements + kThreads - 1) / kThreads);
  dispatch_timestep_dtype(p.timesteps_dtype, [&](auto tag) {
    using T = decltype(tag);
    timestep_embedding_kernel<T><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}

}  // namespace

DFUSE_REGISTER_ENTRY(cuda, "timestep_embedding", &timestep_embedding_cuda);

}  // namespace dfuse::detail
