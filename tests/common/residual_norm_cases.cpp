#include "common/residual_norm_cases.h"

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/core/runtime.h"
#include "dfuse/eager/chains.h"
#include "dfuse/eager/rms_norm.h"

namespace dfuse::test {

namespace {

constexpr ResidualNorm LN = ResidualNorm::layer_norm;
constexpr ResidualNorm RMS = ResidualNorm::rms_norm;

TestTensor make_residual(Device d, DType t, const ResidualNormCase& c, uint64_t seed) {
  const int64_t row = c.D + c.residual_row_pad;
  return random_tensor(d, t, {c.B, c.S, c.D}, {c.S * row, row, 1}, 0, {seed, 1.0, c.specials});
}

TestTensor make_gate(Device d, DType t, const ResidualNormCase& c, uint64_t seed) {
  const RandomSpec r{seed, 0.5, c.specials};
  switch (c.gate) {
    case GateMode::per_batch: return random_tensor(d, t, {c.B, 1, c.D}, {}, 0, r);
    case GateMode::per_token: return random_tensor(d, t, {c.B, c.S, c.D}, {}, 0, r);
    case GateMode::per_token_scalar: return random_tensor(d, t, {c.B, c.S, 1}, {}, 0, r);
    case GateMode::chunk6:
      return random_tensor(d, t, {c.B, 1, c.D}, {6 * c.D, 6 * c.D, 1}, 2 * c.D, r, c.B * 6 * c.D);
  }
  return {};
}

// scale (chunk 1) or shift (chunk 0) in the case's mode.
TestTensor make_modulation(Device d, DType t, const ResidualNormCase& c, int chunk, uint64_t seed) {
  const RandomSpec r{seed, 0.5, c.specials};
  switch (c.mode) {
    case ModulationMode::per_batch: return random_tensor(d, t, {c.B, 1, c.D}, {}, 0, r);
    case ModulationMode::per_token: return random_tensor(d, t, {c.B, c.S, c.D}, {}, 0, r);
    case ModulationMode::chunk6:
      return random_tensor(d, t, {c.B, 1, c.D}, {6 * c.D, 6 * c.D, 1}, chunk * c.D, r, c.B * 6 * c.D);
  }
  return {};
}

}  // namespace

std::vector<ResidualNormCase> small_residual_norm_cases() {
  using G = GateMode;
  using M = ModulationMode;
  return {
      {.name = "ln_per_batch", .norm = LN, .B = 2, .S = 37, .D = 64},
      {.name = "ln_per_token", .norm = LN, .B = 1, .S = 7, .D = 192, .gate = G::per_token, .mode = M::per_token},
      {.name = "ln_token_scalar_gate", .norm = LN, .B = 2, .S = 9, .D = 128, .gate = G::per_token_scalar},
      {.name = "ln_chunk6", .norm = LN, .B = 3, .S = 11, .D = 96, .gate = G::chunk6, .mode = M::chunk6},
      {.name = "ln_d1536", .norm = LN, .B = 1, .S = 5, .D = 1536, .gate = G::chunk6, .mode = M::chunk6},
      {.name = "ln_d2560", .norm = LN, .B = 1, .S = 3, .D = 2560, .gate = G::per_token, .mode = M::per_token},
      {.name = "ln_d3840", .norm = LN, .B = 2, .S = 2, .D = 3840, .gate = G::per_batch, .mode = M::chunk6},
      {.name = "ln_odd_d_generic", .norm = LN, .B = 2, .S = 5, .D = 77, .gate = G::per_token_scalar},
      {.name = "ln_d_mod4_2_generic", .norm = LN, .B = 1, .S = 4, .D = 1534, .gate = G::per_token,
       .mode = M::per_token},
      {.name = "ln_d1_generic", .norm = LN, .B = 1, .S = 6, .D = 1, .gate = G::per_token, .mode = M::per_token},
      {.name = "ln_strided_residual", .norm = LN, .B = 2, .S = 6, .D = 64, .gate = G::chunk6,
       .residual_row_pad = 3},
      {.name = "ln_specials", .norm = LN, .B = 2, .S = 33, .D = 128, .gate = G::per_token, .mode = M::per_token,
       .specials = true},
      {.name = "ln_specials_generic", .norm = LN, .B = 1, .S = 9, .D = 130, .gate = G::chunk6, .mode = M::chunk6,
       .specials = true},
      {.name = "ln_in_place", .norm = LN, .B = 2, .S = 17, .D = 72, .gate = G::chunk6, .mode = M::chunk6,
       .in_place = true},
      {.name = "ln_max_d", .norm = LN, .B = 1, .S = 2, .D = 8192, .mode = M::chunk6},
      // The longest rows held in registers on CUDA (6144), the shortest staged ones (6148), 16-byte chunks at 4096.
      {.name = "ln_d6144_in_place", .norm = LN, .B = 1, .S = 3, .D = 6144, .gate = G::chunk6, .mode = M::chunk6,
       .in_place = true},
      {.name = "ln_d6148_staged", .norm = LN, .B = 2, .S = 2, .D = 6148, .gate = G::per_token, .mode = M::per_token},
      {.name = "ln_d4096_token_scalar_gate", .norm = LN, .B = 2, .S = 3, .D = 4096, .gate = G::per_token_scalar},
      {.name = "rms_per_batch", .norm = RMS, .B = 2, .S = 37, .D = 64},
      {.name = "rms_weight_per_token", .norm = RMS, .B = 1, .S = 7, .D = 192, .gate = G::per_token,
       .mode = M::per_token, .weight = true},
      {.name = "rms_weight_chunk6", .norm = RMS, .B = 3, .S = 11, .D = 96, .gate = G::chunk6, .mode = M::chunk6,
       .weight = true},
      {.name = "rms_token_scalar_gate", .norm = RMS, .B = 2, .S = 9, .D = 128, .gate = G::per_token_scalar,
       .weight = true},
      {.name = "rms_d1536", .norm = RMS, .B = 1, .S = 5, .D = 1536, .gate = G::chunk6, .mode = M::chunk6,
       .weight = true},
      {.name = "rms_d2560", .norm = RMS, .B = 1, .S = 3, .D = 2560, .gate = G::per_token, .mode = M::per_token},
      {.name = "rms_d3840", .norm = RMS, .B = 2, .S = 2, .D = 3840, .mode = M::chunk6, .weight = true},
      {.name = "rms_odd_d_generic", .norm = RMS, .B = 2, .S = 5, .D = 77, .weight = true},
      {.name = "rms_d_mod4_2_generic", .norm = RMS, .B = 1, .S = 4, .D = 1534, .gate = G::per_token,
       .mode = M::per_token},
      {.name = "rms_misaligned_weight_generic", .norm = RMS, .B = 1, .S = 6, .D = 256, .gate = G::chunk6,
       .weight = true, .weight_offset = 1},
      {.name = "rms_strided_residual", .norm = RMS, .B = 2, .S = 6, .D = 64, .weight = true, .residual_row_pad = 5},
      {.name = "rms_specials", .norm = RMS, .B = 2, .S = 33, .D = 128, .gate = G::per_token, .mode = M::per_token,
       .weight = true, .specials = true},
      {.name = "rms_in_place", .norm = RMS, .B = 2, .S = 17, .D = 72, .gate = G::chunk6, .mode = M::chunk6,
       .weight = true, .in_place = true},
      {.name = "rms_large_eps", .norm = RMS, .B = 1, .S = 7, .D = 128, .eps = 1e-2},
      {.name = "rms_d6144_specials", .norm = RMS, .B = 1, .S = 9, .D = 6144, .gate = G::per_token,
       .mode = M::per_token, .weight = true, .specials = true},
      {.name = "rms_max_d", .norm = RMS, .B = 1, .S = 2, .D = 8192, .gate = G::chunk6, .mode = M::chunk6, .weight = true},
  };
}

std::vector<ResidualNormCase> model_residual_norm_cases() {
  using G = GateMode;
  using M = ModulationMode;
  return {
      {.name = "flux1_ln_chunk6", .norm = LN, .B = 1, .S = 4608, .D = 3072, .gate = G::chunk6, .mode = M::chunk6},
      {.name = "flux1_ln_in_place", .norm = LN, .B = 1, .S = 4608, .D = 3072, .gate = G::chunk6,
       .mode = M::chunk6, .in_place = true},
      {.name = "wan21_ln_rows", .norm = LN, .B = 1, .S = 7560, .D = 5120, .gate = G::chunk6, .mode = M::chunk6},
      {.name = "qwen_image_ln_per_token", .norm = LN, .B = 1, .S = 4096, .D = 3072, .gate = G::per_token,
       .mode = M::per_token},
      {.name = "ln_d1536_b3", .norm = LN, .B = 3, .S = 4097, .D = 1536, .gate = G::per_token_scalar},
      {.name = "ln_d2560_s4097", .norm = LN, .B = 1, .S = 4097, .D = 2560, .gate = G::chunk6, .mode = M::chunk6},
      {.name = "ln_d3840_s1", .norm = LN, .B = 1, .S = 1, .D = 3840, .gate = G::chunk6, .mode = M::chunk6},
      {.name = "ln_odd_d_generic", .norm = LN, .B = 1, .S = 4097, .D = 3070, .gate = G::chunk6, .mode = M::chunk6},
      {.name = "flux1_rms_weight", .norm = RMS, .B = 1, .S = 4608, .D = 3072, .gate = G::chunk6, .mode = M::chunk6,
       .weight = true},
      {.name = "wan21_rms_rows", .norm = RMS, .B = 1, .S = 7560, .D = 5120, .gate = G::per_token,
       .mode = M::per_token, .weight = true},
      {.name = "rms_odd_d_generic", .norm = RMS, .B = 1, .S = 4097, .D = 3070, .weight = true},
      {.name = "rms_misaligned_weight_generic", .norm = RMS, .B = 1, .S = 4097, .D = 3072, .weight = true,
       .weight_offset = 1},
      {.name = "rms_specials", .norm = RMS, .B = 1, .S = 4608, .D = 3072, .gate = G::per_token,
       .mode = M::per_token, .specials = true},
  };
}

std::string run_scale_residual_norm_case(Device d, DType t, const ResidualNormCase& c, uint64_t seed) {
  auto residual = make_residual(d, t, c, seed);
  auto gate = make_gate(d, t, c, seed + 1);
  auto update = random_tensor(d, t, {c.B, c.S, c.D}, {}, 0, {seed + 2, 1.0, c.specials});
  auto scale = make_modulation(d, t, c, 1, seed + 3);
  auto shift = make_modulation(d, t, c, 0, seed + 4);
  TestTensor weight;
  if (c.weight)
    weight = random_tensor(d, t, {c.D}, {}, c.weight_offset, {seed + 5, 1.0, c.specials}, c.D + c.weight_offset);
  const TensorView* w = c.weight ? &weight.view : nullptr;
  const std::vector<int64_t> sizes{c.B, c.S, c.D};

  // The eager chain: r is a fresh contiguous tensor, normalized and modulated by the next chain.
  auto r_eager = poisoned_tensor(d, t, sizes, kOutputPoison);
  auto out_eager = poisoned_tensor(d, t, sizes, kOutputPoison);
  eager::Workspace ws_add(d), ws_norm(d);
  eager::residual_gate_add_chain(residual.view, gate.view, update.view, r_eager.view, ws_add);
  if (c.norm == ResidualNorm::layer_norm)
    eager::layernorm_modulate_chain(r_eager.view, scale.view, shift.view, c.eps, out_eager.view, ws_norm);
  else
    eager::rmsnorm_scale_shift_chain(RmsNormChain::torch_rms_norm, r_eager.view, w, c.eps, scale.view, shift.view,
                                     out_eager.view, ws_norm);

  TestTensor r_fused;
  const TensorView& r_out = c.in_place ? residual.view : (r_fused = poisoned_tensor(d, t, sizes, kOutputPoison)).view;
  auto out_fused = poisoned_tensor(d, t, sizes, kOutputPoison);
  std::string why;
  if (!can_use_scale_residual_norm_scale_shift(c.norm, residual.view, gate.view, update.view, w, c.eps, scale.view,
                                               shift.view, r_out, out_fused.view, &why))
    return "rejected: " + why;
  scale_residual_norm_scale_shift(c.norm, residual.view, gate.view, update.view, w, c.eps, scale.view, shift.view,
                                  r_out, out_fused.view);
  runtime(d).synchronize({});
  if (!fully_written(r_eager.view, kOutputPoison) || !fully_written(out_eager.view, kOutputPoison))
    return "eager outputs have unwritten elements";
  if (!c.in_place && !fully_written(r_out, kOutputPoison)) return "fused residual_out has unwritten elements";
  if (!fully_written(out_fused.view, kOutputPoison)) return "fused out has unwritten elements";
  const bool any_nan = !d.is_cuda();
  if (std::string e = compare_bits(r_out, r_eager.view, any_nan); !e.empty()) return "residual_out: " + e;
  if (std::string e = compare_bits(out_fused.view, out_eager.view, any_nan); !e.empty()) return "out: " + e;
  return "";
}

}  // namespace dfuse::test
