#include "common/table_split.h"

#include <algorithm>
#include <string>

namespace dfuse::detail {

namespace {
// Whether base and base + stride_elems elements are aligned to vector_bytes (a power of two) or 16,
// whichever is less.
bool aligned(const void* base, int64_t stride_elems, int64_t elem_size, int64_t vector_bytes) {
  const int64_t alignment = std::min<int64_t>(vector_bytes, 16);
  return reinterpret_cast<uintptr_t>(base) % alignment == 0 && (stride_elems * elem_size) % alignment == 0;
}
}  // namespace

bool table_split_vectorizable(const TableSplitParams& p, int64_t vec, int out_size) {
  if (p.cols % vec) return false;
  const auto ts = int64_t(dtype_size(p.table_dtype)), vs = int64_t(dtype_size(p.values_dtype));
  if (!aligned(p.table, p.table_part_stride, ts, vec * ts)) return false;
  if (!aligned(p.values, p.values_part_stride, vs, vec * vs) || !aligned(p.values, p.values_stride[0], vs, vec * vs) ||
      !aligned(p.values, p.values_stride[1], vs, vec * vs))
    return false;
  for (int k = 0; k < p.parts; ++k)
    if (!aligned(p.out[k], p.cols, out_size, vec * out_size)) return false;
  return true;
}

void check_table_split_outputs(GuardList& g, std::span<const TensorView> out, int parts, DType dtype,
                               const std::vector<int64_t>& sizes, const TensorView& table, const TensorView& values,
                               const char* values_name) {
  if (int64_t(out.size()) != parts) {
    g.fail("outputs", "takes " + std::to_string(parts) + " output tensors, got " + std::to_string(out.size()));
    return;
  }
  std::string shape = "[";
  int64_t elements = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    shape += (d ? ", " : "") + std::to_string(sizes[d]);
    elements *= sizes[d];
  }
  shape += "]";
  if (elements >= (int64_t(1) << 31)) {
    g.fail("extent", "outputs of shape " + shape + " have 2^31 or more elements each");
    return;
  }
  for (int k = 0; k < parts && g.ok(); ++k) {
    const TensorView& o = out[k];
    const std::string name = "out[" + std::to_string(k) + "]";
    if (o.dtype() != dtype)
      g.fail("dtype",
             name + " must be " + std::string(dtype_name(dtype)) + ", got " + std::string(dtype_name(o.dtype())));
    g.same_device(name.c_str(), o, values, values_name);
    g.not_null(name.c_str(), o);
    bool same_sizes = o.dim() == int(sizes.size());
    for (int d = 0; same_sizes && d < o.dim(); ++d) same_sizes = o.size(d) == sizes[d];
    if (!same_sizes) g.fail("shape", name + " must have shape " + shape + ", got " + shape_str(o));
    if (g.ok() && !o.is_contiguous()) g.fail("layout", name + " must be contiguous, got strides " + strides_str(o));
    g.no_partial_overlap(name.c_str(), o, "table", table, false);
    g.no_partial_overlap(name.c_str(), o, values_name, values, false);
    for (int j = 0; j < k; ++j)
      g.no_partial_overlap(name.c_str(), o, ("out[" + std::to_string(j) + "]").c_str(), out[j], false);
  }
}

}  // namespace dfuse::detail
