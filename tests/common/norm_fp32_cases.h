// Test cases of the request-gated norm + epilogue ops with fp32 internals (norm_scale_shift,
// rmsnorm_modulate_fp32, rmsnorm_tanh_residual_fp32), run on any device: the host tests run them on
// the host, the GPU tests on CUDA. Each op is checked twice on fresh random data: bit for bit against
// its fp32 eager chain (the chain on float copies, rounded once; dfuse/eager/norm_fp32.h), and within
// its stated bound against the lossless chain it replaces (every op rounded to the storage dtype).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"
#include "dfuse/ops/norm.h"

namespace dfuse::test {

// How scale/shift (norm_scale_shift) or the gate (rmsnorm_tanh_residual_fp32) meet x [B, S, D].
enum class NormOperandMode {
  per_batch,  // [B, 1, D]
  per_token,  // [B, S, D]
  per_frame,  // [B, F, 1, D] against x [B, F, S / F, D]
  per_row,    // [B, S, 1]: one value per token
  scalar_0d,  // a 0-d tensor
  scalar_1,   // [1]
  chunk6,     // [B, 1, D] slices of a [B, 1, 6D] table: strides [6D, 6D, 1]
};

struct NormFp32Case {
  std::string name;
  int64_t B = 1, S = 1, D = 64;
  int64_t F = 1;  // per_frame: frames (S % F == 0)
  NormOperandMode mode = NormOperandMode::per_batch;
  NormKind norm = NormKind::layer_norm;  // norm_scale_shift only
  bool weight = false, bias = false;     // bias: layer_norm only
  int64_t x_row_pad = 0;  // x is a view into rows of D + pad elements (non-contiguous)
  int64_t x_offset = 0;   // x starts this many elements into its storage (misaligned)
  bool specials = false;  // NaN / Inf / -0 / denormals in the inputs
  bool in_place = false;  // out is x (norm_scale_shift) or residual (rmsnorm_tanh_residual_fp32)
  double amplitude = 1.0;
  double scale_amplitude = 0.5;  // scale / gate values in (-2a, 2a)
  double eps = 1e-6;
};

// Small shapes: both norms, with and without affine, every operand mode, both aten paths (D % 4,
// alignment), odd sizes, strided and in-place views, large scales, specials. Fast on the host.
std::vector<NormFp32Case> small_norm_fp32_cases();
// Model shapes: FLUX.1 (1, 4608, 3072), Wan 2.1 14B rows (D 5120, per frame), Qwen-Image (3072),
// LTX-2 (4096), hidden 1536/2560/3840, tokens 1/7/4097, batch 3, chunk(6) views, specials. For GPU runs.
std::vector<NormFp32Case> model_norm_fp32_cases();

// bf16/f16 x that takes aten's generic path only because it is misaligned: a fresh float copy
// would take the vectorized one, so the fp32 chain has another reduction order (the bound holds;
// the exact comparison does not apply).
inline bool fp32_chain_takes_another_path(DType t, const NormFp32Case& c) {
  return t != DType::f32 && c.D % 4 == 0 && c.x_offset % 4 != 0 && c.x_row_pad == 0;
}
// Rows the float mean splits across warps (D above about 8160) are refused by
// rmsnorm_tanh_residual_fp32 (its guard test) and by the eager mean replica.
inline bool tanh_residual_row_fits(const NormFp32Case& c) { return c.D <= 8160; }

// Which public op a norm_scale_shift case runs: norm_scale_shift itself (the case's norm), or (RMSNorm
// cases without bias) rmsnorm_modulate_fp32, whose chain is diffusers' RMSNorm module + modulate.
enum class ModulateFp32Op { norm_scale_shift, rmsnorm_modulate_fp32 };

// The op vs its fp32 chain (in f32: the lossless chain, which is the same), bit for bit ("" on a
// match with every element written). Not for norm_scale_shift cases where
// fp32_chain_takes_another_path.
std::string run_norm_scale_shift_exact_case(Device d, DType t, ModulateFp32Op op, const NormFp32Case& c,
                                            uint64_t seed);
// The op vs the lossless chain: every element within 6u (|n (1 + scale)| + |shift|) + 2 eta (|1 +
// scale| + 2) (rmsnorm_modulate_fp32: 7u (...) + 2 eta ((|weight| + 1) |1 + scale| + 2)), eta half
// the dtype's smallest subnormal; NaN/Inf where the chain has them. `max_ratio` receives the largest
// |out - chain| / bound seen.
std::string run_norm_scale_shift_bound_case(Device d, DType t, ModulateFp32Op op, const NormFp32Case& c,
                                            uint64_t seed, double* max_ratio = nullptr);
// norm_scale_shift (layer_norm, f16) on rows built so that one element normalizes to an f16
// subnormal (about 2^-18 to 2^-16), with 1 + scale = 32 and shift 0: "" when every element is within
// the stated bound; `beyond_relative` receives how many elements exceed its relative part 6u |n (1 +
// scale)| alone (the chain's absolute rounding error of such an n, times 32).
std::string run_norm_scale_shift_subnormal_case(Device d, int* beyond_relative);

// rmsnorm_tanh_residual_fp32 (y = the case's x, residual [B, S, D], gate in the case's mode, weight
// if the case has one) vs its fp32 chain, bit for bit.
std::string run_rmsnorm_tanh_residual_fp32_exact_case(Device d, DType t, const NormFp32Case& c, uint64_t seed);
// The same op vs the storage-dtype chain: within 10u (|tanh(gate) n| + |residual|) + eta (3
// |tanh(gate) n| / (mean(y^2) + eps) + 2 |tanh(gate)| (|weight| + 1) + 2 |n| + 4), on rows whose
// squares do not overflow and whose statistics clear underflow (mean(y^2) + eps >= 16 eta).
std::string run_rmsnorm_tanh_residual_fp32_bound_case(Device d, DType t, const NormFp32Case& c, uint64_t seed,
                                                      double* max_ratio = nullptr);

}  // namespace dfuse::test
