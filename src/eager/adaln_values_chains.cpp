// The eager chains of the adaLN value ops (dfuse/eager/adaln_values.h).
#include <vector>

#include "dfuse/core/error.h"
#include "dfuse/eager/adaln_values.h"
#include "dfuse/eager/binary.h"
#include "dfuse/eager/data_movement.h"
#include "dfuse/eager/rope.h"

namespace dfuse::eager {

namespace {

// A contiguous scratch tensor of `sizes` and dtype `t` taken from `ws` (reset by the caller).
TensorView scratch(Workspace& ws, DType t, const std::vector<int64_t>& sizes, Device d) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return TensorView::contiguous(ws.take(size_t(n) * dtype_size(t)), t, sizes.data(), int(sizes.size()), d);
}

size_t bytes_of(DType t, const std::vector<int64_t>& sizes) {
  size_t n = dtype_size(t);
  for (int64_t s : sizes) n *= size_t(s);
  return n + 256;  // take() rounds each piece up to its alignment
}

std::vector<int64_t> sizes_of(const TensorView& t) { return {t.sizes(), t.sizes() + t.dim()}; }

// Slice k of dim `d`, without the dim (unbind).
TensorView unbind(const TensorView& t, int d, int64_t k) {
  const TensorView slice = t.narrow(d, k, 1);
  std::vector<int64_t> sizes, strides;
  for (int i = 0; i < t.dim(); ++i)
    if (i != (d < 0 ? d + t.dim() : d)) sizes.push_back(slice.size(i)), strides.push_back(slice.stride(i));
  return slice.restrided(sizes.data(), strides.data(), int(sizes.size()));
}

// out[k] has the shape of `part` or of part without its dim `d` (squeezed): a view of out[k] with
// part's shape.
TensorView like(const TensorView& out, const TensorView& part) {
  if (out.numel() != part.numel()) throw InvalidArgument("eager adaLN values chain: an output has the wrong size");
  std::vector<int64_t> strides(size_t(part.dim()));
  int64_t s = 1;
  for (int i = part.dim(); i-- > 0;) strides[size_t(i)] = s, s *= part.size(i);
  return out.restrided(part.sizes(), strides.data(), part.dim());  // out is contiguous
}

}  // namespace

void temb_table_slices_chain(const TensorView& table, const TensorView& temb, std::span<const TensorView> out,
                             Workspace& ws, Stream stream) {
  const std::vector<int64_t> sizes = sizes_of(temb);
  ws.reset(2 * bytes_of(DType::f32, sizes));
  const TensorView temb_float = scratch(ws, DType::f32, sizes, temb.device());  // temb.float()
  cast(temb, temb_float, stream);
  const TensorView sum = scratch(ws, DType::f32, sizes, temb.device());  // table + temb.float()
  binary(BinaryOp::add, table, temb_float, sum, 1.0, stream);
  for (int64_t k = 0; k < 6; ++k) {  // .chunk(6, dim=-2)[k], copied out
    const TensorView chunk = sum.narrow(-2, k, 1);
    copy(chunk, like(out[size_t(k)], chunk), stream);
  }
}

void ltx2_ada_values_chain(const TensorView& table, const TensorView& timestep, std::span<const TensorView> out,
                           Workspace& ws, Stream stream) {
  const int64_t n = table.size(0), D = table.size(1), B = timestep.size(0), T = timestep.size(1);
  const DType t = timestep.dtype();
  ws.reset(bytes_of(t, {n, D}) + bytes_of(t, {B, T, n, D}));
  // table[None, None].to(timestep.dtype)
  const int64_t table_sizes[] = {1, 1, n, D}, table_strides[] = {0, 0, table.stride(0), 1};
  const TensorView table4 = table.restrided(table_sizes, table_strides, 4);
  const TensorView cast_table = scratch(ws, t, {1, 1, n, D}, timestep.device());
  cast(table4, cast_table, stream);
  // + timestep.reshape(B, T, n, D)
  const int64_t ts_sizes[] = {B, T, n, D}, ts_strides[] = {timestep.stride(0), timestep.stride(1), D, 1};
  const TensorView sum = scratch(ws, t, {B, T, n, D}, timestep.device());
  binary(BinaryOp::add, cast_table, timestep.restrided(ts_sizes, ts_strides, 4), sum, 1.0, stream);
  for (int64_t k = 0; k < n; ++k) {  // .unbind(2)[k], copied out
    const TensorView value = unbind(sum, 2, k);
    copy(value, like(out[size_t(k)], value), stream);
  }
}

void scaled_residual_bf16_chain(const TensorView& x, const TensorView& update, const TensorView& gate,
                                const TensorView& out, Workspace& ws, Stream stream) {
  const std::vector<int64_t> sizes = sizes_of(x);
  ws.reset(2 * bytes_of(DType::f32, sizes));
  const TensorView product = scratch(ws, DType::f32, sizes, x.device());  // update * gate (promoted)
  promoted_binary(BinaryOp::mul, update, gate, product, stream);
  const TensorView sum = scratch(ws, DType::f32, sizes, x.device());  // x.float() + product
  promoted_binary(BinaryOp::add, x, product, sum, stream);
  cast(sum, out, stream);  // .type_as(x)
}

}  // namespace dfuse::eager
