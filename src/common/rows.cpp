#include "common/rows.h"

namespace dfuse::detail {

RowGeometry row_geometry(const TensorView& x) {
  RowGeometry g;
  const int outer_dims = x.dim() - 1;
  for (int d = 0; d < outer_dims; ++d) g.outer[3 - outer_dims + d] = x.size(d);
  g.cols = x.dim() > 0 ? x.size(-1) : 1;
  return g;
}

RowOperand row_operand(const TensorView& t, const TensorView& x) {
  RowOperand op;
  op.data = t.data();
  const int lead = x.dim() - t.dim();  // missing leading dims broadcast
  for (int d = 0; d < x.dim() - 1; ++d) {
    const int td = d - lead;
    const bool broadcast = td < 0 || t.size(td) == 1;
    op.stride[3 - (x.dim() - 1) + d] = broadcast ? 0 : t.stride(td);
  }
  const bool col_broadcast = t.dim() == 0 || t.size(-1) == 1;
  op.col_stride = (col_broadcast && x.size(-1) != 1) ? 0 : 1;
  return op;
}

bool rows_aligned(const RowOperand& op, DType dtype, int vec_bytes) {
  const auto es = int64_t(dtype_size(dtype));
  if (reinterpret_cast<uintptr_t>(op.data) % vec_bytes) return false;
  for (int64_t s : op.stride)
    if ((s * es) % vec_bytes) return false;
  return true;
}

bool rowwise_vectorizable(const RowwiseParams& p, int vec_bytes) {
  const int64_t vec = vec_bytes / int64_t(dtype_size(p.dtype));
  if (p.geom.cols % vec) return false;
  for (const RowOperand& op : p.in)
    if (op.data && op.col_stride == 1 && !rows_aligned(op, p.dtype, vec_bytes)) return false;
  return rows_aligned(p.out, p.dtype, vec_bytes);
}

namespace {

// Whether op's row r starts at element r * cols (contiguous rows), or at element 0 for every r.
bool contiguous_rows(const RowOperand& op, const RowGeometry& g) {
  int64_t row_elements = g.cols;
  for (int d = 2; d >= 0; --d) {
    if (g.outer[d] > 1 && op.stride[d] != row_elements) return false;
    row_elements *= g.outer[d];
  }
  return true;
}

bool shared_row(const RowOperand& op, const RowGeometry& g) {
  for (int d = 0; d < 3; ++d)
    if (g.outer[d] > 1 && op.stride[d] != 0) return false;
  return true;
}

}  // namespace

RowwiseFlatLayout rowwise_flat_layout(const RowwiseParams& p) {
  RowwiseFlatLayout layout;
  if (p.out.col_stride != 1 || !contiguous_rows(p.out, p.geom)) return layout;
  for (int k = 0; k < kRowwiseMaxInputs; ++k) {
    const RowOperand& op = p.in[k];
    if (!op.data) continue;
    if (shared_row(op, p.geom))
      layout.in[k] = op.col_stride == 0 ? FlatAccess::value : FlatAccess::column;
    else if (op.col_stride == 1 && contiguous_rows(op, p.geom))
      layout.in[k] = FlatAccess::flat;
    else
      return layout;
  }
  layout.applies = true;
  return layout;
}

}  // namespace dfuse::detail

