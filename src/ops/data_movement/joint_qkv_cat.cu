// diffusion.joint_qkv_cat: the CUDA entry is the shared data-movement copy
// (cuda/strided_copy.cu); views and guards: ops/data_movement/joint_qkv_cat.cpp.
#include "common/entries.h"
#include "cuda/strided_copy.cuh"

DFUSE_REGISTER_ENTRY(cuda, "joint_qkv_cat", &dfuse::detail::launch_strided_copy);
