// The LayerNorm ops' test cases (normalization family), run on any device: the host tests run
// them on the host, the GPU tests on CUDA. Each case builds fresh random inputs, runs the fused op
// and its eager chain (built from the eager layer_norm and binary replicas) into differently
// poisoned outputs, and compares every output bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfuse/core/device.h"
#include "dfuse/core/dtype.h"

namespace dfuse::test {

// How scale and shift are laid out against x [B, S, D].
enum class ModulationMode {
  per_batch,  // [B, 1, D]
  per_token,  // [B, S, D]
  chunk6,     // slices 1 (scale) and 0 (shift) of a [B, 1, 6D] table: strides [6D, 6D, 1]
};

struct LayernormCase {
  std::string name;
  int64_t B = 1, S = 1, D = 4;
  ModulationMode mode = ModulationMode::per_batch;
  int64_t x_row_pad = 0;  // x is a view into rows of D + pad elements (non-contiguous: aten copies it)
  int64_t x_offset = 0;   // x starts this many elements into its storage (misaligned: generic path)
  bool specials = false;  // NaN / Inf / -0 / denormals in the inputs
  bool in_place = false;  // out is x
  double amplitude = 1.0;
  double eps = 1e-6;
};

// Small shapes covering both aten paths (D % 4, alignment), every modulation mode, D below and
// above the block widths (128 chunks, 512 threads): fast enough for the host in CI.
std::vector<LayernormCase> small_layernorm_cases();
// Model shapes: FLUX.1 (1, 4608, 3072), Wan 2.1 14B rows (D = 5120; a tenth of its 75600 tokens),
// D 1536/2560/3840, S 1/7/4097, B 3, misaligned and odd-D generic paths. For GPU runs.
std::vector<LayernormCase> model_layernorm_cases();

// layernorm_modulate vs its eager chain on `d`. "" on a bitwise match with every element written.
std::string run_layernorm_modulate_case(Device d, DType t, const LayernormCase& c, uint64_t seed);

// qk_head_layernorm: q [B, S, H, Dh] and k [B, Sk, H, Dh].
struct QkHeadCase {
  std::string name;
  int64_t B = 1, S = 1, H = 1, Dh = 128;
  int64_t Sk = 0;           // k's tokens (0: S)
  bool packed = false;      // q and k are views of one [B, S, 3 * H * Dh] projection (S == Sk)
  int64_t q_offset = 0;     // q starts this many elements into its own storage (misaligned: generic path)
  bool weight = true, bias = true;
  bool specials = false;
  bool in_place = false;    // q_out is q and k_out is k
  double eps = 1e-6;
};

std::vector<QkHeadCase> small_qk_head_cases();
// Model shapes: FLUX.1-like joint attention heads (4608 tokens, 24 heads of 128), Wan-like 40 heads.
std::vector<QkHeadCase> model_qk_head_cases();
// qk_head_layernorm vs the eager pair of layer_norm replicas on `d`, both outputs bit for bit.
std::string run_qk_head_layernorm_case(Device d, DType t, const QkHeadCase& c, uint64_t seed);

// layernorm_folded_modulate over the LayerNorm cases whose scale/shift are one row (B == 1,
// per_batch or chunk6; the others return ""): bit-exact against
// F.layer_norm(x, (D,), 1 + scale, shift, eps) built from the eager replicas.
std::string run_layernorm_folded_case(Device d, DType t, const LayernormCase& c, uint64_t seed);
// The same op against the lossless chain F.layer_norm(x) * (1 + scale) + shift: every element within
// the stated bound 4u(|n (1 + scale)| + |shift|) + 2 eta (|1 + scale| + 2) (n the chain's normalized
// value, u the unit roundoff, eta half the smallest subnormal). Also reports, through `max_ratio`,
// the largest |out - chain| / bound seen.
std::string run_layernorm_folded_bound_case(Device d, DType t, const LayernormCase& c, uint64_t seed,
                                            double* max_ratio = nullptr);

// fp32_layernorm_bf16: x [B, S, D] bf16/f16, f32 weight/bias.
struct Fp32LayerNormCase {
  std::string name;
  int64_t B = 1, S = 1, D = 4;
  bool weight = true, bias = true;
  int64_t affine_offset = 0;  // weight/bias start this many floats into their storage (misaligned: generic)
  int64_t x_row_pad = 0;      // x is a view into rows of D + pad elements
  bool specials = false;
  bool in_place = false;
  double eps = 1e-6;
};

std::vector<Fp32LayerNormCase> small_fp32_layernorm_cases();
// LingBot World / Wan-like rows (D 5120), FLUX width, odd widths. For GPU runs.
std::vector<Fp32LayerNormCase> model_fp32_layernorm_cases();
// fp32_layernorm_bf16 vs its eager chain (cast, layer_norm in f32, cast) on `d`; `t` is x's dtype
// (bf16 or f16). "" on a bitwise match with every element written.
std::string run_fp32_layernorm_case(Device d, DType t, const Fp32LayerNormCase& c, uint64_t seed);

}  // namespace dfuse::test
