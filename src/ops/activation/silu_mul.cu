// diffusion.silu_mul: the CUDA kernel (row-wise, see cuda/rowwise.cuh). Contract and arithmetic:
// ops/activation/silu_mul.h.
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/activation/silu_mul.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "silu_mul", &rowwise_cuda_entry<SiluMul>);

}  // namespace dfuse::detail
