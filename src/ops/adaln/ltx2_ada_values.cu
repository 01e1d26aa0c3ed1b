// diffusion.ltx2_ada_values: the CUDA kernel (table split, see cuda/table_split.cuh). Contract
// and arithmetic: ops/adaln/ltx2_ada_values.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/table_split.cuh"
#include "ops/adaln/ltx2_ada_values.h"

namespace dfuse::detail {

namespace {

void ltx2_ada_values_cuda(const TableSplitParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.table_dtype, "ltx2_ada_values kernel", [&](auto table_tag) {
    dispatch_bf16_f16_f32(p.values_dtype, "ltx2_ada_values kernel", [&](auto value_tag) {
      using Tab = decltype(table_tag);
      using Val = decltype(value_tag);
      launch_table_split<Tab, Val, Val>(p, Ltx2AdaValue<Tab, Val>{}, stream);
    });
  });
}

}  // namespace

DFUSE_REGISTER_ENTRY(cuda, "ltx2_ada_values", &ltx2_ada_values_cuda);

}  // namespace dfuse::detail
