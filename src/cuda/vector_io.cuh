// Vector accesses shared by the kernels:
// - store_global_16 / store_global_8: one st.global.v4 / v2 where NVVM would split a vector store;
// - l2_evict_first_policy / load_global_16_evict_first: a 16-byte load whose lines L2 evicts first;
// - copy_async_16 / copy_async_commit / copy_async_wait_all: 16-byte global-to-shared copies that bypass
//   registers (cp.async), in groups a thread waits for;
// - load_elems / store_elems: VEC elements of any element type, whole 16-byte words (one or more uint4
//   accesses; the address must be 16-byte aligned) when the VEC elements fill them, else one element at
//   a time, for kernels whose operands have different element sizes (a bf16 row beside an fp32 row),
//   where the element count per thread, not the byte count, is fixed;
// - Pack<T, VEC>: VEC elements of one type as 32-bit words, loaded and stored in one access (the
//   row-wise, RMSNorm and LayerNorm kernels' vectors; LayerNorm's 4-element Chunk4).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace dfuse::detail {

// One 16-byte store to global memory (p 16-byte aligned) as a single st.global.v4: NVVM splits some plain
// 16-byte stores into four 4-byte stores spread through a kernel's computation (SASS of the row-wise,
// RMSNorm, QK-norm and RoPE kernels), four store instructions where one serves.
__device__ __forceinline__ void store_global_16(void* p, uint4 q) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(q.x), "r"(q.y), "r"(q.z), "r"(q.w) : "memory");
}

// The same for an 8-byte store (p 8-byte aligned), which NVVM splits into two 4-byte stores likewise.
__device__ __forceinline__ void store_global_8(void* p, uint2 q) {
  asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(q.x), "r"(q.y) : "memory");
}

// 16 bytes from global `src` to shared `dst` (both 16-byte aligned), asynchronously; copy_async_commit()
// closes the thread's group of copies issued since the last, copy_async_wait_all() waits for all of them
// (then a barrier makes every thread's copies visible to the block).
__device__ __forceinline__ void copy_async_16(void* dst, const void* src) {
  const auto shared = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared), "l"(src) : "memory");
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void copy_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

// An L2 policy that evicts the lines it loads first, and a 16-byte load under it (p 16-byte aligned). Volatile,
// with a memory clobber, so that it stays ahead of the stores that follow it (an in-place kernel's output).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint4 load_global_16_evict_first(const void* p, uint64_t policy) {
  uint4 q;
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(q.x), "=r"(q.y), "=r"(q.z), "=r"(q.w)
               : "l"(p), "l"(policy)
               : "memory");
  return q;
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

// VEC elements of T held as 32-bit words, so that 16-bit elements stay packed two to a register
// (an array of 16-bit structs would take one register per element).
template <typename T, int VEC>
struct Pack {
  static_assert(sizeof(T) * VEC % 4 == 0 || VEC == 1, "a pack is whole 32-bit words or one element");
  static constexpr int kWords = sizeof(T) * VEC >= 4 ? sizeof(T) * VEC / 4 : 1;
  uint32_t w[kWords];

  __device__ __forceinline__ T get(int e) const {
    if constexpr (sizeof(T) == 4) {
      return __uint_as_float(w[e]);
    } else {
      return T{uint16_t(w[e / 2] >> (16 * (e % 2)))};
    }
  }
  __device__ __forceinline__ void set(int e, T v) {
    if constexpr (sizeof(T) == 4) {
      w[e] = __float_as_uint(v);
    } else if constexpr (VEC == 1) {
      w[0] = v.bits;
    } else {
      const int shift = 16 * (e % 2);
      w[e / 2] = (w[e / 2] & ~(0xFFFFu << shift)) | (uint32_t(v.bits) << shift);
    }
  }
  // One access of the whole pack (p aligned to its size): 16, 8 or 4 bytes, or one 16-bit element.
  __device__ __forceinline__ void load(const T* p) {
    if constexpr (sizeof(T) * VEC == 16) {
      const uint4 q = *reinterpret_cast<const uint4*>(p);
      w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    } else if constexpr (sizeof(T) * VEC == 8) {
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      w[0] = q.x, w[1] = q.y;
    } else if constexpr (sizeof(T) * VEC == 4) {
      w[0] = *reinterpret_cast<const uint32_t*>(p);
    } else {
      set(0, *p);
    }
  }
  // A 16-byte pack by load_global_16_evict_first; smaller packs as load().
  __device__ __forceinline__ void load_evict_first(const T* p, uint64_t policy) {
    if constexpr (sizeof(T) * VEC == 16) {
      const uint4 q = load_global_16_evict_first(p, policy);
      w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    } else {
      load(p);
    }
  }
  __device__ __forceinline__ void store(T* p) const {
    if constexpr (sizeof(T) * VEC == 16) {
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    } else if constexpr (sizeof(T) * VEC == 8) {
      *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
    } else if constexpr (sizeof(T) * VEC == 4) {
      *reinterpret_cast<uint32_t*>(p) = w[0];
    } else {
      *p = get(0);
    }
  }
  // The same to global memory, a 16-byte or 8-byte pack as one st.global.v4 / v2.
  __device__ __forceinline__ void store_global(T* p) const {
    if constexpr (sizeof(T) * VEC == 16) {
      store_global_16(p, make_uint4(w[0], w[1], w[2], w[3]));
    } else if constexpr (sizeof(T) * VEC == 8) {
      store_global_8(p, make_uint2(w[0], w[1]));
    } else {
      store(p);
    }
  }
  __device__ __forceinline__ void fill(T v) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) set(e, v);
  }
  // The pack's elements from p: one 16-byte access where they fill it (p 16-byte aligned), else one access per
  // element (any alignment); store_elements the same to global memory.
  __device__ __forceinline__ void load_elements(const T* p) {
    if constexpr (sizeof(T) * VEC == 16) {
      load(p);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) set(e, p[e]);
    }
  }
  __device__ __forceinline__ void store_elements(T* p) const {
    if constexpr (sizeof(T) * VEC == 16) {
      store_global(p);
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) p[e] = get(e);
    }
  }
};

}  // namespace dfuse::detail
