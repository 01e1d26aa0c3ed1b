// diffusion.varlen_scatter_to_padded: the CUDA entry is the shared varlen row gather (cuda/row_gather.cu);
// guards and gather parameters: ops/data_movement/varlen_scatter_to_padded.cpp.
#include "common/entries.h"
#include "cuda/row_gather.cuh"

DFUSE_REGISTER_ENTRY(cuda, "varlen_scatter_to_padded", &dfuse::detail::launch_row_gather);
