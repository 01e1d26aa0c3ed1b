// diffusion.bias_silu: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and arithmetic:
// ops/activation/bias_silu.h.
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/activation/bias_silu.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "bias_silu", &rowwise_cuda_entry<BiasSilu>);

}  // namespace dfuse::detail
