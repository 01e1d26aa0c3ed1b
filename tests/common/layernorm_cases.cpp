#include "common/layernorm_cases.h"

#include <cmath>

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/core/runtime.h"
#include "dfuse/eager/chains.h"
#include "dfuse/eager/layer_norm.h"
#include "dfuse/ops/norm.h"

namespace dfuse::test {

namespace {

TestTensor make_x(Device d, DType t, const LayernormCase& c, uint64_t seed) {
  const int64_t row = c.D + c.x_row_pad;
  return random_tensor(d, t, {c.B, c.S, c.D}, {c.S * row, row, 1}, c.x_offset, {seed, c.amplitude, c.specials});
}

// scale (chunk 1) or shift (chunk 0) in the case's mode.
TestTensor make_modulation(Device d, DType t, const LayernormCase& c, int chunk, uint64_t seed) {
  const RandomSpec r{seed, 0.5, c.specials};
  switch (c.mode) {
    case ModulationMode::per_batch:
      return random_tensor(d, t, {c.B, 1, c.D}, {}, 0, r);
    case ModulationMode::per_token:
      return random_tensor(d, t, {c.B, c.S, c.D}, {}, 0, r);
    case ModulationMode::chunk6:
      return random_tensor(d, t, {c.B, 1, c.D}, {6 * c.D, 6 * c.D, 1}, chunk * c.D, r, c.B * 6 * c.D);
  }
  return {};
}

}  // namespace

std::vector<LayernormCase> small_layernorm_cases() {
  return {
      {.name = "per_batch", .B = 2, .S = 37, .D = 64, .mode = ModulationMode::per_batch},
      {.name = "per_token", .B = 1, .S = 7, .D = 192, .mode = ModulationMode::per_token},
      {.name = "chunk6", .B = 3, .S = 11, .D = 96, .mode = ModulationMode::chunk6},
      {.name = "d_over_512_chunks", .B = 1, .S = 5, .D = 1536, .mode = ModulationMode::chunk6},
      {.name = "d_not_multiple_of_chunks", .B = 2, .S = 3, .D = 1100, .mode = ModulationMode::per_batch},
      {.name = "odd_d_generic", .B = 2, .S = 5, .D = 77, .mode = ModulationMode::per_batch},
      {.name = "d_mod4_2_generic", .B = 1, .S = 4, .D = 1534, .mode = ModulationMode::per_token},
      // Rows over 6144 elements: the vectorized CUDA kernel's uncached variant (re-reads x).
      {.name = "d_over_6144_uncached_in_place", .B = 1, .S = 3, .D = 6400, .mode = ModulationMode::chunk6,
       .in_place = true},
      {.name = "tiny_d", .B = 2, .S = 3, .D = 4, .mode = ModulationMode::per_batch},
      {.name = "d1_generic", .B = 1, .S = 6, .D = 1, .mode = ModulationMode::per_token},
      {.name = "single_token", .B = 1, .S = 1, .D = 320, .mode = ModulationMode::chunk6},
      {.name = "strided_x_copied", .B = 2, .S = 6, .D = 64, .mode = ModulationMode::per_token, .x_row_pad = 3},
      {.name = "misaligned_x_generic", .B = 1, .S = 9, .D = 256, .mode = ModulationMode::per_batch, .x_offset = 1},
      {.name = "specials", .B = 2, .S = 33, .D = 128, .mode = ModulationMode::per_token, .specials = true},
      {.name = "specials_generic", .B = 1, .S = 9, .D = 130, .mode = ModulationMode::chunk6, .specials = true},
      {.name = "in_place", .B = 2, .S = 17, .D = 72, .mode = ModulationMode::chunk6, .in_place = true},
      {.name = "in_place_generic", .B = 1, .S = 5, .D = 600, .mode = ModulationMode::per_batch, .x_offset = 2,
       .in_place = true},
      {.name = "large_amplitude", .B = 1, .S = 13, .D = 256, .mode = ModulationMode::per_batch, .amplitude = 300.0},
      {.name = "large_eps", .B = 1, .S = 7, .D = 128, .mode = ModulationMode::per_batch, .amplitude = 1e-3,
       .eps = 1e-2},
  };
}

std::vector<LayernormCase> model_layernorm_cases() {
  return {
      {.name = "flux1_chunk6", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::chunk6},
      {.name = "flux1_per_token", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::per_token},
      {.name = "wan21_14b_rows", .B = 1, .S = 7560, .D = 5120, .mode = ModulationMode::per_batch},
      {.name = "d1536_s1", .B = 1, .S = 1, .D = 1536, .mode = ModulationMode::chunk6},
      {.name = "d2560_s4097", .B = 1, .S = 4097, .D = 2560, .mode = ModulationMode::chunk6},
      {.name = "d3840_b3_s7", .B = 3, .S = 7, .D = 3840, .mode = ModulationMode::per_batch},
      {.name = "b3_s4097_d1536", .B = 3, .S = 4097, .D = 1536, .mode = ModulationMode::per_token},
      {.name = "misaligned_generic", .B = 1, .S = 4097, .D = 3072, .mode = ModulationMode::per_batch, .x_offset = 1},
      {.name = "odd_d_generic", .B = 1, .S = 4097, .D = 3070, .mode = ModulationMode::chunk6},
      {.name = "strided_x", .B = 2, .S = 4097, .D = 3072, .mode = ModulationMode::per_batch, .x_row_pad = 3072},
      {.name = "specials", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::chunk6, .specials = true},
      {.name = "in_place", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::chunk6, .in_place = true},
  };
}

std::string run_layernorm_modulate_case(Device d, DType t, const LayernormCase& c, uint64_t seed) {
  auto x = make_x(d, t, c, seed);
  auto scale = make_modulation(d, t, c, 1, seed + 1);
  auto shift = make_modulation(d, t, c, 0, seed + 2);
  return compare_fused_with_eager(
      d, t, {c.B, c.S, c.D}, c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_layernorm_modulate(x.view, scale.view, shift.view, c.eps, out, why);
      },
      [&](const TensorView& out) { layernorm_modulate(x.view, scale.view, shift.view, c.eps, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::layernorm_modulate_chain(x.view, scale.view, shift.view, c.eps, out, ws);
      });
}

std::string run_layernorm_folded_case(Device d, DType t, const LayernormCase& c, uint64_t seed) {
  if (c.B != 1 || c.mode == ModulationMode::per_token) return "";  // scale/shift must be one row
  auto x = make_x(d, t, c, seed);
  auto scale = make_modulation(d, t, c, 1, seed + 1);
  auto shift = make_modulation(d, t, c, 0, seed + 2);
  return compare_fused_with_eager(
      d, t, {c.B, c.S, c.D}, c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_layernorm_folded_modulate(x.view, scale.view, shift.view, c.eps, out, why);
      },
      [&](const TensorView& out) { layernorm_folded_modulate(x.view, scale.view, shift.view, c.eps, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::layernorm_folded_modulate_chain(x.view, scale.view, shift.view, c.eps, out, ws);
      });
}

std::string run_layernorm_folded_bound_case(Device d, DType t, const LayernormCase& c, uint64_t seed,
                                            double* max_ratio) {
  if (c.B != 1 || c.mode == ModulationMode::per_token || c.specials) return "";
  auto x = make_x(d, t, c, seed);
  auto scale = make_modulation(d, t, c, 1, seed + 1);
  auto shift = make_modulation(d, t, c, 0, seed + 2);
  const std::vector<int64_t> sizes = {c.B, c.S, c.D};
  auto fused = poisoned_tensor(d, t, sizes, kOutputPoison), chain = poisoned_tensor(d, t, sizes, kOutputPoison),
       normalized = poisoned_tensor(d, t, sizes, kOutputPoison);
  eager::Workspace ws(d);
  eager::layernorm_modulate_chain(x.view, scale.view, shift.view, c.eps, chain.view, ws);
  eager::layer_norm(x.view, nullptr, nullptr, c.eps, normalized.view);
  layernorm_folded_modulate(x.view, scale.view, shift.view, c.eps, fused.view);
  runtime(d).synchronize({});
  const auto f = element_values(fused.view), e = element_values(chain.view), n = element_values(normalized.view);
  const auto sc = element_values(scale.view), sh = element_values(shift.view);
  const double u = unit_roundoff(t), eta = half_min_subnormal(t);
  double worst = 0.0;
  for (size_t i = 0; i < f.size(); ++i) {
    const size_t col = i % size_t(c.D);
    const double w = double(float(1.0 + sc[col]));  // bounds only: 1 + scale need not be rounded here
    const double bound = 4.0 * u * (std::fabs(n[i] * w) + std::fabs(sh[col])) + 2.0 * eta * (std::fabs(w) + 2.0);
    const double diff = std::fabs(f[i] - e[i]);
    if (!(diff <= bound))
      return "element " + std::to_string(i) + ": fused " + std::to_string(f[i]) + " chain " + std::to_string(e[i]) +
             " exceeds the bound " + std::to_string(bound);
    worst = std::max(worst, diff / bound);
  }
  if (max_ratio) *max_ratio = std::max(*max_ratio, worst);
  return "";
}

std::vector<QkHeadCase> small_qk_head_cases() {
  return {
      {.name = "dense", .B = 2, .S = 5, .H = 3, .Dh = 64},
      {.name = "head_128", .B = 1, .S = 7, .H = 4, .Dh = 128},
      {.name = "head_256_two_warps_of_chunks", .B = 1, .S = 3, .H = 2, .Dh = 256},
      {.name = "head_1024", .B = 1, .S = 2, .H = 1, .Dh = 1024},
      {.name = "packed_projection", .B = 2, .S = 6, .H = 3, .Dh = 64, .packed = true},
      {.name = "joint_k_longer", .B = 1, .S = 5, .H = 2, .Dh = 128, .Sk = 9},
      {.name = "misaligned_q_generic", .B = 1, .S = 4, .H = 3, .Dh = 128, .q_offset = 1},
      {.name = "odd_head_generic", .B = 1, .S = 3, .H = 2, .Dh = 94},
      {.name = "head_over_512_generic", .B = 1, .S = 2, .H = 1, .Dh = 1030},
      {.name = "gamma_only", .B = 1, .S = 4, .H = 2, .Dh = 128, .bias = false},
      {.name = "beta_only", .B = 1, .S = 4, .H = 2, .Dh = 128, .weight = false},
      {.name = "beta_only_generic", .B = 1, .S = 4, .H = 2, .Dh = 126, .weight = false},
      {.name = "no_affine", .B = 1, .S = 4, .H = 2, .Dh = 64, .weight = false, .bias = false},
      {.name = "specials", .B = 1, .S = 9, .H = 4, .Dh = 128, .specials = true},
      {.name = "in_place", .B = 1, .S = 6, .H = 2, .Dh = 128, .in_place = true},
      {.name = "large_eps", .B = 1, .S = 3, .H = 2, .Dh = 128, .eps = 1e-2},
  };
}

std::vector<QkHeadCase> model_qk_head_cases() {
  return {
      {.name = "flux_joint_heads", .B = 1, .S = 4608, .H = 24, .Dh = 128, .Sk = 4608 + 512},
      {.name = "flux_packed", .B = 1, .S = 4608, .H = 24, .Dh = 128, .packed = true},
      {.name = "wan_heads", .B = 1, .S = 7560, .H = 40, .Dh = 128},
      {.name = "b3_odd_tokens", .B = 3, .S = 4097, .H = 12, .Dh = 128},
      {.name = "misaligned_generic", .B = 1, .S = 4097, .H = 24, .Dh = 128, .q_offset = 1},
      {.name = "head_64", .B = 2, .S = 4097, .H = 16, .Dh = 64},
      {.name = "specials", .B = 1, .S = 4608, .H = 24, .Dh = 128, .specials = true},
  };
}

std::string run_qk_head_layernorm_case(Device d, DType t, const QkHeadCase& c, uint64_t seed) {
  const int64_t sk = c.Sk ? c.Sk : c.S;
  const int64_t hd = c.H * c.Dh;
  const std::vector<int64_t> q_sizes = {c.B, c.S, c.H, c.Dh}, k_sizes = {c.B, sk, c.H, c.Dh};
  const RandomSpec r{seed, 2.0, c.specials};
  TestTensor qkv, q_own, k_own;
  TensorView q, k;
  if (c.packed) {  // q, k, v = projection.chunk(3, dim=-1), each .unflatten(-1, (H, Dh))
    qkv = random_tensor(d, t, {c.B, c.S, 3 * hd}, {}, 0, r);
    const int64_t strides[] = {c.S * 3 * hd, 3 * hd, c.Dh, 1};
    q = qkv.view.restrided(q_sizes.data(), strides, 4);
    k = TensorView(static_cast<char*>(qkv.view.data()) + hd * int64_t(dtype_size(t)), t, k_sizes.data(), strides, 4, d);
  } else {
    q_own = random_tensor(d, t, q_sizes, {}, c.q_offset, r);
    k_own = random_tensor(d, t, k_sizes, {}, 0, {seed + 1, 2.0, c.specials});
    q = q_own.view;
    k = k_own.view;
  }
  auto qw = random_tensor(d, t, {c.Dh}, {}, 0, {seed + 2, 1.0, false});
  auto qb = random_tensor(d, t, {c.Dh}, {}, 0, {seed + 3, 0.5, false});
  auto kw = random_tensor(d, t, {c.Dh}, {}, 0, {seed + 4, 1.0, false});
  auto kb = random_tensor(d, t, {c.Dh}, {}, 0, {seed + 5, 0.5, false});
  const TensorView* q_weight = c.weight ? &qw.view : nullptr;
  const TensorView* q_bias = c.bias ? &qb.view : nullptr;
  const TensorView* k_weight = c.weight ? &kw.view : nullptr;
  const TensorView* k_bias = c.bias ? &kb.view : nullptr;

  auto eager_q = poisoned_tensor(d, t, q_sizes, kOutputPoison), eager_k = poisoned_tensor(d, t, k_sizes, kOutputPoison);
  eager::qk_head_layernorm_chain(q, k, q_weight, q_bias, k_weight, k_bias, c.eps, eager_q.view, eager_k.view);
  TestTensor fused_q, fused_k;
  const TensorView q_out = c.in_place ? q : (fused_q = poisoned_tensor(d, t, q_sizes, kOutputPoison)).view;
  const TensorView k_out = c.in_place ? k : (fused_k = poisoned_tensor(d, t, k_sizes, kOutputPoison)).view;
  std::string why;
  if (!can_use_qk_head_layernorm(q, k, q_weight, q_bias, k_weight, k_bias, c.eps, q_out, k_out, &why))
    return "rejected: " + why;
  qk_head_layernorm(q, k, q_weight, q_bias, k_weight, k_bias, c.eps, q_out, k_out);
  runtime(d).synchronize({});
  return compare_qk_outputs(d, eager_q.view, eager_k.view, q_out, k_out, c.in_place);
}

std::vector<Fp32LayerNormCase> small_fp32_layernorm_cases() {
  return {
      {.name = "affine", .B = 2, .S = 9, .D = 256},
      {.name = "no_affine", .B = 1, .S = 7, .D = 192, .weight = false, .bias = false},
      {.name = "gamma_only", .B = 1, .S = 5, .D = 128, .bias = false},
      {.name = "beta_only", .B = 1, .S = 5, .D = 128, .weight = false},
      {.name = "wide_rows", .B = 1, .S = 3, .D = 5120},
      {.name = "odd_d_generic", .B = 2, .S = 4, .D = 1534},
      {.name = "misaligned_weight_generic", .B = 1, .S = 6, .D = 512, .affine_offset = 1},
      {.name = "strided_x", .B = 2, .S = 5, .D = 320, .x_row_pad = 5},
      {.name = "specials", .B = 1, .S = 17, .D = 256, .specials = true},
      {.name = "in_place", .B = 1, .S = 8, .D = 640, .in_place = true},
      {.name = "large_eps", .B = 1, .S = 4, .D = 256, .eps = 1e-2},
  };
}

std::vector<Fp32LayerNormCase> model_fp32_layernorm_cases() {
  return {
      {.name = "wan_rows", .B = 1, .S = 7560, .D = 5120},
      {.name = "flux_rows", .B = 1, .S = 4608, .D = 3072, .bias = false},
      {.name = "b3_s4097_d1536", .B = 3, .S = 4097, .D = 1536},
      {.name = "odd_generic", .B = 1, .S = 4097, .D = 3070},
      {.name = "misaligned_weight", .B = 1, .S = 4097, .D = 5120, .affine_offset = 2},
      {.name = "specials", .B = 1, .S = 4608, .D = 3072, .specials = true},
  };
}

std::string run_fp32_layernorm_case(Device d, DType t, const Fp32LayerNormCase& c, uint64_t seed) {
  if (t == DType::f32) return "";  // the op widens a half-precision x
  const int64_t row = c.D + c.x_row_pad;
  auto x = random_tensor(d, t, {c.B, c.S, c.D}, {c.S * row, row, 1}, 0, {seed, 2.0, c.specials});
  auto w = random_tensor(d, DType::f32, {c.D}, {}, c.affine_offset, {seed + 1, 1.0, false});
  auto b = random_tensor(d, DType::f32, {c.D}, {}, c.affine_offset, {seed + 2, 0.5, false});
  const TensorView* weight = c.weight ? &w.view : nullptr;
  const TensorView* bias = c.bias ? &b.view : nullptr;
  return compare_fused_with_eager(
      d, t, {c.B, c.S, c.D}, c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_fp32_layernorm_bf16(x.view, weight, bias, c.eps, out, why);
      },
      [&](const TensorView& out) { fp32_layernorm_bf16(x.view, weight, bias, c.eps, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::fp32_layernorm_chain(x.view, weight, bias, c.eps, out, ws);
      });
}

}  // namespace dfuse::test
