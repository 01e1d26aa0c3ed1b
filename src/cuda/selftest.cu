// Self-test entries of the CUDA backend, used by the GPU test suite: they expose device-side
// facts (what the conversion instructions produce) that host code cannot observe otherwise.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "common/entries.h"
#include "cuda/check.h"
#include "dfuse/core/dtype.h"

namespace dfuse::detail {
namespace {

// For every float bit pattern: does the portable conversion (dtype.h, the code the host runs)
// equal the hardware conversion? Counts mismatches for bf16 and f16.
__global__ void exhaustive_conversion_kernel(unsigned long long* mismatches) {
  unsigned long long bad_bf16 = 0, bad_f16 = 0;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  for (uint64_t u = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; u < (1ull << 32); u += stride) {
    const float f = __uint_as_float(uint32_t(u));
    bad_bf16 += float_to_bf16(f).bits != __bfloat16_as_ushort(__float2bfloat16_rn(f));
    bad_f16 += float_to_f16(f).bits != __half_as_ushort(__float2half_rn(f));
  }
  if (bad_bf16) atomicAdd(&mismatches[0], bad_bf16);
  if (bad_f16) atomicAdd(&mismatches[1], bad_f16);
}

// mismatches: device array of two counters, zeroed by the caller.
void exhaustive_conversion(unsigned long long* mismatches) {
  exhaustive_conversion_kernel<<<1024, 256>>>(mismatches);
  DFUSE_CUDA_CHECK_LAUNCH();
  DFUSE_CUDA_CHECK(cudaDeviceSynchronize());
}
DFUSE_REGISTER_ENTRY(cuda, "selftest.exhaustive_conversion", &exhaustive_conversion);

// Hardware conversions of n floats (device buffers), for comparing with the host build of the
// same conversions.
__global__ void convert_kernel(const float* in, int64_t n, uint16_t* bf16_out, uint16_t* f16_out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    bf16_out[i] = __bfloat16_as_ushort(__float2bfloat16_rn(in[i]));
    f16_out[i] = __half_as_ushort(__float2half_rn(in[i]));
  }
}

void hardware_conversion(const float* in, int64_t n, uint16_t* bf16_out, uint16_t* f16_out) {
  convert_kernel<<<1024, 256>>>(in, n, bf16_out, f16_out);
  DFUSE_CUDA_CHECK_LAUNCH();
  DFUSE_CUDA_CHECK(cudaDeviceSynchronize());
}
DFUSE_REGISTER_ENTRY(cuda, "selftest.hardware_conversion", &hardware_conversion);

}  // namespace
}  // namespace dfuse::detail
