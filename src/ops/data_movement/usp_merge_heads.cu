// diffusion.usp_merge_heads: the CUDA entry is the shared data-movement copy
// (cuda/strided_copy.cu); views and guards: ops/data_movement/usp_merge_heads.cpp.
#include "common/entries.h"
#include "cuda/strided_copy.cuh"

DFUSE_REGISTER_ENTRY(cuda, "usp_merge_heads", &dfuse::detail::launch_strided_copy);
