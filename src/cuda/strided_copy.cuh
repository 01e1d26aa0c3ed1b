// The CUDA side of the data-movement copy (common/strided_copy.h): declared here, defined in
// cuda/strided_copy.cu, registered by each op's .cu as its entry.
#pragma once

#include "common/strided_copy.h"

namespace dfuse::detail {

void launch_strided_copy(const StridedCopyParams& p, Stream stream);

}  // namespace dfuse::detail
