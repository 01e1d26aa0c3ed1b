// Which way of streaming bytes through a kernel gets closest to HBM peak on Hopper (sm_90a).
//
//   nvcc -O3 -std=c++17 -Isrc -gencode=arch=compute_90a,code=sm_90a -o /tmp/copy_methods bench/copy_methods.cu
//   /tmp/copy_methods [MiB ...]        (default: 1024 54; each size rounded down to a multiple of 16 KiB)
//
// dfuse's memory-bound elementwise kernels stream with plain 16-byte LDG/STG and tie torch.compile's Triton
// kernels at the copy ceiling; can another way of moving the bytes beat that? Standalone (the CUDA runtime and
// dfuse's header-only src/cuda/vector_io.cuh), this times copies by cudaMemcpyAsync D2D (the reference), 16-byte
// vector loops with and without cache hints, and TMA bulk copies through a ring of shared-memory stages, plus a
// bf16 x * (1 + scale) + shift on the vector and bulk paths (does the arithmetic cost anything?). Per (size, method): median us of 50 launches from cold
// L2, GB/s of bytes read + written, share of memcpy's GB/s. Outputs are verified; any FAIL exits 1.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "cuda/vector_io.cuh"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define CUDA_CHECK(expr) check_cuda((expr), #expr, __FILE__, __LINE__)

static void check_cuda(cudaError_t err, const char* expr, const char* file, int line) {
  if (err != cudaSuccess) {
    fprintf(stderr, "%s:%d: %s: %s\n", file, line, expr, cudaGetErrorString(err));
    exit(1);
  }
}

namespace {

constexpr int kThreads = 256;                              // threads per block of the vector kernels
constexpr int kUnroll = 4;                                 // 16-byte vectors per thread of vec16x4
constexpr int kVecsPerChunk = kUnroll * kThreads;          // vectors per block of vec16x4
constexpr size_t kChunkBytes = size_t(kVecsPerChunk) * 16; // 16 KiB: sizes are multiples of this
constexpr int kBulkCopyThreads = 32;                       // one warp; lane 0 issues every bulk copy
constexpr int kModulateDim = 3072;                         // length of the scale and shift vectors (FLUX.1's D)
constexpr int kWarmup = 3;
constexpr int kTimed = 50;
constexpr uint64_t kSpinNs = 2'000'000;  // a spin kernel ahead of the timed launches lets the host get ahead

static_assert(kModulateDim % 8 == 0, "a 16-byte vector of bf16 must not wrap around the scale/shift vectors");

// ---------------------------------------------------------------------------------------------------------
// bf16 modulate: out = x * (1 + scale) + shift, rounded to bf16 after each op as PyTorch's eager chain does.

struct Modulation {
  const uint4* scale;  // kModulateDim bf16, as 16-byte vectors
  const uint4* shift;
};

__device__ __forceinline__ float2 unpack_bf16x2(uint32_t u) {
  return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}

__device__ __forceinline__ uint32_t pack_bf16x2(float2 f) {  // round to nearest even
  const __nv_bfloat162 b = __float22bfloat162_rn(f);
  uint32_t u;
  memcpy(&u, &b, sizeof(u));
  return u;
}

__device__ __forceinline__ uint32_t modulate_bf16x2(uint32_t x, uint32_t scale, uint32_t shift) {
  const float2 xf = unpack_bf16x2(x), sf = unpack_bf16x2(scale), tf = unpack_bf16x2(shift);
  const float2 a = unpack_bf16x2(pack_bf16x2(make_float2(1.0f + sf.x, 1.0f + sf.y)));
  const float2 m = unpack_bf16x2(pack_bf16x2(make_float2(xf.x * a.x, xf.y * a.y)));
  return pack_bf16x2(make_float2(m.x + tf.x, m.y + tf.y));
}

// Eight bf16 values starting at column `col` (a multiple of 8) of the scale/shift vectors.
__device__ __forceinline__ uint4 modulate_16(uint4 x, const Modulation& mod, uint32_t col) {
  const uint4 s = __ldg(mod.scale + col / 8), t = __ldg(mod.shift + col / 8);
  return make_uint4(modulate_bf16x2(x.x, s.x, t.x), modulate_bf16x2(x.y, s.y, t.y), modulate_bf16x2(x.z, s.z, t.z),
                    modulate_bf16x2(x.w, s.w, t.w));
}

// ---------------------------------------------------------------------------------------------------------
// Vector kernels.

__global__ void __launch_bounds__(kThreads) vec16_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                         size_t n_vecs) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_vecs; i += stride) dst[i] = src[i];
}

// Streaming hints: no L1 allocation and L2 evict-first on loads, cache-streaming stores. ptxas for sm_90a
// accepts .L2::evict_first on ld only with 256-bit vectors, so evict-first comes as an L2 cache policy
// (dfuse's own, from src/cuda/vector_io.cuh).
using dfuse::detail::l2_evict_first_policy;

__device__ __forceinline__ uint4 load_streaming(const uint4* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy)
               : "memory");
  return v;
}

__device__ __forceinline__ void store_streaming(uint4* p, uint4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// One block per 16 KiB chunk; thread t moves vectors t + k * kThreads of it, all loaded before any is stored.
template <bool kStreamingHints, bool kModulate>
__global__ void __launch_bounds__(kThreads) vec16x4_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                                           Modulation mod) {
  const size_t first = size_t(blockIdx.x) * kVecsPerChunk + threadIdx.x;
  uint4 v[kUnroll];
  if constexpr (kStreamingHints) {
    const uint64_t policy = l2_evict_first_policy();
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = load_streaming(src + first + k * kThreads, policy);
  } else {
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = src[first + k * kThreads];
  }
  if constexpr (kModulate) {
    const uint32_t first_col = uint32_t(first * 8 % kModulateDim);
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) v[k] = modulate_16(v[k], mod, (first_col + k * kThreads * 8) % kModulateDim);
  }
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    if constexpr (kStreamingHints) {
      store_streaming(dst + first + k * kThreads, v[k]);
    } else {
      dst[first + k * kThreads] = v[k];
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// TMA bulk copies (cp.async.bulk) and mbarriers. Shared-memory operands are 32-bit shared-window addresses.

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(arrivals) : "memory");
}

// Makes the initialized mbarriers visible to the async proxy (the bulk copies that complete on them).
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The single arrival of a phase, announcing `bytes` of bulk copies that complete the phase.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
               : "memory");
}

// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  const uint32_t address = shared_address(bar);
  uint32_t done;
  do {
    asm volatile(
        "{\n"
        ".reg .pred complete;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n"
        "}\n"
        : "=r"(done)
        : "r"(address), "r"(parity)
        : "memory");
  } while (!done);
}

__device__ __forceinline__ void bulk_load(void* smem_dst, const void* gmem_src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :
               : "r"(shared_address(smem_dst)), "l"(gmem_src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
}

__device__ __forceinline__ void bulk_store(void* gmem_dst, const void* smem_src, uint32_t bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               :
               : "l"(gmem_dst), "r"(shared_address(smem_src)), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Waits until at most `kPending` committed store groups are still reading their shared memory.
template <int kPending>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Waits until every committed store group has completed.
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Orders this thread's generic-proxy writes to shared memory before later async-proxy (bulk copy) reads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Persistent: block b streams tiles b, b + gridDim.x, ... through a ring of kStages shared-memory tiles.
// Thread 0 keeps kStages - 1 loads in flight: it refills the stage of the previous tile once that tile's
// store has finished reading it. With kModulate, every thread transforms the loaded tile in place before
// thread 0 stores it.
template <int kTileBytes, int kStages, bool kModulate>
__global__ void bulk_kernel(const unsigned char* src, unsigned char* dst, size_t n_tiles, Modulation mod) {
  static_assert(kTileBytes % 16 == 0, "bulk copies move multiples of 16 bytes");
  static_assert(kStages >= 2, "the stage refilled is the previous tile's, not the one just stored");
  extern __shared__ __align__(128) unsigned char tiles[];
  __shared__ uint64_t loaded[kStages];  // stage s holds its tile once loaded[s] completes a phase

  const bool issuer = threadIdx.x == 0;
  const size_t first_tile = blockIdx.x;
  const size_t tile_stride = gridDim.x;
  const size_t my_tiles = first_tile < n_tiles ? (n_tiles - first_tile - 1) / tile_stride + 1 : 0;

  auto load = [&](size_t i) {  // the block's i-th tile into stage i % kStages
    const int stage = int(i % kStages);
    mbarrier_arrive_expect_tx(&loaded[stage], kTileBytes);
    bulk_load(tiles + stage * kTileBytes, src + (first_tile + i * tile_stride) * kTileBytes, kTileBytes,
              &loaded[stage]);
  };

  if (issuer) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(&loaded[s], 1);
    mbarrier_init_fence();
  }
  __syncthreads();

  if (issuer) {
    for (size_t i = 0; i < my_tiles && i < kStages; ++i) load(i);
  }
  for (size_t i = 0; i < my_tiles; ++i) {
    const size_t tile = first_tile + i * tile_stride;
    unsigned char* stage_tile = tiles + int(i % kStages) * kTileBytes;
    if (kModulate || issuer) mbarrier_wait(&loaded[i % kStages], uint32_t(i / kStages) & 1);
    if constexpr (kModulate) {
      uint4* vecs = reinterpret_cast<uint4*>(stage_tile);
      const uint32_t first_col = uint32_t(tile * (kTileBytes / 2) % kModulateDim);
      for (int j = threadIdx.x; j < kTileBytes / 16; j += blockDim.x) {
        vecs[j] = modulate_16(vecs[j], mod, (first_col + j * 8) % kModulateDim);
      }
      fence_proxy_async_shared();
      __syncthreads();
    }
    if (issuer) {
      bulk_store(dst + tile * kTileBytes, stage_tile, kTileBytes);
      bulk_commit();
      if (i >= 1 && i - 1 + kStages < my_tiles) {
        bulk_wait_read<1>();  // the store of tile i - 1 has read its stage
        load(i - 1 + kStages);
      }
    }
  }
  if (issuer) bulk_wait_all();  // shared memory must outlive the stores reading it
}

// ---------------------------------------------------------------------------------------------------------
// Setup kernels.

__host__ __device__ uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// bf16 values of hashed floats in [-4, 4): no NaN or infinity, non-trivial bytes for the copies.
__global__ void fill_bf16_kernel(__nv_bfloat16* out, size_t n, uint32_t seed) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint32_t h = mix32(uint32_t(i) ^ mix32(uint32_t(i >> 32) + seed * 0x9e3779b9u));
    out[i] = __float2bfloat16_rn(float(h >> 8) * (8.0f / 16777216.0f) - 4.0f);
  }
}

__global__ void spin_kernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(10000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// ---------------------------------------------------------------------------------------------------------
// Host side.

// The modulate arithmetic on the host, written independently of the device's (round to nearest even).
float bf16_to_float(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  memcpy(&f, &u, sizeof(f));
  return f;
}

uint16_t float_to_bf16(float f) {  // finite f only
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

uint16_t modulate_reference(uint16_t x, uint16_t scale, uint16_t shift) {
  const float a = bf16_to_float(float_to_bf16(1.0f + bf16_to_float(scale)));
  const float m = bf16_to_float(float_to_bf16(bf16_to_float(x) * a));
  return float_to_bf16(m + bf16_to_float(shift));
}

struct DeviceInfo {
  std::string name;
  int sm_count;
  int l2_bytes;
};

enum class Check {
  kCopy,                // dst == src
  kModulateReference,   // dst == the host's modulate of src
  kSameAsVecModulate,   // dst == vec16x4_modulate's dst, bit for bit
};

struct Method {
  std::string name;
  size_t bytes;  // bytes copied of the N: less than N only where the tile does not divide N
  Check check;
  std::function<void(const void* src, void* dst, cudaStream_t stream)> launch;
};

template <typename Kernel>
int resident_blocks_per_sm(Kernel kernel, int threads, size_t smem_bytes) {
  int blocks = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, smem_bytes));
  if (blocks == 0) {
    fprintf(stderr, "a kernel does not fit on an SM (%d threads, %zu bytes of shared memory)\n", threads, smem_bytes);
    exit(1);
  }
  return blocks;
}

template <int kTileBytes, int kStages, bool kModulate>
Method bulk_method(const std::string& base_name, int wanted_blocks_per_sm, const DeviceInfo& device,
                   const Modulation& mod, size_t n) {
  const auto kernel = bulk_kernel<kTileBytes, kStages, kModulate>;
  const int smem_bytes = kTileBytes * kStages;
  const int threads = kModulate ? kThreads : kBulkCopyThreads;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  const int blocks_per_sm = std::min(wanted_blocks_per_sm, resident_blocks_per_sm(kernel, threads, smem_bytes));
  const int grid = device.sm_count * blocks_per_sm;
  const size_t n_tiles = n / kTileBytes;
  const std::string name = base_name + " " + std::to_string(kTileBytes / 1024) + "KiB x" + std::to_string(kStages) +
                           " (" + std::to_string(blocks_per_sm) + "/SM)";
  const Check check = kModulate ? Check::kSameAsVecModulate : Check::kCopy;
  return {name, n_tiles * kTileBytes, check, [=](const void* src, void* dst, cudaStream_t stream) {
            kernel<<<grid, threads, smem_bytes, stream>>>(static_cast<const unsigned char*>(src),
                                                          static_cast<unsigned char*>(dst), n_tiles, mod);
          }};
}

std::vector<Method> methods_for(size_t n, const DeviceInfo& device, const Modulation& mod) {
  std::vector<Method> methods;
  methods.push_back({"memcpy", n, Check::kCopy, [n](const void* src, void* dst, cudaStream_t stream) {
                       CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, stream));
                     }});

  const int vec16_grid = device.sm_count * resident_blocks_per_sm(vec16_kernel, kThreads, 0);
  methods.push_back({"vec16 (" + std::to_string(vec16_grid / device.sm_count) + "/SM)", n, Check::kCopy,
                     [=](const void* src, void* dst, cudaStream_t stream) {
                       vec16_kernel<<<vec16_grid, kThreads, 0, stream>>>(static_cast<const uint4*>(src),
                                                                         static_cast<uint4*>(dst), n / 16);
                     }});

  const unsigned chunks = unsigned(n / kChunkBytes);
  auto vec16x4_launch = [=](auto kernel) {
    return [=](const void* src, void* dst, cudaStream_t stream) {
      kernel<<<chunks, kThreads, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst), mod);
    };
  };
  methods.push_back({"vec16x4", n, Check::kCopy, vec16x4_launch(vec16x4_kernel<false, false>)});
  methods.push_back({"vec16x4_hints", n, Check::kCopy, vec16x4_launch(vec16x4_kernel<true, false>)});

  methods.push_back(bulk_method<16384, 4, false>("bulk", 2, device, mod, n));
  methods.push_back(bulk_method<32768, 4, false>("bulk", 1, device, mod, n));
  methods.push_back(bulk_method<8192, 8, false>("bulk", 2, device, mod, n));

  // vec16x4_modulate before bulk_modulate: the latter is checked against the former's output.
  methods.push_back({"vec16x4_modulate", n, Check::kModulateReference, vec16x4_launch(vec16x4_kernel<false, true>)});
  methods.push_back(bulk_method<16384, 4, true>("bulk_modulate", 2, device, mod, n));
  return methods;
}

// Device buffers the timed calls rotate over so that no call finds its data in L2.
struct Buffers {
  std::vector<void*> src, dst;

  Buffers(size_t n, int pairs) {
    for (int p = 0; p < pairs; ++p) {
      void *s, *d;
      CUDA_CHECK(cudaMalloc(&s, n));
      CUDA_CHECK(cudaMalloc(&d, n));
      fill_bf16_kernel<<<1024, kThreads>>>(static_cast<__nv_bfloat16*>(s), n / 2, uint32_t(p + 1));
      CUDA_CHECK(cudaGetLastError());
      src.push_back(s);
      dst.push_back(d);
    }
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  ~Buffers() {
    for (void* p : src) CUDA_CHECK(cudaFree(p));
    for (void* p : dst) CUDA_CHECK(cudaFree(p));
  }
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  int pairs() const { return int(src.size()); }
};

// Host copies of the inputs, and the output vec16x4_modulate produced.
struct Expected {
  std::vector<uint16_t> src, scale, shift;
  std::vector<uint16_t> vec_modulate_out;
};

// First differing bf16 element of `out` against `want(i)`, or -1.
template <typename Want>
long long first_mismatch(const std::vector<uint16_t>& out, size_t count, Want want) {
  for (size_t i = 0; i < count; ++i) {
    if (out[i] != want(i)) return (long long)i;
  }
  return -1;
}

// Runs the method once on a poisoned dst (0xffff is a bf16 NaN, never an expected value) and checks it.
bool verify(const Method& method, const Buffers& buffers, Expected& expected, cudaStream_t stream) {
  const size_t count = method.bytes / 2;
  CUDA_CHECK(cudaMemsetAsync(buffers.dst[0], 0xff, method.bytes, stream));
  method.launch(buffers.src[0], buffers.dst[0], stream);
  CUDA_CHECK(cudaGetLastError());
  std::vector<uint16_t> out(count);
  CUDA_CHECK(cudaMemcpyAsync(out.data(), buffers.dst[0], method.bytes, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));

  long long bad = -1;
  switch (method.check) {
    case Check::kCopy:
      bad = first_mismatch(out, count, [&](size_t i) { return expected.src[i]; });
      break;
    case Check::kModulateReference:
      bad = first_mismatch(out, count, [&](size_t i) {
        const size_t col = i % kModulateDim;
        return modulate_reference(expected.src[i], expected.scale[col], expected.shift[col]);
      });
      expected.vec_modulate_out = out;
      break;
    case Check::kSameAsVecModulate:
      if (expected.vec_modulate_out.size() < count) {
        bad = 0;
      } else {
        bad = first_mismatch(out, count, [&](size_t i) { return expected.vec_modulate_out[i]; });
      }
      break;
  }
  if (bad < 0) {
    printf("PASS  %s\n", method.name.c_str());
  } else {
    printf("FAIL  %s: first wrong bf16 element %lld (got 0x%04x)\n", method.name.c_str(), bad, out[size_t(bad)]);
  }
  return bad < 0;
}

// Median microseconds of kTimed single launches, each between its own event pair, rotating over the buffers.
float median_us(const Method& method, const Buffers& buffers, cudaStream_t stream, std::vector<cudaEvent_t>& starts,
                std::vector<cudaEvent_t>& stops) {
  const int pairs = buffers.pairs();
  for (int i = 0; i < kWarmup; ++i) method.launch(buffers.src[i % pairs], buffers.dst[i % pairs], stream);
  spin_kernel<<<1, 1, 0, stream>>>(kSpinNs);
  for (int i = 0; i < kTimed; ++i) {
    const int p = (kWarmup + i) % pairs;
    CUDA_CHECK(cudaEventRecord(starts[i], stream));
    method.launch(buffers.src[p], buffers.dst[p], stream);
    CUDA_CHECK(cudaEventRecord(stops[i], stream));
  }
  CUDA_CHECK(cudaGetLastError());
  CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> us(kTimed);
  for (int i = 0; i < kTimed; ++i) {
    CUDA_CHECK(cudaEventElapsedTime(&us[i], starts[i], stops[i]));
    us[i] *= 1000.0f;
  }
  std::sort(us.begin(), us.end());
  return (us[kTimed / 2 - 1] + us[kTimed / 2]) / 2;
}

struct Row {
  double mib;
  std::string method;
  float us;
  double gbps;
  double share_of_memcpy;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes;
  for (int a = 1; a < argc; ++a) {
    char* end;
    const double mib = strtod(argv[a], &end);
    const size_t n = size_t(mib * 1048576.0) / kChunkBytes * kChunkBytes;
    if (*end != '\0' || !(mib > 0) || n == 0) {
      fprintf(stderr, "usage: %s [MiB ...]   (each size at least 16 KiB)\n", argv[0]);
      return 2;
    }
    sizes.push_back(n);
  }
  if (sizes.empty()) sizes = {size_t(1024) << 20, size_t(54) << 20};

  int device_id;
  CUDA_CHECK(cudaGetDevice(&device_id));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_id));
  if (prop.major != 9 || prop.minor != 0) {
    fprintf(stderr, "%s is sm_%d%d; this benchmark is built for sm_90a\n", prop.name, prop.major, prop.minor);
    return 2;
  }
  DeviceInfo device{prop.name, 0, 0};
  CUDA_CHECK(cudaDeviceGetAttribute(&device.sm_count, cudaDevAttrMultiProcessorCount, device_id));
  CUDA_CHECK(cudaDeviceGetAttribute(&device.l2_bytes, cudaDevAttrL2CacheSize, device_id));
  printf("device: %s, %d SMs, L2 %.1f MiB\n\n", device.name.c_str(), device.sm_count, device.l2_bytes / 1048576.0);

  Expected expected;
  void *scale, *shift;
  CUDA_CHECK(cudaMalloc(&scale, kModulateDim * 2));
  CUDA_CHECK(cudaMalloc(&shift, kModulateDim * 2));
  fill_bf16_kernel<<<1, kThreads>>>(static_cast<__nv_bfloat16*>(scale), kModulateDim, 1001);
  fill_bf16_kernel<<<1, kThreads>>>(static_cast<__nv_bfloat16*>(shift), kModulateDim, 1002);
  CUDA_CHECK(cudaGetLastError());
  expected.scale.resize(kModulateDim);
  expected.shift.resize(kModulateDim);
  CUDA_CHECK(cudaMemcpy(expected.scale.data(), scale, kModulateDim * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(expected.shift.data(), shift, kModulateDim * 2, cudaMemcpyDeviceToHost));
  const Modulation mod{static_cast<const uint4*>(scale), static_cast<const uint4*>(shift)};

  cudaStream_t stream;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::vector<cudaEvent_t> starts(kTimed), stops(kTimed);
  for (int i = 0; i < kTimed; ++i) {
    CUDA_CHECK(cudaEventCreate(&starts[i]));
    CUDA_CHECK(cudaEventCreate(&stops[i]));
  }

  std::vector<Row> rows;
  bool all_pass = true;
  for (const size_t n : sizes) {
    // Below 4x L2, enough src/dst pairs that the others' bytes between two uses of a pair exceed 2x L2.
    const size_t l2 = size_t(device.l2_bytes);
    const int pairs = n >= 4 * l2 ? 1 : int((2 * l2 + 2 * n - 1) / (2 * n)) + 1;
    printf("%.2f MiB, %d src/dst pair%s:\n", n / 1048576.0, pairs, pairs > 1 ? "s" : "");

    const Buffers buffers(n, pairs);
    expected.src.resize(n / 2);
    CUDA_CHECK(cudaMemcpy(expected.src.data(), buffers.src[0], n, cudaMemcpyDeviceToHost));

    double memcpy_gbps = 0;
    for (const Method& method : methods_for(n, device, mod)) {
      all_pass &= verify(method, buffers, expected, stream);
      const float us = median_us(method, buffers, stream, starts, stops);
      const double gbps = 2.0 * method.bytes / (us * 1e-6) / 1e9;
      if (method.name == "memcpy") memcpy_gbps = gbps;
      rows.push_back({method.bytes / 1048576.0, method.name, us, gbps, 100.0 * gbps / memcpy_gbps});
    }
    printf("\n");
  }

  printf("GB/s: (bytes read + bytes written) / median time, 1 GB = 1e9 B; %% of memcpy: GB/s against memcpy's "
         "at the same size.\n\n");
  printf("| MiB | method | median us | GB/s | %% of memcpy |\n");
  printf("|---:|:---|---:|---:|---:|\n");
  for (const Row& r : rows) {
    printf("| %.2f | %s | %.1f | %.0f | %.1f |\n", r.mib, r.method.c_str(), r.us, r.gbps, r.share_of_memcpy);
  }

  for (int i = 0; i < kTimed; ++i) {
    CUDA_CHECK(cudaEventDestroy(starts[i]));
    CUDA_CHECK(cudaEventDestroy(stops[i]));
  }
  CUDA_CHECK(cudaStreamDestroy(stream));
  CUDA_CHECK(cudaFree(scale));
  CUDA_CHECK(cudaFree(shift));
  if (!all_pass) {
    fprintf(stderr, "FAIL: at least one method's output is wrong\n");
    return 1;
  }
  return 0;
}
