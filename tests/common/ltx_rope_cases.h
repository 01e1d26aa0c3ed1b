// Test cases of the LTX RoPE ops (ltx2_qknorm_split_rope, ltx25_decoder_rope), run on any device: the host tests run
// them on the host, the GPU tests on CUDA. Each case builds fresh random inputs, runs the fused op
// and the eager chain into differently placed, poisoned outputs (or in place), and compares every
// output bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

struct Ltx2SplitRopeCase {
  std::string name;
  int64_t batch = 1, seq = 1, heads = 1, head_dim = 64;
  int64_t k_seq = 0;            // k's tokens (cross-attention) with its own tables; 0: q's shape, q's tables
  int64_t k_heads = 0;          // k's heads when k_seq is set (0: q's)
  bool weight = true;           // elementwise_affine: norm weights [C]
  bool packed = false;          // q, k are slices of one [B, S, 3C] projection (strided rows)
  int64_t offset = 0;           // inputs start this many elements into their storage (misaligned)
  bool contiguous_tables = false;  // tables stored [B, H, S, r] instead of diffusers' swapaxes view of [B, S, H, r]
  bool specials = false;        // NaN / Inf / -0 / tiny values in q and k
  bool in_place = false;        // the outputs are the inputs
};

// Small shapes covering every layout, odd sizes and strides: fast enough for the host in CI.
std::vector<Ltx2SplitRopeCase> small_ltx2_split_rope_cases();
// LTX-2 shapes (32 x 128 video self-attention, audio-video cross-attention) and odd ones (heads 1,
// 3, 30; tokens 1, 7, 4097). For GPU runs.
std::vector<Ltx2SplitRopeCase> model_ltx2_split_rope_cases();
// "" on a bitwise match with every element written, else what went wrong.
std::string run_ltx2_split_rope_case(Device d, DType t, const Ltx2SplitRopeCase& c, uint64_t seed);

struct Ltx25DecoderRopeCase {
  std::string name;
  int64_t batch = 1, frames = 1, height = 1, width = 1, heads = 1, head_dim = 64;
  bool packed = false;          // q, k are slots of one [B, T, H, W, 3 * heads * D] projection
  bool strided_tables = false;  // table rows are slices of wider rows
  int64_t offset = 0;           // inputs start this many elements into their storage (misaligned)
  bool specials = false;        // NaN / Inf / -0 / tiny values in q and k
  bool in_place = false;        // the outputs are the inputs
};

// ltx25_decoder_rope: small shapes for the host, decoder shapes (head_dim 64 and 128) and odd ones for
// GPU runs.
std::vector<Ltx25DecoderRopeCase> small_ltx25_decoder_rope_cases();
std::vector<Ltx25DecoderRopeCase> model_ltx25_decoder_rope_cases();
std::string run_ltx25_decoder_rope_case(Device d, DType t, const Ltx25DecoderRopeCase& c, uint64_t seed);

}  // namespace dfuse::test
