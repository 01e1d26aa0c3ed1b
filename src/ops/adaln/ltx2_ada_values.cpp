// diffusion.ltx2_ada_values: guards, dispatch, and the host kernel.
#include "ops/adaln/ltx2_ada_values.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/adaln.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "ltx2_ada_values";

detail::GuardList check(const TensorView& table, const TensorView& timestep, std::span<const TensorView> out) {
  detail::GuardList g(kOp);
  g.dtype_in("table", table, {DType::bf16, DType::f16, DType::f32});
  g.rank_between("table", table, 2, 2);
  g.not_null("table", table);
  g.last_dim_contiguous("table", table);
  g.non_negative_strides("table", table);
  g.dtype_in("timestep", timestep, {DType::bf16, DType::f16, DType::f32});
  g.same_device("timestep", timestep, table, "table");
  g.rank_between("timestep", timestep, 3, 3);
  g.not_null("timestep", timestep);
  g.last_dim_contiguous("timestep", timestep);
  g.non_negative_strides("timestep", timestep);
  if (!g.ok()) return g;
  const int64_t n = table.size(0), D = table.size(1);
  if (n < 1 || n > detail::kTableSplitMaxParts)
    g.fail("shape", "table must have 1.." + std::to_string(detail::kTableSplitMaxParts) + " rows, got " +
                        detail::shape_str(table));
  else if (timestep.size(2) != n * D)
    g.fail("shape", "timestep must be [B, T, n * D] = [B, T, " + std::to_string(n * D) + "] for table " +
                        detail::shape_str(table) + ", got " + detail::shape_str(timestep));
  if (!g.ok()) return g;
  detail::check_table_split_outputs(g, out, int(n), timestep.dtype(), {timestep.size(0), timestep.size(1), D}, table,
                                    timestep, "timestep");
  return g;
}

detail::TableSplitParams params(const TensorView& table, const TensorView& timestep, std::span<const TensorView> out) {
  detail::TableSplitParams p;
  p.table_dtype = table.dtype();
  p.values_dtype = timestep.dtype();
  p.device = timestep.device().index;
  p.outer[0] = timestep.size(0);
  p.outer[1] = timestep.size(1);
  p.values_stride[0] = timestep.stride(0);
  p.values_stride[1] = timestep.stride(1);
  p.cols = table.size(1);
  p.values_part_stride = p.cols;  // the reshape(B, T, n, D) of a contiguous last dim
  p.parts = int(table.size(0));
  p.table = table.data();
  p.table_part_stride = table.stride(0);
  p.values = timestep.data();
  for (int k = 0; k < p.parts; ++k) p.out[k] = out[k].data();
  return p;
}

void ltx2_ada_values_host(const detail::TableSplitParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.table_dtype, "ltx2_ada_values host kernel", [&](auto table_tag) {
    detail::dispatch_bf16_f16_f32(p.values_dtype, "ltx2_ada_values host kernel", [&](auto value_tag) {
      using Tab = decltype(table_tag);
      using Val = decltype(value_tag);
      detail::table_split_host<Tab, Val, Val>(p, detail::Ltx2AdaValue<Tab, Val>{});
    });
  });
}

DFUSE_REGISTER_ENTRY(host, "ltx2_ada_values", &ltx2_ada_values_host);

}  // namespace

bool can_use_ltx2_ada_values(const TensorView& table, const TensorView& timestep, std::span<const TensorView> out,
                             std::string* why) {
  return check(table, timestep, out).answer(why);
}

void ltx2_ada_values(const TensorView& table, const TensorView& timestep, std::span<const TensorView> out,
                     Stream stream) {
  check(table, timestep, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.ltx2_ada_values");
  entry.get<detail::Ltx2AdaValuesEntry>(timestep.device())(params(table, timestep, out), stream);
}

}  // namespace dfuse
