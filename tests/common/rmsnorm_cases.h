// The RMSNorm ops' test cases, run on any device: the host tests run them on the host, the GPU tests
// on CUDA. Each case builds fresh random inputs, runs the fused op and its eager chain (composed
// from the eager replicas) into differently poisoned outputs, and compares every output bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse::test {

enum class ModulationMode {
  per_batch,  // scale/shift [B, 1, D]
  per_token,  // [B, S, D]
  chunk6,     // slices of a [B, 1, 6D] table: strides [6D, 6D, 1]
};

struct RmsNormCase {
  std::string name;
  int64_t B = 1, S = 1, D = 1;
  ModulationMode mode = ModulationMode::per_batch;
  bool weight = true;
  int64_t x_row_pad = 0;  // x is a view into rows of D + pad elements
  int64_t x_offset = 0;   // x starts this many elements into its storage
  bool specials = false;  // NaN / Inf / -0 in the inputs
  bool in_place = false;  // out is x
  double amplitude = 1.0;
  double eps = 1e-6;
};

// Small shapes: every mode, odd sizes, strides, both F.rms_norm paths, every Reduce.cuh lane count.
std::vector<RmsNormCase> small_rmsnorm_cases();
// Model shapes: FLUX.1 (1, 4608, 3072), Wan 2.1 14B rows (D = 5120), odd D 1536/2560/3840,
// S 1/7/4097, B 3. For GPU runs.
std::vector<RmsNormCase> model_rmsnorm_cases();

// "" on a bitwise match with every element written, else what went wrong.
std::string run_rmsnorm_scale_shift_case(Device d, DType t, RmsNormChain chain, const RmsNormCase& c, uint64_t seed);

// rmsnorm_scale (x, weight, scale = the case's modulation layout) and rmsnorm_tanh_residual
// (residual [B, S, D], gate = the modulation layout, y = the case's x); in_place writes x / residual.
std::string run_rmsnorm_scale_case(Device d, DType t, const RmsNormCase& c, uint64_t seed);
std::string run_rmsnorm_tanh_residual_case(Device d, DType t, const RmsNormCase& c, uint64_t seed);

// Per-head QK RMSNorm: q and k [B, S, H, Dh], separate tensors or views of a packed projection.
struct QkRmsNormCase {
  std::string name;
  int64_t B = 1, S = 1, H = 1, Dh = 128;
  bool packed = true;     // q, k = qkv[:, :, 0], qkv[:, :, 1] of a [B, S, 3, H, Dh] projection
  bool weight = true;
  bool specials = false;
  bool in_place = false;  // q_out, k_out are q, k (separate tensors only)
  double eps = 1e-6;
};

std::vector<QkRmsNormCase> small_qk_rmsnorm_cases();
// Z-Image / FLUX.1 (1, 4608, 24, 128), Wan 2.1 rows (Dh 128, 40 heads), odd token counts.
std::vector<QkRmsNormCase> model_qk_rmsnorm_cases();
std::string run_qk_rmsnorm_case(Device d, DType t, RmsNormChain chain, const QkRmsNormCase& c, uint64_t seed);

}  // namespace dfuse::test
