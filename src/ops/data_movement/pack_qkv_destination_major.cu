// diffusion.pack_qkv_destination_major: the CUDA entry is the shared data-movement copy
// (cuda/strided_copy.cu); views and guards: ops/data_movement/pack_qkv_destination_major.cpp.
#include "common/entries.h"
#include "cuda/strided_copy.cuh"

DFUSE_REGISTER_ENTRY(cuda, "pack_qkv_destination_major", &dfuse::detail::launch_strided_copy);
