// The CUDA side of the varlen row gather (common/row_gather.h): declared here, defined in
// cuda/row_gather.cu, registered by each varlen op's .cu as its entry.
#pragma once

#include "common/row_gather.h"

namespace dfuse::detail {

void launch_row_gather(const RowGatherParams& p, Stream stream);

}  // namespace dfuse::detail
