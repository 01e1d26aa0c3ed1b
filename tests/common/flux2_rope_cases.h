// Test cases of FLUX.2's QK-norm + RoPE ops (flux2_strided_qknorm_rope, flux2_qkv_epilogue), run on
// any device: the host tests run them on the host, the GPU tests on CUDA. Each case builds fresh
// random inputs, runs the fused op and its eager chain into differently placed, poisoned outputs (or
// in place), compares every output bit, and checks that the inputs (and, for packed projections,
// the V and MLP columns) are left as they were.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

struct Flux2RopeCase {
  std::string name;
  int64_t batch = 1, seq = 1, heads = 1, head_dim = 128;
  int64_t txt_seq = 0;     // flux2_qkv_epilogue: text tokens before the `seq` image tokens
  bool packed = false;     // strided: q, k are views of one [B, S, 3 H D + mlp] projection; epilogue:
                           // to_qkv(...).chunk(3, -1) views of [B, S, 3 H D] projections
  int64_t mlp = 0;         // strided, packed: MLP columns after q, k, v
  bool weights = true;     // norm weights (elementwise_affine) or none
  bool table_in_x_dtype = false;  // cos/sin in x's dtype instead of fp32
  int64_t offset = 0;      // inputs start this many elements into their storage
  bool specials = false;   // NaN / Inf / -0 / tiny values in the inputs
  bool in_place = false;   // strided: the outputs are q and k themselves
  double amplitude = 1.0;  // input values uniform in (-2a, 2a)
};

// Small shapes covering every layout, odd sizes and strides: fast enough for the host.
std::vector<Flux2RopeCase> small_flux2_strided_cases();
// FLUX.2 Klein single-stream (24 x 128 over 4096 + 512 joint tokens, the packed QKV + MLP projection)
// and odd shapes (heads 1, 3, 30; tokens 1, 7, 4097). For GPU runs.
std::vector<Flux2RopeCase> model_flux2_strided_cases();
// "" on a bitwise match with every element written and the inputs intact, else what went wrong.
std::string run_flux2_strided_qknorm_rope_case(Device d, DType t, const Flux2RopeCase& c, uint64_t seed);

std::vector<Flux2RopeCase> small_flux2_epilogue_cases();
// FLUX.2 double-stream (24 x 128, 4096 image + 512 text tokens; FLUX.2 dev 48 heads) and odd shapes.
std::vector<Flux2RopeCase> model_flux2_epilogue_cases();
std::string run_flux2_qkv_epilogue_case(Device d, DType t, const Flux2RopeCase& c, uint64_t seed);

}  // namespace dfuse::test
