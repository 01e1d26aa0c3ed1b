// diffusion.temb_table_slices: the CUDA kernel (table split, see cuda/table_split.cuh). Contract
// and arithmetic: ops/adaln/temb_table_slices.h.
#include "common/dispatch.h"
#include "common/entries.h"
#include "cuda/table_split.cuh"
#include "ops/adaln/temb_table_slices.h"

namespace dfuse::detail {

namespace {

void temb_table_slices_cuda(const TableSplitParams& p, Stream stream) {
  dispatch_bf16_f16_f32(p.values_dtype, "temb_table_slices kernel", [&](auto tag) {
    using Val = decltype(tag);
    launch_table_split<float, Val, float>(p, TembTableAdd<Val>{}, stream);
  });
}

}  // namespace

DFUSE_REGISTER_ENTRY(cuda, "temb_table_slices", &temb_table_slices_cuda);

}  // namespace dfuse::detail
