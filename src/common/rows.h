// Row geometry shared by the row-wise kernels (host and CUDA): a tensor of rank <= 4 seen as
// rows of `cols` elements indexed by up to three outer dims, each operand with its own outer
// strides (0 where it broadcasts) and a column stride of 1 (dense row) or 0 (one value per row).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/uint_divider.h"
#include "dfuse/core/dtype.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::detail {

struct RowGeometry {
  int64_t outer[3] = {1, 1, 1};  // outer sizes, slowest first
  int64_t cols = 0;
  DFUSE_HD int64_t rows() const { return outer[0] * outer[1] * outer[2]; }
  // Outer indices of row `r`. Kernels guard rows() < 2^32, so 32-bit division suffices.
  DFUSE_HD void split(uint32_t r, uint32_t idx[3]) const {
    idx[2] = r % uint32_t(outer[2]);
    uint32_t q = r / uint32_t(outer[2]);
    idx[1] = q % uint32_t(outer[1]);
    idx[0] = q / uint32_t(outer[1]);
  }
};

// RowGeometry::split by multiply-high (common/uint_divider.h), for kernels that split an index per row of a head
// (128 to 512 elements), where two 32-bit divisions are a sizeable share of a row's instructions. Exact for fewer
// than 2^31 rows (the row-wise guards); a geometry without rows (an empty tensor beside a non-empty one, whose outer
// dims the guards do not bound) splits by 1, as it is never asked for a row.
struct RowSplit {
  UintDivider dim2, dim1;  // outer[2], outer[1]
  explicit RowSplit(const RowGeometry& g)
      : dim2(g.rows() > 0 ? uint32_t(g.outer[2]) : 1), dim1(g.rows() > 0 ? uint32_t(g.outer[1]) : 1) {}
  DFUSE_HD void split(uint32_t r, uint32_t idx[3]) const {
    const uint32_t q = dim2.div(r);
    idx[2] = dim2.mod(r, q);
    idx[0] = dim1.div(q);
    idx[1] = dim1.mod(q, idx[0]);
  }
};

struct RowOperand {
  void* data = nullptr;
  int64_t stride[3] = {0, 0, 0};  // elements, per outer dim
  int64_t col_stride = 1;         // 1: a row of `cols` values; 0: one value per row

  // Element offset of the start of the row with outer indices `idx`.
  DFUSE_HD int64_t offset(const uint32_t idx[3]) const {
    return int64_t(idx[0]) * stride[0] + int64_t(idx[1]) * stride[1] + int64_t(idx[2]) * stride[2];
  }
};

constexpr int kRowwiseMaxInputs = 4;

// A row-wise elementwise op with up to four inputs and one output, all of one dtype. An op
// with fewer inputs leaves the trailing slots null; its functor takes that many arguments.
struct RowwiseParams {
  DType dtype = DType::f32;
  int device = 0;  // CUDA device index of the operands (kernels launch there)
  RowGeometry geom;
  RowOperand in[kRowwiseMaxInputs];
  RowOperand out;
};

// The number of inputs of a row-wise functor: how many T arguments its operator() takes.
template <typename T, typename Fn>
constexpr int rowwise_arity() {
  if constexpr (std::is_invocable_v<const Fn&, T, T, T, T>) {
    return 4;
  } else if constexpr (std::is_invocable_v<const Fn&, T, T, T>) {
    return 3;
  } else if constexpr (std::is_invocable_v<const Fn&, T, T>) {
    return 2;
  } else {
    static_assert(std::is_invocable_v<const Fn&, T>, "a row-wise functor takes 1 to 4 elements");
    return 1;
  }
}

// Geometry of `x` (rank 1..4, last dim = columns). The caller has checked the rank.
RowGeometry row_geometry(const TensorView& x);
// Operand `t`, broadcast (right-aligned) against `x`. The caller has checked broadcastability.
RowOperand row_operand(const TensorView& t, const TensorView& x);
// True when every row of `op` starts on a `vec_bytes` boundary (base and all outer strides).
bool rows_aligned(const RowOperand& op, DType dtype, int vec_bytes);
// True when rows of every row operand (col_stride 1) of `p` allow `vec_bytes` accesses.
bool rowwise_vectorizable(const RowwiseParams& p, int vec_bytes);

// How the flat form of the row-wise CUDA kernel addresses an input (rowwise_flat_layout).
enum class FlatAccess : uint8_t {
  flat,    // laid out as a contiguous [rows, cols] tensor: element (r, c) at r * cols + c
  column,  // one row shared by every row: element (r, c) at c
  value,   // one value shared by every element
};

// The flat form's addressing of p's inputs: `applies` when the output is a contiguous [rows, cols] tensor
// and every input is one of FlatAccess's layouts (dims of size 1 aside), so that an element's position in
// the output alone locates it in every operand.
struct RowwiseFlatLayout {
  bool applies = false;
  FlatAccess in[kRowwiseMaxInputs] = {};
};
RowwiseFlatLayout rowwise_flat_layout(const RowwiseParams& p);

}  // namespace dfuse::detail
