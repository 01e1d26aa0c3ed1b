// Eager activation replicas on CUDA: one thread per output element, grid-stride. The arithmetic
// is eager/elementwise.h's, shared with the host loop.
#include <algorithm>

#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/check.h"
#include "eager/elementwise.h"

namespace dfuse::eager::detail {
namespace {

template <typename T>
__global__ void activation_kernel(ActivationParams p) {
  using S = dfuse::detail::Storage<T>;
  const int64_t n = p.layout.numel();
  auto* out = static_cast<T*>(p.out);
  const auto* x = static_cast<const T*>(p.x);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[3];
    p.layout.offsets(i, off);
    out[off[0]] = S::store(activation_apply(p.op, S::load(x[off[1]])));
  }
}

void cuda_activation(const ActivationParams& p, Stream stream) {
  const int64_t n = p.layout.numel();
  if (n == 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, 65535 * 8);
  dfuse::detail::dispatch_bf16_f16_f32(p.dtype, "eager.activation", [&](auto tag) {
    activation_kernel<decltype(tag)>
        <<<unsigned(blocks), threads, 0, static_cast<cudaStream_t>(stream.handle)>>>(p);
  });
  DFUSE_CUDA_CHECK_LAUNCH();
}
DFUSE_REGISTER_ENTRY(cuda, "eager.activation", &cuda_activation);

}  // namespace
}  // namespace dfuse::eager::detail
