// Test cases of the adaLN value ops (temb_table_slices, ltx2_ada_values, scaled_residual_bf16,
// timestep_embedding), run on any device: the host tests run them on the host, the GPU tests on
// CUDA. Each case builds fresh random inputs, runs the fused op into poisoned outputs, and
// compares them with a host replica of the eager chain written op by op as torch runs it (every
// intermediate materialized and rounded as torch rounds it; the eager replicas of
// dfuse/eager do not cover mixed-dtype promotion). On CUDA the replica gives NaN results of float
// arithmetic the GPU's canonical NaN.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/ops/adaln.h"

namespace dfuse::test {

// temb [B, 6, D] (S == 0) or [B, S, 6, D]; fp32 table [1, 6, D] (table_rank 3), [6, D] (2) or
// [1, 1, 6, D] (4).
struct TembSlicesCase {
  std::string name;
  int64_t B = 1, S = 0, D = 1;
  int table_rank = 3;
  int64_t temb_pad = 0;     // temb's parts are D + pad apart (a view into a wider tensor)
  int64_t temb_offset = 0;  // temb starts this many elements into its storage
  bool specials = false;
};
std::vector<TembSlicesCase> small_temb_slices_cases();
// Model hidden sizes with token counts cut down (the host computes the reference): Wan 2.1 14B,
// Wan 2.2 TI2V per token; full shapes are checked against torch by pytest.
std::vector<TembSlicesCase> model_temb_slices_cases();
std::string run_temb_slices_case(Device d, DType temb_dtype, const TembSlicesCase& c, uint64_t seed);

// table [n, D], timestep [B, T, n * D].
struct Ltx2Case {
  std::string name;
  int64_t B = 1, T = 1, n = 9, D = 1;
  int64_t timestep_pad = 0;  // timestep rows are n * D + pad apart
  int64_t timestep_offset = 0;
  bool specials = false;
};
std::vector<Ltx2Case> small_ltx2_cases();
std::vector<Ltx2Case> model_ltx2_cases();  // LTX-2 D = 4096, per batch and per token
std::string run_ltx2_case(Device d, DType table_dtype, DType timestep_dtype, const Ltx2Case& c, uint64_t seed);

enum class ScaledGate {
  per_frame,  // [B, F, 1, D] against x [B, F, S, D]
  per_batch,  // [B, 1, D] against x [B, S, D]
  per_token,  // x's shape
  per_row,    // [B, S, 1]
  chunk6,     // slice 2 of an fp32 [B, F, 6, D] modulation: [B, F, 1, D], strides [6FD, 6D, D, 1]
};
// x (residual), y (update) bf16 [B, S, D] or [B, F, S, D] (F > 0).
struct ScaledResidualCase {
  std::string name;
  int64_t B = 1, F = 0, S = 1, D = 1;
  ScaledGate gate = ScaledGate::per_frame;
  int64_t x_pad = 0;     // x rows are D + pad apart
  int64_t x_offset = 0;  // x starts this many elements into its storage
  bool in_place = false;
  bool specials = false;
};
std::vector<ScaledResidualCase> small_scaled_residual_cases();
std::vector<ScaledResidualCase> model_scaled_residual_cases();  // LingBot World (Wan 2.2 A14B rows)
std::string run_scaled_residual_case(Device d, const ScaledResidualCase& c, uint64_t seed);

struct TimestepEmbeddingCase {
  std::string name;
  int64_t N = 1, dim = 256;
  TimestepEmbeddingOptions options;
  double t_max = 1000.0;    // timesteps uniform in (0, t_max)
  int64_t out_row_pad = 0;  // out rows are dim + pad apart
};
std::vector<TimestepEmbeddingCase> timestep_embedding_cases();
// Checks the contract bound |out - ref| <= 2^-20 * max(1, |scale * t|) against the fp32 chain with
// correctly rounded exp/sin/cos (ref); writes the largest |out - ref| / max(1, |scale * t|) seen
// into *worst. "" when within the bound, the pad column is zero and every element is written.
std::string run_timestep_embedding_case(Device d, DType timesteps_dtype, const TimestepEmbeddingCase& c, uint64_t seed,
                                        double* worst);

}  // namespace dfuse::test
