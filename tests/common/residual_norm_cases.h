// Test cases of diffusion.scale_residual_norm_scale_shift (normalization family), run on any device:
// the host tests run them on the host, the GPU tests on CUDA. Each case builds fresh random inputs,
// runs the fused op and its eager chain (residual_gate_add_chain, then layernorm_modulate_chain or
// rmsnorm_scale_shift_chain on the chain's fresh r) into poisoned outputs, and compares every bit
// of both outputs (r and the modulated value).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/layernorm_cases.h"
#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/ops/norm.h"

namespace dfuse::test {

// How gate is laid out against residual [B, S, D].
enum class GateMode {
  per_batch,        // [B, 1, D]
  per_token,        // [B, S, D]
  per_token_scalar, // [B, S, 1]
  chunk6,           // slice 2 of a [B, 1, 6D] table: strides [6D, 6D, 1]
};

struct ResidualNormCase {
  std::string name;
  ResidualNorm norm = ResidualNorm::layer_norm;
  int64_t B = 1, S = 1, D = 4;
  GateMode gate = GateMode::per_batch;
  ModulationMode mode = ModulationMode::per_batch;  // scale (chunk 1) and shift (chunk 0)
  bool weight = false;            // rms_norm only
  int64_t weight_offset = 0;      // weight starts this many elements into its storage (misaligned: generic path)
  int64_t residual_row_pad = 0;   // residual is a view into rows of D + pad elements
  bool specials = false;          // NaN / Inf / -0 / denormals in the inputs
  bool in_place = false;          // residual_out is residual
  double eps = 1e-6;
};

// Small shapes for both norms: both aten paths (D % 4, weight alignment), every gate and
// modulation layout, D 1536/2560/3840 and D not a multiple of 4. Fast enough for the host in CI.
std::vector<ResidualNormCase> small_residual_norm_cases();
// Model shapes: FLUX.1 (1, 4608, 3072), Wan 2.1 rows (D = 5120; a tenth of its 75600 tokens),
// Qwen-Image-like per-token gates, odd D. For GPU runs.
std::vector<ResidualNormCase> model_residual_norm_cases();

// scale_residual_norm_scale_shift vs its eager chain on `d`. "" when both outputs match bit for bit
// with every element written.
std::string run_scale_residual_norm_case(Device d, DType t, const ResidualNormCase& c, uint64_t seed);

}  // namespace dfuse::test
