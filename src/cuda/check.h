// CUDA error checking for the CUDA backend: every runtime call and every launch is checked and
// turned into dfuse::CudaError with the runtime's text.
#pragma once

#include <cuda_runtime.h>

#include "dfuse/core/error.h"

namespace dfuse::detail {

inline void cuda_check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) throw CudaError(int(err), call, cudaGetErrorString(err));
}

}  // namespace dfuse::detail

#define DFUSE_CUDA_CHECK(expr) ::dfuse::detail::cuda_check((expr), #expr)
// After a kernel launch: reports launch-configuration errors at the launch site.
#define DFUSE_CUDA_CHECK_LAUNCH() ::dfuse::detail::cuda_check(cudaGetLastError(), "kernel launch")
