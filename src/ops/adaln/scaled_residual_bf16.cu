// diffusion.scaled_residual_bf16: the CUDA kernel. Contract and arithmetic:
// ops/adaln/scaled_residual_bf16.h.
//
// The row geometry and operands are the row-wise ops' (common/rows.h), but the gate is fp32
// beside bf16 rows, so a thread's VEC = 8 elements are one 16-byte vector of residual, update and
// out and two of the gate (cuda/vector_io.cuh). One thread per (row, 8 columns), grid-striding
// over all of them; a gate with one value per row (col_stride 0) is read once and broadcast.
#include <cuda_runtime.h>

#include <algorithm>

#include "common/entries.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/vector_io.cuh"
#include "ops/adaln/scaled_residual_bf16.h"

namespace dfuse::detail {

namespace {

constexpr int kThreads = 256;

template <int VEC>
__global__ void __launch_bounds__(kThreads)
    scaled_residual_bf16_kernel(RowwiseParams p, int64_t vecs_per_row, int64_t items) {
  const ScaledResidualBf16 fn;
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  for (int64_t item = int64_t(blockIdx.x) * kThreads + threadIdx.x; item < items; item += threads) {
    const int64_t row = item / vecs_per_row;
    const int64_t col = (item - row * vecs_per_row) * VEC;
    uint32_t idx[3];
    p.geom.split(uint32_t(row), idx);
    bf16_t residual[VEC], update[VEC], out[VEC];
    float gate[VEC];
    load_elems<bf16_t, VEC>(static_cast<const bf16_t*>(p.in[0].data) + p.in[0].offset(idx) + col, residual);
    load_elems<bf16_t, VEC>(static_cast<const bf16_t*>(p.in[1].data) + p.in[1].offset(idx) + col, update);
    const float* gate_row = static_cast<const float*>(p.in[2].data) + p.in[2].offset(idx);
    if (p.in[2].col_stride == 0) {
      const float g = gate_row[0];
#pragma unroll
      for (int e = 0; e < VEC; ++e) gate[e] = g;
    } else {
      load_elems<float, VEC>(gate_row + col, gate);
    }
#pragma unroll
    for (int e = 0; e < VEC; ++e) out[e] = fn(residual[e], update[e], gate[e]);
    store_elems<bf16_t, VEC>(static_cast<bf16_t*>(p.out.data) + p.out.offset(idx) + col, out);
  }
}

template <int VEC>
void launch(const RowwiseParams& p, cudaStream_t stream) {
  const int64_t vecs_per_row = p.geom.cols / VEC;  // VEC divides cols (VEC == 1 or vectorizable)
  const int64_t items = p.geom.rows() * vecs_per_row;
  auto kernel = scaled_residual_bf16_kernel<VEC>;
  static const int per_sm = [&] {
    int blocks = 0;
    DFUSE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, 0));
    return blocks > 0 ? blocks : 1;
  }();
  const int64_t resident = int64_t(multiprocessor_count(p.device)) * per_sm;
  const auto grid = uint32_t(std::min((items + kThreads - 1) / kThreads, resident));
  kernel<<<grid, kThreads, 0, stream>>>(p, vecs_per_row, items);
  DFUSE_CUDA_CHECK_LAUNCH();
}

// 16-byte vectors: 8 columns per thread, every dense row start 16-byte aligned (the gate's in
// fp32 elements, the others in bf16).
bool vectorizable(const RowwiseParams& p) {
  if (p.geom.cols % 8) return false;
  if (!rows_aligned(p.in[0], DType::bf16, 16) || !rows_aligned(p.in[1], DType::bf16, 16) ||
      !rows_aligned(p.out, DType::bf16, 16))
    return false;
  return p.in[2].col_stride == 0 || rows_aligned(p.in[2], DType::f32, 16);
}

void scaled_residual_bf16_cuda(const RowwiseParams& p, Stream stream) {
  if (p.geom.rows() == 0 || p.geom.cols == 0) return;
  const DeviceGuard device(p.device);
  auto s = static_cast<cudaStream_t>(stream.handle);
  if (vectorizable(p))
    launch<8>(p, s);
  else
    launch<1>(p, s);
}

}  // namespace

DFUSE_REGISTER_ENTRY(cuda, "scaled_residual_bf16", &scaled_residual_bf16_cuda);

}  // namespace dfuse::detail
