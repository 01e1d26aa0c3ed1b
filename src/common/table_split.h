// Geometry shared by the adaLN value ops that add a per-part table to a per-row embedding and
// write every part as its own contiguous tensor (ops/adaln/temb_table_slices.h,
// ops/adaln/ltx2_ada_values.h): one pass over the embedding, each output written densely.
//
//   values: rows indexed by two outer dims (b, t), each row holding `parts` parts of `cols`
//           elements (part stride `values_part_stride`, columns contiguous)
//   table:  `parts` rows of `cols` elements (columns contiguous), broadcast over every row
//   out[k]: dense [rows, cols], out[k][row][c] = fn(table[k][c], values[row][k][c])
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/guards.h"
#include "dfuse/core/dtype.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::detail {

constexpr int kTableSplitMaxParts = 9;

struct TableSplitParams {
  DType table_dtype = DType::f32;
  DType values_dtype = DType::f32;
  int device = 0;             // CUDA device index of the operands
  int64_t outer[2] = {1, 1};  // values' outer sizes (b, t), slowest first
  int64_t cols = 0;
  int parts = 0;
  const void* table = nullptr;
  int64_t table_part_stride = 0;  // elements
  const void* values = nullptr;
  int64_t values_stride[2] = {0, 0};  // elements, per outer dim
  int64_t values_part_stride = 0;
  void* out[kTableSplitMaxParts] = {};

  DFUSE_HD int64_t rows() const { return outer[0] * outer[1]; }
};

// True when vectors of `vec` elements are possible for every operand: `cols` a multiple of `vec`,
// and every row start of table, values and outputs aligned to its vector's size or to 16 bytes,
// whichever is less.
bool table_split_vectorizable(const TableSplitParams& p, int64_t vec, int out_size);

// The outputs: exactly `parts` views, each of dtype `dtype`, on `device`, dense (contiguous) with
// sizes `sizes` and fewer than 2^31 elements (the CUDA kernel's 32-bit indices), overlapping
// neither each other nor `table` / `values`.
void check_table_split_outputs(GuardList& g, std::span<const TensorView> out, int parts, DType dtype,
                               const std::vector<int64_t>& sizes, const TensorView& table, const TensorView& values,
                               const char* values_name);

// The host loop: fn(Tab, Val) -> Out for every element.
template <typename Tab, typename Val, typename Out, typename Fn>
void table_split_host(const TableSplitParams& p, Fn fn) {
  const int64_t rows = p.rows();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / p.outer[1], t = r % p.outer[1];
    const Val* row = static_cast<const Val*>(p.values) + b * p.values_stride[0] + t * p.values_stride[1];
    for (int k = 0; k < p.parts; ++k) {
      const Tab* tab = static_cast<const Tab*>(p.table) + k * p.table_part_stride;
      const Val* v = row + k * p.values_part_stride;
      Out* out = static_cast<Out*>(p.out[k]) + r * p.cols;
      for (int64_t c = 0; c < p.cols; ++c) out[c] = fn(tab[c], v[c]);
    }
  }
}

}  // namespace dfuse::detail
