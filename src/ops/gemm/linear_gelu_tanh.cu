// diffusion.linear_gelu_tanh: the CUDA entry is the family's cuBLASLt matmul (cuda/cublaslt_linear.cu); the
// epilogue comes with the parameters.
#include "common/entries.h"
#include "ops/gemm/linear.h"

namespace dfuse::detail {

DFUSE_REGISTER_ENTRY(cuda, "linear_gelu_tanh", &cublaslt_linear);

}  // namespace dfuse::detail
