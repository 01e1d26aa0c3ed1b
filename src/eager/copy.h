// The eager copy replica's parameters and entry type, shared by the host loop and the CUDA kernel.
#pragma once

#include <cstdint>

#include "dfuse/core/device.h"
#include "dfuse/core/tensor_view.h"

namespace dfuse::eager::detail {

struct CopyParams {
  const void* src;
  void* dst;
  int element_bytes;
  int ndim;
  int64_t numel;
  int64_t sizes[TensorView::kMaxDims];
  int64_t src_strides[TensorView::kMaxDims];
  int64_t dst_strides[TensorView::kMaxDims];
};

using CopyEntry = void (*)(const CopyParams& p, Stream stream);

}  // namespace dfuse::eager::detail
