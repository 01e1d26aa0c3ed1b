// diffusion.varlen_pack_qkv: the CUDA entry is the shared varlen row gather (cuda/row_gather.cu);
// guards and gather parameters: ops/data_movement/varlen_pack_qkv.cpp.
#include "common/entries.h"
#include "cuda/row_gather.cuh"

DFUSE_REGISTER_ENTRY(cuda, "varlen_pack_qkv", &dfuse::detail::launch_row_gather);
