// The rope family's test cases, run on any device: the host tests run them on the host, the GPU
// tests on CUDA. Each case builds fresh random inputs, runs the fused op and its eager chain into
// differently placed, poisoned outputs (or in place), and compares every output bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/ops/rope.h"

namespace dfuse::test {

struct RopeCase {
  std::string name;
  int64_t batch = 1, seq = 1, heads = 1, head_dim = 64;
  int64_t rot_dim = 0;          // rope_rotate_half: R (0: the whole head)
  bool heads_first = false;     // x [B, H, S, D] with tables [S, R]; else x [B, S, H, D], tables [S, 1, R]
  bool packed = false;          // q (and k) are slices of one packed [B, S, 3, H, D] projection
  bool batched_table = false;   // tables carry the batch dim: [B, S, 1, R] / [B, 1, S, R]
  bool table_in_x_dtype = false;  // rope_rotate_half fp32_opmath: bf16/f16 tables instead of f32
  int64_t offset = 0;           // inputs start this many elements into their storage (misaligned)
  bool specials = false;        // NaN / Inf / -0 / tiny values in x
  bool in_place = false;        // the outputs are the inputs
};

// Small shapes covering every layout, odd sizes and strides: fast enough for the host in CI.
std::vector<RopeCase> small_rope_cases();
// Model shapes (FLUX.1/FLUX.2 Klein/Qwen-Image 24 x 128 over 4096 + 512 tokens, HunyuanVideo 24 x 128
// over 8190 tokens, LTX-2 32 x 128, SANA-Video 20 x 112) and odd ones (heads 1, 3, 30; tokens 7,
// 4097). For GPU runs.
std::vector<RopeCase> model_rope_cases();

// "" on a bitwise match with every element written, else what went wrong.
std::string run_rope_rotate_half_case(Device d, DType t, RopeMath math, const RopeCase& c, uint64_t seed);
// rope_interleaved_pairs (the whole head rotated: rot_dim is ignored): FLUX.1/FLUX.2/HunyuanVideo/
// LTX-Video shapes in both layouts. For GPU runs.
std::vector<RopeCase> model_rope_interleaved_pairs_cases();
std::string run_rope_interleaved_pairs_case(Device d, DType t, const RopeCase& c, uint64_t seed);
std::string run_interleaved_rope_fp64_case(Device d, DType t, const RopeCase& c, uint64_t seed);

// fused_inplace_qknorm_rope: heads of 128 or 256.
std::vector<RopeCase> small_qknorm_rope_cases();
std::vector<RopeCase> model_qknorm_rope_cases();
std::string run_qknorm_rope_case(Device d, DType t, RmsNormChain chain, RopeMath math, const RopeCase& c,
                                 uint64_t seed);

}  // namespace dfuse::test
