// Vector loads and stores of VEC elements of any element type: whole 16-byte words (one or more
// uint4 accesses; the address must be 16-byte aligned) when the VEC elements fill them, else one
// element at a time. Used by kernels whose operands have different element sizes (a bf16 row
// beside an fp32 row), where the element count per thread, not the byte count, is fixed.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dfuse::detail {

// One 16-byte store to global memory (p 16-byte aligned) as a single st.global.v4: NVVM splits some plain
// 16-byte stores into four 4-byte stores spread through a kernel's computation (SASS of the row-wise,
// RMSNorm, QK-norm and RoPE kernels), four store instructions where one serves.
__device__ __forceinline__ void store_global_16(void* p, uint4 q) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(q.x), "r"(q.y), "r"(q.z), "r"(q.w) : "memory");
}

template <typename U, int VEC>
__device__ __forceinline__ void load_elems(const U* p, U (&v)[VEC]) {
  if constexpr (sizeof(U) * VEC % 16 == 0) {
#pragma unroll
    for (int i = 0; i < int(sizeof(U) * VEC / 16); ++i) {
      const uint4 q = reinterpret_cast<const uint4*>(p)[i];
      memcpy(reinterpret_cast<char*>(v) + 16 * i, &q, 16);
    }
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = p[e];
  }
}

// To global memory.
template <typename U, int VEC>
__device__ __forceinline__ void store_elems(U* p, const U (&v)[VEC]) {
  if constexpr (sizeof(U) * VEC % 16 == 0) {
#pragma unroll
    for (int i = 0; i < int(sizeof(U) * VEC / 16); ++i) {
      uint4 q;
      memcpy(&q, reinterpret_cast<const char*>(v) + 16 * i, 16);
      store_global_16(reinterpret_cast<uint4*>(p) + i, q);
    }
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) p[e] = v[e];
  }
}

}  // namespace dfuse::detail
