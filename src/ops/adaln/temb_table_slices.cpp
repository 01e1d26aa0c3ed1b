// diffusion.temb_table_slices: guards, dispatch, and the host kernel.
#include "ops/adaln/temb_table_slices.h"

#include "common/dispatch.h"
#include "common/entries.h"
#include "common/guards.h"
#include "dfuse/ops/adaln.h"

namespace dfuse {

namespace {

constexpr const char* kOp = "temb_table_slices";
constexpr int kParts = 6;

detail::GuardList check(const TensorView& table, const TensorView& temb, std::span<const TensorView> out) {
  detail::GuardList g(kOp);
  g.dtype_in("temb", temb, {DType::bf16, DType::f16, DType::f32});
  g.rank_between("temb", temb, 3, 4);
  g.not_null("temb", temb);
  g.last_dim_contiguous("temb", temb);
  g.non_negative_strides("temb", temb);
  if (g.ok() && temb.size(-2) != kParts)
    g.fail("shape", "temb must be [B, 6, D] or [B, S, 6, D], got " + detail::shape_str(temb));
  g.dtype_in("table", table, {DType::f32});
  g.same_device("table", table, temb, "temb");
  g.rank_between("table", table, 2, 4);
  g.not_null("table", table);
  g.last_dim_contiguous("table", table);
  g.non_negative_strides("table", table);
  if (g.ok()) {
    bool leading_ones = true;
    for (int d = 0; d + 2 < table.dim(); ++d) leading_ones = leading_ones && table.size(d) == 1;
    if (!leading_ones || table.dim() > temb.dim() || table.size(-2) != kParts || table.size(-1) != temb.size(-1))
      g.fail("shape", "table must be [6, D], [1, 6, D] or [1, 1, 6, D] (no more dims than temb) with temb's D = " +
                          std::to_string(temb.size(-1)) + ", got " + detail::shape_str(table));
  }
  if (!g.ok()) return g;
  std::vector<int64_t> sizes(temb.sizes(), temb.sizes() + temb.dim());
  sizes[sizes.size() - 2] = 1;
  detail::check_table_split_outputs(g, out, kParts, DType::f32, sizes, table, temb, "temb");
  return g;
}

detail::TableSplitParams params(const TensorView& table, const TensorView& temb, std::span<const TensorView> out) {
  detail::TableSplitParams p;
  p.table_dtype = table.dtype();
  p.values_dtype = temb.dtype();
  p.device = temb.device().index;
  const bool per_token = temb.dim() == 4;
  p.outer[0] = temb.size(0);
  p.outer[1] = per_token ? temb.size(1) : 1;
  p.values_stride[0] = temb.stride(0);
  p.values_stride[1] = per_token ? temb.stride(1) : 0;
  p.values_part_stride = temb.stride(-2);
  p.cols = temb.size(-1);
  p.parts = kParts;
  p.table = table.data();
  p.table_part_stride = table.stride(-2);
  p.values = temb.data();
  for (int k = 0; k < kParts; ++k) p.out[k] = out[k].data();
  return p;
}

void temb_table_slices_host(const detail::TableSplitParams& p, Stream) {
  detail::dispatch_bf16_f16_f32(p.values_dtype, "temb_table_slices host kernel", [&](auto tag) {
    using Val = decltype(tag);
    detail::table_split_host<float, Val, float>(p, detail::TembTableAdd<Val>{});
  });
}

DFUSE_REGISTER_ENTRY(host, "temb_table_slices", &temb_table_slices_host);

}  // namespace

bool can_use_temb_table_slices(const TensorView& table, const TensorView& temb, std::span<const TensorView> out,
                               std::string* why) {
  return check(table, temb, out).answer(why);
}

void temb_table_slices(const TensorView& table, const TensorView& temb, std::span<const TensorView> out,
                       Stream stream) {
  check(table, temb, out).throw_if_failed();
  static detail::OpEntry entry("diffusion.temb_table_slices");
  entry.get<detail::TembTableSlicesEntry>(temb.device())(params(table, temb, out), stream);
}

}  // namespace dfuse
