// The adaLN family's test cases, run on any device: the host tests run them on the host, the
// GPU tests on CUDA. Each case builds fresh random inputs, runs the fused op and its eager chain
// into differently poisoned outputs, and compares every output bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

// How a broadcast operand (scale, shift, gate) is laid out against x [B, S, D] or
// x [B, F, HW, D].
enum class OperandMode {
  per_batch,  // [B, 1, D]            ([B, 1, 1, D] against a 4-D x)
  per_token,  // [B, S, D]            (full)
  per_frame,  // [B, F, 1, D]         (4-D x only)
  per_row,    // [B, S, 1]            (one value per token)
  chunk6,     // slice k of a [B, 1, 6D] modulation tensor: strides [6D, 6D, 1]
};

struct AdalnCase {
  std::string name;
  int64_t B = 1, F = 0, S = 1, D = 1;  // F > 0: x is [B, F, S, D] (S = tokens per frame)
  OperandMode mode = OperandMode::per_batch;
  int64_t x_row_pad = 0;   // x is a view into rows of D + pad elements (strided outer dims)
  int64_t x_offset = 0;    // x starts this many elements into its storage (misaligned for > 0)
  bool specials = false;   // NaN / Inf / -0 in the inputs
  bool in_place = false;   // out is x (modulate) or residual (gate)
  double amplitude = 1.0;
};

// Small shapes covering every mode, odd sizes and strides: fast enough for the host in CI.
std::vector<AdalnCase> small_adaln_cases();
// Model shapes: FLUX.1 (1, 4608, 3072), Wan 2.1 14B rows (D = 5120; a tenth of its 75600
// tokens: the full shape is checked against torch by pytest and `dfuse verify`), odd hidden
// sizes and token counts. For GPU runs.
std::vector<AdalnCase> model_adaln_cases();

// "" on a bitwise match with every element written, else what went wrong.
std::string run_modulate_case(Device d, DType t, const AdalnCase& c, uint64_t seed);
std::string run_residual_gate_case(Device d, DType t, const AdalnCase& c, uint64_t seed);

}  // namespace dfuse::test
