// diffusion.residual_gate_add: the CUDA kernel (row-wise, see cuda/rowwise.cuh) on packed pairs
// (ops/adaln/residual_gate_add.cuh). Contract and arithmetic: ops/adaln/residual_gate_add.h.
#include "common/entries.h"
#include "cuda/rowwise.cuh"
#include "ops/adaln/residual_gate_add.cuh"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "residual_gate_add", &rowwise_cuda_entry<ResidualGateAdd>);

}  // namespace dfuse::detail
