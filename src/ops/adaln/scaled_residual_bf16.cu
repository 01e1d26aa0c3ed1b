// diffusion.scaled_residual_bf16: the CUDA kernels. Contract and arithmetic:
// ops/adaln/scaled_residual_bf16.h.
//
// The row geometry and operands are the row-wise ops' (common/rows.h), but the gate is fp32 beside
// bf16 rows, so a vector of VEC = 8 elements is one 16-byte access of residual, update and out and
// two of the gate (cuda/vector_io.cuh); VEC = 1 where rows are not 16-byte aligned or the row
// length is not a multiple of 8. A gate with one value per row (col_stride 0) is read once per
// vector and broadcast. Two forms:
// - flat (scaled_residual_bf16_flat_kernel), where out, residual and update are contiguous
//   [rows, cols] tensors and the gate's row for output row r is gate row r / rows_per_gate_row at a
//   fixed stride (flat_gate_rows: per frame [B, F, 1, D] against [B, F, HW, D], chunk slice or not;
//   per batch, per token, per row, shared): one pass over a grid sized to the work, block b taking
//   kThreads * kUnroll consecutive vectors of the output, thread t the vectors
//   b * kThreads * kUnroll + u * kThreads + t, all loaded before any is stored; the output position
//   gives the gate's row and column by multiply-shift division (common/uint_divider.h) in 32 bits;
// - rows (scaled_residual_bf16_rows_kernel), for any other strides, or 2^31 vectors or more: one
//   thread per (row, VEC columns), grid-striding over all of them.
#include <cuda_runtime.h>

#include <algorithm>
#include <optional>

#include "common/entries.h"
#include "common/uint_divider.h"
#include "cuda/check.h"
#include "cuda/device_guard.h"
#include "cuda/resident_blocks.cuh"
#include "cuda/vector_io.cuh"
#include "ops/adaln/scaled_residual_bf16.h"

namespace dfuse::detail {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 2;  // vectors per thread of the flat form

// One vector of VEC columns of every operand.
template <int VEC>
struct ResidualVector {
  Pack<bf16_t, VEC> residual, update;
  float gate[VEC];

  // gate_row: the gate's row; gate_column: this vector's first column there (unused when
  // gate_per_column is false: one value per row).
  __device__ __forceinline__ void load(const bf16_t* residual_at, const bf16_t* update_at, const float* gate_row,
                                       int64_t gate_column, bool gate_per_column) {
    residual.load(residual_at);
    update.load(update_at);
    if (gate_per_column) {
      load_elems<float, VEC>(gate_row + gate_column, gate);
    } else {
      const float g = gate_row[0];
#pragma unroll
      for (int e = 0; e < VEC; ++e) gate[e] = g;
    }
  }
  __device__ __forceinline__ void store(bf16_t* out_at) const {
    const ScaledResidualBf16 fn;
    Pack<bf16_t, VEC> out;
#pragma unroll
    for (int e = 0; e < VEC; ++e) out.set(e, fn(residual.get(e), update.get(e), gate[e]));
    out.store_global(out_at);
  }
};

// The flat form's gate addressing, set at launch: output vector i is column vector
// i % vectors_per_row of its row, and its gate row is i / vectors_per_gate_row, row_stride gate
// elements after the previous one.
struct FlatGate {
  UintDivider vectors_per_row, vectors_per_gate_row;
  int64_t row_stride = 0;
};

template <int VEC>
__global__ void __launch_bounds__(kThreads)
    scaled_residual_bf16_flat_kernel(RowwiseParams p, FlatGate gate, uint32_t vectors) {
  const uint32_t first = blockIdx.x * (kThreads * kUnroll) + threadIdx.x;
  const auto* residual = static_cast<const bf16_t*>(p.in[0].data);
  const auto* update = static_cast<const bf16_t*>(p.in[1].data);
  const auto* gates = static_cast<const float*>(p.in[2].data);
  const bool gate_per_column = p.in[2].col_stride != 0;
  ResidualVector<VEC> v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t i = first + u * kThreads;
    if (i >= vectors) break;
    const int64_t at = int64_t(i) * VEC;
    const uint32_t column = gate.vectors_per_row.mod(i, gate.vectors_per_row.div(i)) * VEC;
    const float* gate_row = gates + gate.vectors_per_gate_row.div(i) * gate.row_stride;
    v[u].load(residual + at, update + at, gate_row, column, gate_per_column);
  }
  auto* out = static_cast<bf16_t*>(p.out.data);
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const uint32_t i = first + u * kThreads;
    if (i >= vectors) break;
    v[u].store(out + int64_t(i) * VEC);
  }
}

template <int VEC>
__global__ void __launch_bounds__(kThreads)
    scaled_residual_bf16_rows_kernel(RowwiseParams p, int64_t vecs_per_row, int64_t items) {
  const int64_t threads = int64_t(gridDim.x) * kThreads;
  for (int64_t item = int64_t(blockIdx.x) * kThreads + threadIdx.x; item < items; item += threads) {
    const int64_t row = item / vecs_per_row;
    const int64_t col = (item - row * vecs_per_row) * VEC;
    uint32_t idx[3];
    p.geom.split(uint32_t(row), idx);
    ResidualVector<VEC> v;
    v.load(static_cast<const bf16_t*>(p.in[0].data) + p.in[0].offset(idx) + col,
           static_cast<const bf16_t*>(p.in[1].data) + p.in[1].offset(idx) + col,
           static_cast<const float*>(p.in[2].data) + p.in[2].offset(idx), col, p.in[2].col_stride != 0);
    v.store(static_cast<bf16_t*>(p.out.data) + p.out.offset(idx) + col);
  }
}

struct GateRows {
  int64_t rows_per_gate_row = 1;
  int64_t row_stride = 0;  // gate elements between consecutive gate rows
};

// The gate's row for output row r as gate row r / rows_per_gate_row at row_stride elements apart,
// where that holds: the gate broadcasts (stride 0) over the innermost outer dims and steps evenly
// over the others (each stride of those the previous one's times its size; dims of size 1 aside).
std::optional<GateRows> flat_gate_rows(const RowOperand& gate, const RowGeometry& g) {
  GateRows r;
  int d = 2;
  for (; d >= 0 && (g.outer[d] == 1 || gate.stride[d] == 0); --d) r.rows_per_gate_row *= g.outer[d];
  int64_t next_stride = 0;
  for (; d >= 0; --d) {
    if (g.outer[d] == 1) continue;
    if (r.row_stride == 0)
      r.row_stride = gate.stride[d];
    else if (gate.stride[d] != next_stride)
      return std::nullopt;
    next_stride = gate.stride[d] * g.outer[d];
  }
  return r;
}

template <int VEC>
void launch(const RowwiseParams& p, cudaStream_t stream) {
  const int64_t vecs_per_row = p.geom.cols / VEC;  // VEC divides cols (VEC == 1 or vectorizable)
  const int64_t vectors = p.geom.rows() * vecs_per_row;
  RowwiseParams streams = p;  // the flat layout of out, residual and update
  streams.in[2] = RowOperand{};
  const RowwiseFlatLayout layout = rowwise_flat_layout(streams);
  const std::optional<GateRows> gate_rows = flat_gate_rows(p.in[2], p.geom);
  if (layout.applies && layout.in[0] == FlatAccess::flat && layout.in[1] == FlatAccess::flat && gate_rows &&
      vectors < (int64_t(1) << 31)) {
    // Every divisor is at most `vectors` (rows_per_gate_row <= rows), every numerator below it.
    const FlatGate gate{UintDivider(uint32_t(vecs_per_row)),
                        UintDivider(uint32_t(vecs_per_row * gate_rows->rows_per_gate_row)), gate_rows->row_stride};
    constexpr int64_t kBlockVectors = int64_t(kThreads) * kUnroll;
    const auto blocks = uint32_t((vectors + kBlockVectors - 1) / kBlockVectors);
    scaled_residual_bf16_flat_kernel<VEC><<<blocks, kThreads, 0, stream>>>(p, gate, uint32_t(vectors));
    DFUSE_CUDA_CHECK_LAUNCH();
    return;
  }
  constexpr auto kernel = scaled_residual_bf16_rows_kernel<VEC>;
  const int64_t resident = resident_blocks<kernel>(p.device, kThreads);
  const auto grid = uint32_t(std::min((vectors + kThreads - 1) / kThreads, resident));
  kernel<<<grid, kThreads, 0, stream>>>(p, vecs_per_row, vectors);
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
