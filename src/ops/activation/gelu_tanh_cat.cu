// diffusion.gelu_tanh_cat on CUDA: the attention half with the data-movement copy, the GELU half
// with the row-wise kernel (two launches, each byte read and written once). Contract and
// arithmetic: ops/activation/gelu_tanh_cat.h.
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "cuda/strided_copy.cuh"
#include "ops/activation/gelu_tanh_cat.h"

namespace dfuse::detail {

// The GELU half's element functor only (no pair form); its kernel compiled without the evict-first choice, as
// it was measured (cuda/rowwise.cuh).
template <typename T>
struct RowwisePair<GeluTanh<T>> {
  static constexpr bool kDefined = false;
  static constexpr bool kEvictFirstInputs = false;
};

namespace {

void cuda_entry(const StridedCopyParams& attn, const RowwiseParams& gelu, Stream stream) {
  launch_strided_copy(attn, stream);
  rowwise_cuda_entry<GeluTanh>(gelu, stream);
}

DFUSE_REGISTER_ENTRY(cuda, "gelu_tanh_cat", &cuda_entry);

}  // namespace
}  // namespace dfuse::detail
