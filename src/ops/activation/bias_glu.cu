// diffusion.bias_glu: the CUDA kernel (row-wise, see cuda/rowwise.cuh), with four inputs (h, g
// and the bias halves) or two. Contract and arithmetic: ops/activation/bias_glu.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/paired_silu.cuh"
#include "cuda/rowwise.cuh"
#include "ops/activation/bias_glu.h"

namespace dfuse::detail {

// On packed pairs: the bias adds and the product rounded once each (paired_arith.cuh), T(silu(g'))
// by paired_silu.cuh.
template <typename T>
struct RowwisePair<Glu<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  static constexpr bool kEvictFirstInputs = false;  // measured slower with the choice (cuda/rowwise.cuh)
  __device__ static uint32_t apply(bool& fallback, uint32_t h, uint32_t g) {
    return PairedArith<T>::mul(h, paired_silu<T>(g, fallback));
  }
};
template <typename T>
struct RowwisePair<BiasGlu<T>> {
  static constexpr bool kDefined = sizeof(T) == 2;
  static constexpr bool kEvictFirstInputs = false;  // measured slower with the choice (cuda/rowwise.cuh)
  __device__ static uint32_t apply(bool& fallback, uint32_t h, uint32_t g, uint32_t bias_h, uint32_t bias_g) {
    using A = PairedArith<T>;
    return RowwisePair<Glu<T>>::apply(fallback, A::add(h, bias_h), A::add(g, bias_g));
  }
};

namespace {

void cuda_kernel(const RowwiseParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.dtype, "bias_glu", [&](auto tag) {
    using T = decltype(tag);
    if (p.in[2].data)
      launch_rowwise<T>(p, BiasGlu<T>{}, stream);
    else
      launch_rowwise<T>(p, Glu<T>{}, stream);
  });
}
DFUSE_REGISTER_ENTRY(cuda, "bias_glu", &cuda_kernel);

}  // namespace
}  // namespace dfuse::detail
