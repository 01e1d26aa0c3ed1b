// Test cases of helios_qk_rope, run on any device: the host tests run them on the host, the GPU tests
// on CUDA. Each case builds fresh random inputs, runs the fused op and the eager chain into
// differently placed, poisoned outputs (or in place), and compares every output bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

struct HeliosRopeCase {
  std::string name;
  int64_t batch = 1, seq = 1, heads = 1, head_dim = 64;
  bool packed = false;            // q, k are slots of one [B, S, 3 * heads * D] projection
  bool transposed_table = false;  // freqs is the [B, 2D, S] table viewed [B, S, 2D] (before .contiguous())
  bool batch_one_table = false;   // freqs [1, S, 2D] broadcast over the batch
  int64_t offset = 0;             // inputs start this many elements into their storage (misaligned)
  bool specials = false;          // NaN / Inf / -0 / tiny values in q and k
  bool in_place = false;          // the outputs are the inputs (the model's use)
};

std::vector<HeliosRopeCase> small_helios_rope_cases();
// Helios (Wan-based: 40 x 128) shapes and odd ones (heads 1, 3, 30; tokens 1, 7, 4097). For GPU runs.
std::vector<HeliosRopeCase> model_helios_rope_cases();
// "" on a bitwise match with every element written, else what went wrong.
std::string run_helios_rope_case(Device d, DType t, const HeliosRopeCase& c, uint64_t seed);

}  // namespace dfuse::test
