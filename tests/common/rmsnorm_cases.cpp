#include "common/rmsnorm_cases.h"

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse::test {

namespace {

std::vector<int64_t> x_sizes(const RmsNormCase& c) { return {c.B, c.S, c.D}; }

TestTensor make_x(Device d, DType t, const RmsNormCase& c, uint64_t seed) {
  const int64_t row = c.D + c.x_row_pad;
  return random_tensor(d, t, x_sizes(c), {c.S * row, row, 1}, c.x_offset, {seed, c.amplitude, c.specials},
                       c.x_offset + c.B * c.S * row);
}

TestTensor make_weight(Device d, DType t, const RmsNormCase& c, uint64_t seed) {
  return random_tensor(d, t, {c.D}, {}, 0, {seed, 0.7, false});
}

TestTensor make_modulation(Device d, DType t, const RmsNormCase& c, int chunk, uint64_t seed) {
  RandomSpec r{seed, 0.5, c.specials};
  switch (c.mode) {
    case ModulationMode::per_batch:
      return random_tensor(d, t, {c.B, 1, c.D}, {}, 0, r);
    case ModulationMode::per_token:
      return random_tensor(d, t, x_sizes(c), {}, 0, r);
    case ModulationMode::chunk6:
      return random_tensor(d, t, {c.B, 1, c.D}, {6 * c.D, 6 * c.D, 1}, chunk * c.D, r, c.B * 6 * c.D);
  }
  return {};
}

}  // namespace

std::vector<RmsNormCase> small_rmsnorm_cases() {
  return {
      {.name = "per_batch", .B = 2, .S = 37, .D = 256, .mode = ModulationMode::per_batch},
      {.name = "per_token", .B = 1, .S = 7, .D = 192, .mode = ModulationMode::per_token},
      {.name = "chunk6", .B = 3, .S = 11, .D = 384, .mode = ModulationMode::chunk6},
      {.name = "no_weight", .B = 2, .S = 20, .D = 128, .mode = ModulationMode::chunk6, .weight = false},
      {.name = "single_row_512_lanes", .B = 1, .S = 1, .D = 3072, .mode = ModulationMode::chunk6},
      {.name = "four_rows_128_lanes", .B = 1, .S = 4, .D = 3072, .mode = ModulationMode::per_batch},
      {.name = "three_rows_256_lanes", .B = 3, .S = 1, .D = 1536, .mode = ModulationMode::chunk6},
      {.name = "seven_rows", .B = 1, .S = 7, .D = 1536, .mode = ModulationMode::per_token},
      {.name = "short_rows_unvectorized_mean", .B = 2, .S = 9, .D = 96, .mode = ModulationMode::per_batch},
      {.name = "odd_d_generic_path", .B = 2, .S = 5, .D = 77, .mode = ModulationMode::per_batch},
      {.name = "odd_long_rows_head_alignment", .B = 2, .S = 40, .D = 131, .mode = ModulationMode::per_token},
      {.name = "rows_of_132_head_alignment_16bit", .B = 1, .S = 24, .D = 132, .mode = ModulationMode::per_batch},
      {.name = "strided_x", .B = 2, .S = 6, .D = 256, .mode = ModulationMode::per_token, .x_row_pad = 24},
      {.name = "misaligned_x_generic_path", .B = 1, .S = 9, .D = 256, .mode = ModulationMode::per_batch,
       .x_offset = 1},
      {.name = "misaligned_strided_x", .B = 1, .S = 9, .D = 256, .mode = ModulationMode::per_batch, .x_row_pad = 4,
       .x_offset = 3},
      {.name = "specials", .B = 2, .S = 33, .D = 128, .mode = ModulationMode::per_token, .specials = true},
      {.name = "in_place", .B = 2, .S = 17, .D = 320, .mode = ModulationMode::chunk6, .in_place = true},
      {.name = "large_amplitude_eps", .B = 1, .S = 13, .D = 256, .mode = ModulationMode::per_batch,
       .amplitude = 300.0, .eps = 1e-5},
      {.name = "tiny_amplitude_eps_dominates", .B = 1, .S = 13, .D = 256, .mode = ModulationMode::per_batch,
       .amplitude = 1e-4, .eps = 1e-5},
      // Few rows of unaligned length, the mean's lanes more than a warp: 3 rows of 1030 take the
      // head-alignment step with 256 lanes (f32 squares; 128 for bf16/f16), one row of 4102 the tail
      // step with 512 lanes.
      {.name = "three_rows_head_alignment_256_lanes", .B = 1, .S = 3, .D = 1030, .mode = ModulationMode::per_token},
      {.name = "one_row_tail_512_lanes", .B = 1, .S = 1, .D = 4102, .mode = ModulationMode::chunk6},
      // More rows than the GPU keeps blocks resident: each block stages several rows one after another
      // (cuda/rms_norm_rows.cuh), in place too.
      {.name = "many_rows_per_block", .B = 2, .S = 3001, .D = 64, .mode = ModulationMode::chunk6},
      {.name = "many_rows_per_block_in_place", .B = 1, .S = 5003, .D = 128, .mode = ModulationMode::per_token,
       .in_place = true},
  };
}

std::vector<RmsNormCase> model_rmsnorm_cases() {
  return {
      {.name = "flux1_chunk6", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::chunk6},
      {.name = "flux1_per_token", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::per_token},
      {.name = "wan21_14b_rows", .B = 1, .S = 7560, .D = 5120, .mode = ModulationMode::per_batch},
      {.name = "d2560_s4097", .B = 1, .S = 4097, .D = 2560, .mode = ModulationMode::chunk6},
      {.name = "d3840_b3_s7", .B = 3, .S = 7, .D = 3840, .mode = ModulationMode::per_batch},
      {.name = "d1536_s1", .B = 1, .S = 1, .D = 1536, .mode = ModulationMode::chunk6},
      {.name = "d5120_b3_s1", .B = 3, .S = 1, .D = 5120, .mode = ModulationMode::chunk6},
      {.name = "strided_x", .B = 2, .S = 4097, .D = 3072, .mode = ModulationMode::per_batch, .x_row_pad = 3072},
      {.name = "misaligned", .B = 1, .S = 4097, .D = 3072, .mode = ModulationMode::per_batch, .x_offset = 3},
      {.name = "no_weight", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::chunk6, .weight = false},
      {.name = "specials", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::chunk6, .specials = true},
      {.name = "in_place", .B = 1, .S = 4608, .D = 3072, .mode = ModulationMode::chunk6, .in_place = true},
  };
}

std::string run_rmsnorm_scale_shift_case(Device d, DType t, RmsNormChain chain, const RmsNormCase& c, uint64_t seed) {
  auto x = make_x(d, t, c, seed);
  auto w = make_weight(d, t, c, seed + 1);
  auto scale = make_modulation(d, t, c, 1, seed + 2);
  auto shift = make_modulation(d, t, c, 0, seed + 3);
  const TensorView* weight = c.weight ? &w.view : nullptr;
  return compare_fused_with_eager(
      d, t, x_sizes(c), c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_rmsnorm_scale_shift(chain, x.view, weight, c.eps, scale.view, shift.view, out, why);
      },
      [&](const TensorView& out) { rmsnorm_scale_shift(chain, x.view, weight, c.eps, scale.view, shift.view, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::rmsnorm_scale_shift_chain(chain, x.view, weight, c.eps, scale.view, shift.view, out, ws);
      });
}

std::string run_rmsnorm_scale_case(Device d, DType t, const RmsNormCase& c, uint64_t seed) {
  auto x = make_x(d, t, c, seed);
  auto w = make_weight(d, t, c, seed + 1);
  auto scale = make_modulation(d, t, c, 1, seed + 2);
  const TensorView* weight = c.weight ? &w.view : nullptr;
  return compare_fused_with_eager(
      d, t, x_sizes(c), c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_rmsnorm_scale(x.view, weight, c.eps, scale.view, out, why);
      },
      [&](const TensorView& out) { rmsnorm_scale(x.view, weight, c.eps, scale.view, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::rmsnorm_scale_chain(x.view, weight, c.eps, scale.view, out, ws);
      });
}

std::string run_rmsnorm_tanh_residual_case(Device d, DType t, const RmsNormCase& c, uint64_t seed) {
  auto y = make_x(d, t, c, seed);
  auto w = make_weight(d, t, c, seed + 1);
  auto gate = make_modulation(d, t, c, 2, seed + 2);
  auto residual = random_tensor(d, t, x_sizes(c), {}, 0, {seed + 3, c.amplitude, c.specials});
  const TensorView* weight = c.weight ? &w.view : nullptr;
  return compare_fused_with_eager(
      d, t, x_sizes(c), c.in_place ? &residual.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_rmsnorm_tanh_residual(residual.view, gate.view, y.view, weight, c.eps, out, why);
      },
      [&](const TensorView& out) { rmsnorm_tanh_residual(residual.view, gate.view, y.view, weight, c.eps, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::rmsnorm_tanh_residual_chain(residual.view, gate.view, y.view, weight, c.eps, out, ws);
      });
}

std::vector<QkRmsNormCase> small_qk_rmsnorm_cases() {
  return {
      {.name = "packed", .B = 2, .S = 9, .H = 3, .Dh = 128},
      {.name = "separate", .B = 1, .S = 17, .H = 2, .Dh = 128, .packed = false},
      {.name = "no_weight", .B = 1, .S = 8, .H = 4, .Dh = 128, .weight = false},
      {.name = "head_dim_256", .B = 1, .S = 5, .H = 4, .Dh = 256},
      {.name = "head_dim_384_separate", .B = 2, .S = 3, .H = 3, .Dh = 384, .packed = false},
      {.name = "head_dim_512", .B = 1, .S = 4, .H = 4, .Dh = 512},
      {.name = "specials", .B = 1, .S = 16, .H = 2, .Dh = 128, .specials = true},
      {.name = "in_place", .B = 1, .S = 11, .H = 2, .Dh = 128, .packed = false, .in_place = true},
      {.name = "eps_1e-5", .B = 1, .S = 16, .H = 1, .Dh = 128, .eps = 1e-5},
      {.name = "three_rows", .B = 1, .S = 1, .H = 3, .Dh = 128},
  };
}

std::vector<QkRmsNormCase> model_qk_rmsnorm_cases() {
  return {
      {.name = "flux1_packed", .B = 1, .S = 4608, .H = 24, .Dh = 128},
      {.name = "zimage_separate", .B = 1, .S = 4128, .H = 30, .Dh = 128, .packed = false, .eps = 1e-5},
      {.name = "wan21_rows", .B = 1, .S = 7560, .H = 40, .Dh = 128},
      {.name = "odd_tokens_b3", .B = 3, .S = 4097, .H = 12, .Dh = 128},
      {.name = "one_token_16_heads", .B = 1, .S = 1, .H = 16, .Dh = 128},
  };
}

std::string run_qk_rmsnorm_case(Device d, DType t, RmsNormChain chain, const QkRmsNormCase& c, uint64_t seed) {
  const std::vector<int64_t> sizes = {c.B, c.S, c.H, c.Dh};
  const RandomSpec r{seed, 2.0, c.specials};
  TestTensor qkv, q_own, k_own;
  TensorView q, k;
  if (c.packed) {
    const std::vector<int64_t> strides = {c.S * 3 * c.H * c.Dh, 3 * c.H * c.Dh, c.Dh, 1};
    qkv = random_tensor(d, t, {c.B, c.S, 3, c.H, c.Dh}, {}, 0, r);
    q = TensorView(qkv.view.data(), t, sizes.data(), strides.data(), 4, d);
    k = TensorView(static_cast<char*>(qkv.view.data()) + c.H * c.Dh * int64_t(dtype_size(t)), t, sizes.data(),
                   strides.data(), 4, d);
  } else {
    q_own = random_tensor(d, t, sizes, {}, 0, r);
    k_own = random_tensor(d, t, sizes, {}, 0, {seed + 7, 2.0, c.specials});
    q = q_own.view, k = k_own.view;
  }
  auto qw = random_tensor(d, t, {c.Dh}, {}, 0, {seed + 1, 0.7, false});
  auto kw = random_tensor(d, t, {c.Dh}, {}, 0, {seed + 2, 0.7, false});
  const TensorView* q_weight = c.weight ? &qw.view : nullptr;
  const TensorView* k_weight = c.weight ? &kw.view : nullptr;

  auto q_eager = poisoned_tensor(d, t, sizes, kOutputPoison), k_eager = poisoned_tensor(d, t, sizes, kOutputPoison);
  eager::Workspace ws(d);
  if (chain == RmsNormChain::torch_rms_norm) {
    eager::rms_norm(q, q_weight, c.eps, q_eager.view);
    eager::rms_norm(k, k_weight, c.eps, k_eager.view);
  } else if (chain == RmsNormChain::storage_dtype) {
    eager::rms_norm_storage_dtype_chain(q, q_weight, c.eps, q_eager.view, ws);
    runtime(d).synchronize({});
    eager::rms_norm_storage_dtype_chain(k, k_weight, c.eps, k_eager.view, ws);
  } else {
    eager::rms_norm_decomposed_chain(q, q_weight, c.eps, q_eager.view, ws);
    runtime(d).synchronize({});
    eager::rms_norm_decomposed_chain(k, k_weight, c.eps, k_eager.view, ws);
  }
  runtime(d).synchronize({});
  TestTensor q_fused, k_fused;
  TensorView q_out = q, k_out = k;
  if (!c.in_place) {
    q_fused = poisoned_tensor(d, t, sizes, kOutputPoison);
    k_fused = poisoned_tensor(d, t, sizes, kOutputPoison);
    q_out = q_fused.view, k_out = k_fused.view;
  }
  std::string why;
  if (!can_use_qk_rmsnorm(chain, q, k, q_weight, k_weight, c.eps, q_out, k_out, &why)) return "rejected: " + why;
  qk_rmsnorm(chain, q, k, q_weight, k_weight, c.eps, q_out, k_out);
  runtime(d).synchronize({});
  return compare_qk_outputs(d, q_eager.view, k_eager.view, q_out, k_out, c.in_place);
}

}  // namespace dfuse::test
