#include "common/norm_fp32_cases.h"

#include <algorithm>
#include <cmath>

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/core/runtime.h"
#include "dfuse/eager/norm_fp32.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/eager/layer_norm.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse::test {

namespace {

std::vector<int64_t> x_sizes(const NormFp32Case& c) {
  if (c.mode == NormOperandMode::per_frame) return {c.B, c.F, c.S / c.F, c.D};
  return {c.B, c.S, c.D};
}

TestTensor make_x(Device d, DType t, const NormFp32Case& c, uint64_t seed) {
  const auto sizes = x_sizes(c);
  const int64_t row = c.D + c.x_row_pad;
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t k = sizes.size() - 1; k-- > 0;) strides[k] = (k + 2 == sizes.size() ? row : strides[k + 1] * sizes[k + 1]);
  return random_tensor(d, t, sizes, strides, c.x_offset, {seed, c.amplitude, c.specials});
}

// A scale / shift / gate operand in the case's mode; `chunk` picks the chunk(6) slice.
TestTensor make_operand(Device d, DType t, const NormFp32Case& c, int chunk, double amplitude, uint64_t seed) {
  const RandomSpec r{seed, amplitude, c.specials};
  switch (c.mode) {
    case NormOperandMode::per_batch: return random_tensor(d, t, {c.B, 1, c.D}, {}, 0, r);
    case NormOperandMode::per_token: return random_tensor(d, t, {c.B, c.S, c.D}, {}, 0, r);
    case NormOperandMode::per_frame: return random_tensor(d, t, {c.B, c.F, 1, c.D}, {}, 0, r);
    case NormOperandMode::per_row: return random_tensor(d, t, {c.B, c.S, 1}, {}, 0, r);
    case NormOperandMode::scalar_0d: return random_tensor(d, t, {}, {}, 0, r);
    case NormOperandMode::scalar_1: return random_tensor(d, t, {1}, {}, 0, r);
    case NormOperandMode::chunk6:
      return random_tensor(d, t, {c.B, 1, c.D}, {6 * c.D, 6 * c.D, 1}, chunk * c.D, r, c.B * 6 * c.D);
  }
  return {};
}

// The values of `t` broadcast to `sizes`, as doubles (through the eager cast, which broadcasts).
std::vector<double> broadcast_values(Device d, const TensorView& t, const std::vector<int64_t>& sizes) {
  auto wide = poisoned_tensor(d, DType::f32, sizes, 0);
  eager::cast(t, wide.view);
  runtime(d).synchronize({});
  return element_values(wide.view);
}

// A contiguous tensor holding `values` (row-major), each rounded to t.
TestTensor value_tensor(Device d, DType t, const std::vector<int64_t>& sizes, const std::vector<double>& values) {
  std::vector<uint8_t> host(values.size() * dtype_size(t));
  for (size_t i = 0; i < values.size(); ++i) store_from_double(host.data(), t, int64_t(i), values[i]);
  auto out = poisoned_tensor(d, t, sizes, 0);
  runtime(d).copy_to_device(out.view.data(), host.data(), host.size());
  return out;
}

// A bound for an element the contract says nothing about.
constexpr double kOutsideContract = -1.0;

// Every element of `fused` within bound[i] of `chain`; NaN where the chain has NaN, equal where the
// chain is infinite; elements bounded by kOutsideContract are not compared.
std::string check_within(const TensorView& fused, const TensorView& chain, const std::vector<double>& bound,
                         double* max_ratio) {
  if (!fully_written(fused, kOutputPoison)) return "fused output has unwritten elements";
  if (!fully_written(chain, kOutputPoison)) return "chain output has unwritten elements";
  const auto f = element_values(fused), e = element_values(chain);
  double worst = 0.0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (bound[i] == kOutsideContract) continue;
    if (std::isnan(e[i]) || std::isnan(f[i]) || std::isinf(e[i]) || std::isinf(f[i])) {
      if ((std::isnan(e[i]) && std::isnan(f[i])) || f[i] == e[i]) continue;
      return "element " + std::to_string(i) + ": fused " + std::to_string(f[i]) + ", chain " + std::to_string(e[i]);
    }
    const double diff = std::fabs(f[i] - e[i]);
    if (!(diff <= bound[i]))
      return "element " + std::to_string(i) + ": fused " + std::to_string(f[i]) + ", chain " + std::to_string(e[i]) +
             ", |difference| " + std::to_string(diff) + " exceeds the bound " + std::to_string(bound[i]);
    if (bound[i] > 0) worst = std::max(worst, diff / bound[i]);
  }
  if (max_ratio) *max_ratio = std::max(*max_ratio, worst);
  return "";
}

struct ModulateOperands {
  TestTensor x, scale, shift, weight, bias;
  const TensorView* w = nullptr;
  const TensorView* b = nullptr;
};

ModulateOperands make_modulate(Device d, DType t, const NormFp32Case& c, uint64_t seed) {
  ModulateOperands m;
  m.x = make_x(d, t, c, seed);
  m.scale = make_operand(d, t, c, 1, c.scale_amplitude, seed + 1);
  m.shift = make_operand(d, t, c, 0, 0.5, seed + 2);
  if (c.weight) {
    m.weight = random_tensor(d, t, {c.D}, {}, 0, {seed + 3, 1.0, false});
    m.w = &m.weight.view;
  }
  if (c.bias) {
    m.bias = random_tensor(d, t, {c.D}, {}, 0, {seed + 4, 0.5, false});
    m.b = &m.bias.view;
  }
  return m;
}

bool can_use_modulate(ModulateFp32Op op, const NormFp32Case& c, const ModulateOperands& m, const TensorView& out,
                      std::string* why) {
  if (op == ModulateFp32Op::rmsnorm_modulate_fp32)
    return can_use_rmsnorm_modulate_fp32(m.x.view, m.w, c.eps, m.scale.view, m.shift.view, out, why);
  return can_use_norm_scale_shift(c.norm, m.x.view, m.w, m.b, c.eps, m.scale.view, m.shift.view, out, why);
}

void run_modulate(ModulateFp32Op op, const NormFp32Case& c, const ModulateOperands& m, const TensorView& out) {
  if (op == ModulateFp32Op::rmsnorm_modulate_fp32)
    rmsnorm_modulate_fp32(m.x.view, m.w, c.eps, m.scale.view, m.shift.view, out);
  else
    norm_scale_shift(c.norm, m.x.view, m.w, m.b, c.eps, m.scale.view, m.shift.view, out);
}

// The lossless chain each op is close to.
void lossless_chain(ModulateFp32Op op, const NormFp32Case& c, const ModulateOperands& m, const TensorView& out,
                    eager::Workspace& ws) {
  if (op == ModulateFp32Op::rmsnorm_modulate_fp32)
    eager::rmsnorm_scale_shift_chain(RmsNormChain::diffusers_decomposed, m.x.view, m.w, c.eps, m.scale.view,
                                     m.shift.view, out, ws);
  else
    eager::norm_scale_shift_chain(c.norm, m.x.view, m.w, m.b, c.eps, m.scale.view, m.shift.view, out, ws);
}

// The chain each op reproduces bit for bit: on float copies, rounded once. In f32, x.float() is x and
// the lossless chain is that chain, whatever x's alignment.
void exact_chain(ModulateFp32Op op, DType t, const NormFp32Case& c, const ModulateOperands& m, const TensorView& out,
                 eager::Workspace& ws) {
  if (t == DType::f32)
    lossless_chain(op, c, m, out, ws);
  else if (op == ModulateFp32Op::rmsnorm_modulate_fp32)
    eager::rmsnorm_modulate_fp32_chain(m.x.view, m.w, c.eps, m.scale.view, m.shift.view, out, ws);
  else
    eager::norm_scale_shift_fp32_chain(c.norm, m.x.view, m.w, m.b, c.eps, m.scale.view, m.shift.view, out, ws);
}

// The stated bound for one element: n the chain's normalized value, w the weight's (0 without one;
// the rmsnorm_modulate_fp32 chain rounds h before the weight, whose subnormal error it scales).
double modulate_bound(DType t, ModulateFp32Op op, double n, double scale, double shift, double w) {
  const double u = unit_roundoff(t), eta = half_min_subnormal(t), a = std::fabs(1.0 + scale);
  const double relative = std::fabs(n) * a + std::fabs(shift);
  if (op == ModulateFp32Op::rmsnorm_modulate_fp32)
    return 7.0 * u * relative + 2.0 * eta * ((std::fabs(w) + 1.0) * a + 2.0);
  return 6.0 * u * relative + 2.0 * eta * (a + 2.0);
}

// The chain's normalized value (before the modulate), for the bound.
void lossless_norm(ModulateFp32Op op, const NormFp32Case& c, const ModulateOperands& m, const TensorView& out,
                   eager::Workspace& ws) {
  if (op == ModulateFp32Op::rmsnorm_modulate_fp32)
    eager::rms_norm_decomposed_chain(m.x.view, m.w, c.eps, out, ws);
  else if (c.norm == NormKind::layer_norm)
    eager::layer_norm(m.x.view, m.w, m.b, c.eps, out);
  else
    eager::rms_norm(m.x.view, m.w, c.eps, out);
}

}  // namespace

std::vector<NormFp32Case> small_norm_fp32_cases() {
  using M = NormOperandMode;
  constexpr NormKind LN = NormKind::layer_norm, RMS = NormKind::rms_norm;
  return {
      {.name = "ln_per_batch", .B = 2, .S = 37, .D = 64, .mode = M::per_batch},
      {.name = "rms_per_batch_weight", .B = 2, .S = 37, .D = 64, .mode = M::per_batch, .norm = RMS, .weight = true},
      {.name = "ln_affine_per_token", .B = 1, .S = 7, .D = 192, .mode = M::per_token, .weight = true, .bias = true},
      {.name = "ln_bias_only", .B = 1, .S = 6, .D = 128, .mode = M::per_batch, .bias = true},
      {.name = "ln_bias_only_generic", .B = 1, .S = 6, .D = 126, .mode = M::per_batch, .bias = true},
      {.name = "ln_weight_only", .B = 1, .S = 5, .D = 96, .mode = M::chunk6, .weight = true},
      {.name = "rms_per_token", .B = 1, .S = 9, .D = 256, .mode = M::per_token, .norm = RMS},
      {.name = "ln_per_frame", .B = 2, .S = 12, .D = 128, .F = 3, .mode = M::per_frame},
      {.name = "rms_per_frame_weight", .B = 1, .S = 20, .D = 160, .F = 5, .mode = M::per_frame, .norm = RMS,
       .weight = true},
      {.name = "ln_per_row", .B = 2, .S = 5, .D = 64, .mode = M::per_row},
      {.name = "rms_scalar_0d", .B = 2, .S = 6, .D = 96, .mode = M::scalar_0d, .norm = RMS, .weight = true},
      {.name = "ln_scalar_1", .B = 1, .S = 8, .D = 64, .mode = M::scalar_1},
      {.name = "ln_chunk6_d_over_512_chunks", .B = 1, .S = 5, .D = 1536, .mode = M::chunk6},
      {.name = "rms_chunk6_b3", .B = 3, .S = 11, .D = 96, .mode = M::chunk6, .norm = RMS, .weight = true},
      {.name = "ln_d_not_multiple_of_chunks", .B = 2, .S = 3, .D = 1100, .mode = M::per_batch},
      {.name = "ln_odd_d_generic", .B = 2, .S = 5, .D = 77, .mode = M::per_batch, .weight = true, .bias = true},
      {.name = "rms_odd_d_generic", .B = 2, .S = 5, .D = 77, .mode = M::per_token, .norm = RMS, .weight = true},
      {.name = "rms_d_mod4_2_generic", .B = 1, .S = 4, .D = 1534, .mode = M::per_batch, .norm = RMS},
      {.name = "ln_d1", .B = 1, .S = 6, .D = 1, .mode = M::per_token},
      {.name = "ln_single_token", .B = 1, .S = 1, .D = 320, .mode = M::chunk6},
      {.name = "ln_strided_x", .B = 2, .S = 6, .D = 64, .mode = M::per_token, .x_row_pad = 3},
      {.name = "ln_misaligned_x_generic", .B = 1, .S = 9, .D = 256, .mode = M::per_batch, .x_offset = 1},
      {.name = "rms_misaligned_x_generic", .B = 1, .S = 9, .D = 256, .mode = M::per_batch, .norm = RMS, .x_offset = 2},
      {.name = "ln_rows_8192", .B = 1, .S = 2, .D = 8192, .mode = M::per_batch, .weight = true, .bias = true},
      {.name = "ln_large_scales", .B = 1, .S = 13, .D = 256, .mode = M::per_token, .scale_amplitude = 64.0},
      {.name = "rms_large_scales", .B = 2, .S = 7, .D = 320, .mode = M::chunk6, .norm = RMS, .weight = true,
       .scale_amplitude = 64.0},
      {.name = "ln_large_amplitude", .B = 1, .S = 13, .D = 256, .mode = M::per_batch, .amplitude = 300.0},
      {.name = "ln_specials", .B = 2, .S = 33, .D = 128, .mode = M::per_token, .specials = true},
      {.name = "rms_specials_generic", .B = 1, .S = 9, .D = 130, .mode = M::chunk6, .norm = RMS, .weight = true,
       .specials = true},
      {.name = "ln_in_place", .B = 2, .S = 17, .D = 72, .mode = M::chunk6, .in_place = true},
      {.name = "rms_in_place", .B = 1, .S = 9, .D = 136, .mode = M::per_row, .norm = RMS, .weight = true,
       .in_place = true},
      {.name = "ln_large_eps", .B = 1, .S = 7, .D = 128, .mode = M::per_batch, .norm = LN, .amplitude = 1e-3,
       .eps = 1e-2},
  };
}

std::vector<NormFp32Case> model_norm_fp32_cases() {
  using M = NormOperandMode;
  constexpr NormKind RMS = NormKind::rms_norm;
  return {
      {.name = "flux1_ln_chunk6", .B = 1, .S = 4608, .D = 3072, .mode = M::chunk6},
      {.name = "flux1_ln_per_token", .B = 1, .S = 4608, .D = 3072, .mode = M::per_token},
      {.name = "qwen_image_ln_chunk6", .B = 1, .S = 4096, .D = 3072, .mode = M::chunk6},
      {.name = "wan21_ln_per_frame", .B = 1, .S = 7560, .D = 5120, .F = 21, .mode = M::per_frame},
      {.name = "wan21_ln_affine_per_batch", .B = 1, .S = 7560, .D = 5120, .mode = M::per_batch, .weight = true,
       .bias = true},
      {.name = "ltx2_rms_per_token", .B = 1, .S = 6144, .D = 4096, .mode = M::per_token, .norm = RMS},
      {.name = "ltx2_rms_chunk6_weight", .B = 2, .S = 4097, .D = 4096, .mode = M::chunk6, .norm = RMS,
       .weight = true},
      {.name = "d1536_s1", .B = 1, .S = 1, .D = 1536, .mode = M::chunk6},
      {.name = "d2560_s4097_rms", .B = 1, .S = 4097, .D = 2560, .mode = M::chunk6, .norm = RMS},
      {.name = "d3840_b3_s7", .B = 3, .S = 7, .D = 3840, .mode = M::per_batch},
      {.name = "b3_s4097_d1536_scalar", .B = 3, .S = 4097, .D = 1536, .mode = M::scalar_0d},
      {.name = "misaligned_generic", .B = 1, .S = 4097, .D = 3072, .mode = M::per_batch, .x_offset = 1},
      {.name = "odd_d_generic_rms", .B = 1, .S = 4097, .D = 3070, .mode = M::chunk6, .norm = RMS, .weight = true},
      {.name = "strided_x", .B = 2, .S = 4097, .D = 3072, .mode = M::per_batch, .x_row_pad = 3072},
      {.name = "large_scales", .B = 1, .S = 4608, .D = 3072, .mode = M::per_token, .scale_amplitude = 64.0},
      {.name = "specials", .B = 1, .S = 4608, .D = 3072, .mode = M::chunk6, .specials = true},
      {.name = "in_place", .B = 1, .S = 4608, .D = 3072, .mode = M::chunk6, .in_place = true},
  };
}

std::string run_norm_scale_shift_exact_case(Device d, DType t, ModulateFp32Op op, const NormFp32Case& c,
                                            uint64_t seed) {
  ModulateOperands m = make_modulate(d, t, c, seed);
  return compare_fused_with_eager(
      d, t, x_sizes(c), c.in_place ? &m.x.view : nullptr,
      [&](const TensorView& out, std::string* why) { return can_use_modulate(op, c, m, out, why); },
      [&](const TensorView& out) { run_modulate(op, c, m, out); },
      [&](const TensorView& out, eager::Workspace& ws) { exact_chain(op, t, c, m, out, ws); });
}

namespace {

// The fused op, the lossless chain and the chain's normalized value (for the bound) on the same operands;
// `why` is set (and the tensors left poisoned) when the op's guards refuse them.
struct ModulateBoundRun {
  TestTensor fused, chain, normalized;
  std::string why;
};

ModulateBoundRun run_modulate_and_lossless_chain(Device d, DType t, ModulateFp32Op op, const NormFp32Case& c,
                                                 const ModulateOperands& m, const std::vector<int64_t>& sizes) {
  ModulateBoundRun r{poisoned_tensor(d, t, sizes, kOutputPoison), poisoned_tensor(d, t, sizes, kOutputPoison),
                     poisoned_tensor(d, t, sizes, kOutputPoison), {}};
  eager::Workspace ws(d);
  lossless_chain(op, c, m, r.chain.view, ws);
  lossless_norm(op, c, m, r.normalized.view, ws);
  if (!can_use_modulate(op, c, m, r.fused.view, &r.why)) return r;
  run_modulate(op, c, m, r.fused.view);
  runtime(d).synchronize({});
  return r;
}

}  // namespace

std::string run_norm_scale_shift_bound_case(Device d, DType t, ModulateFp32Op op, const NormFp32Case& c,
                                            uint64_t seed, double* max_ratio) {
  ModulateOperands m = make_modulate(d, t, c, seed);
  const auto sizes = x_sizes(c);
  const ModulateBoundRun run = run_modulate_and_lossless_chain(d, t, op, c, m, sizes);
  if (!run.why.empty()) return "rejected: " + run.why;
  const auto n = element_values(run.normalized.view), sc = broadcast_values(d, m.scale.view, sizes),
             sh = broadcast_values(d, m.shift.view, sizes);
  const auto w = c.weight ? element_values(m.weight.view) : std::vector<double>();
  std::vector<double> bound(n.size());
  for (size_t i = 0; i < n.size(); ++i)
    bound[i] = modulate_bound(t, op, n[i], sc[i], sh[i], c.weight ? w[i % size_t(c.D)] : 0.0);
  return check_within(run.fused.view, run.chain.view, bound, max_ratio);
}

std::string run_norm_scale_shift_subnormal_case(Device d, int* beyond_relative) {
  constexpr int64_t kRows = 1024, kD = 64;
  constexpr double kScale = 31.0;
  const DType t = DType::f16;
  // Row r: 2^-6, 63/64 + j 2^-11 (j = 1, 2) and 31 pairs +-v (v = 1 + (r % 512) 2^-10): the mean is
  // 2^-6 + j 2^-17, so element 0 normalizes to about -j 2^-17 / v, an f16 subnormal.
  std::vector<double> x(size_t(kRows * kD));
  for (int64_t r = 0; r < kRows; ++r) {
    const double v = 1.0 + std::ldexp(double(r % 512), -10), j = double(1 + r / 512);
    for (int64_t k = 0; k < kD; ++k)
      x[size_t(r * kD + k)] = k == 0 ? std::ldexp(1.0, -6) : k == 1 ? 63.0 / 64.0 + std::ldexp(j, -11) : k % 2 ? v : -v;
  }
  const NormFp32Case c{.name = "subnormal_n", .S = kRows, .D = kD};
  ModulateOperands m;
  m.x = value_tensor(d, t, {1, kRows, kD}, x);
  m.scale = value_tensor(d, t, {1, 1, kD}, std::vector<double>(size_t(kD), kScale));
  m.shift = value_tensor(d, t, {1, 1, kD}, std::vector<double>(size_t(kD), 0.0));
  const auto op = ModulateFp32Op::norm_scale_shift;
  const ModulateBoundRun run = run_modulate_and_lossless_chain(d, t, op, c, m, {1, kRows, kD});
  if (!run.why.empty()) return "rejected: " + run.why;
  const auto n = element_values(run.normalized.view), f = element_values(run.fused.view),
             e = element_values(run.chain.view);
  std::vector<double> bound(n.size());
  *beyond_relative = 0;
  for (size_t i = 0; i < n.size(); ++i) {
    bound[i] = modulate_bound(t, op, n[i], kScale, 0.0, 0.0);
    *beyond_relative += std::fabs(f[i] - e[i]) > 6.0 * unit_roundoff(t) * std::fabs(n[i] * (1.0 + kScale));
  }
  return check_within(run.fused.view, run.chain.view, bound, nullptr);
}

namespace {

struct GateOperands {
  TestTensor y, residual, gate, weight;
  const TensorView* w = nullptr;
};

GateOperands make_gate_operands(Device d, DType t, const NormFp32Case& c, uint64_t seed) {
  GateOperands g;
  g.y = make_x(d, t, c, seed);
  g.residual = random_tensor(d, t, x_sizes(c), {}, 0, {seed + 1, c.amplitude, c.specials});
  g.gate = make_operand(d, t, c, 2, c.scale_amplitude, seed + 2);
  if (c.weight) {
    g.weight = random_tensor(d, t, {c.D}, {}, 0, {seed + 3, 1.0, false});
    g.w = &g.weight.view;
  }
  return g;
}

}  // namespace

std::string run_rmsnorm_tanh_residual_fp32_exact_case(Device d, DType t, const NormFp32Case& c, uint64_t seed) {
  GateOperands g = make_gate_operands(d, t, c, seed);
  return compare_fused_with_eager(
      d, t, x_sizes(c), c.in_place ? &g.residual.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_rmsnorm_tanh_residual_fp32(g.residual.view, g.gate.view, g.y.view, g.w, c.eps, out, why);
      },
      [&](const TensorView& out) {
        rmsnorm_tanh_residual_fp32(g.residual.view, g.gate.view, g.y.view, g.w, c.eps, out);
      },
      [&](const TensorView& out, eager::Workspace& ws) {
        if (t == DType::f32)  // the chain itself is in float
          eager::rmsnorm_tanh_residual_chain(g.residual.view, g.gate.view, g.y.view, g.w, c.eps, out, ws);
        else
          eager::rmsnorm_tanh_residual_fp32_chain(g.residual.view, g.gate.view, g.y.view, g.w, c.eps, out, ws);
      });
}

std::string run_rmsnorm_tanh_residual_fp32_bound_case(Device d, DType t, const NormFp32Case& c, uint64_t seed,
                                                      double* max_ratio) {
  GateOperands g = make_gate_operands(d, t, c, seed);
  const auto sizes = x_sizes(c);
  auto fused = poisoned_tensor(d, t, sizes, kOutputPoison), chain = poisoned_tensor(d, t, sizes, kOutputPoison),
       normalized = poisoned_tensor(d, t, sizes, kOutputPoison);
  eager::Workspace ws(d);
  eager::rmsnorm_tanh_residual_chain(g.residual.view, g.gate.view, g.y.view, g.w, c.eps, chain.view, ws);
  eager::rms_norm_storage_dtype_chain(g.y.view, g.w, c.eps, normalized.view, ws);
  std::string why;
  if (!can_use_rmsnorm_tanh_residual_fp32(g.residual.view, g.gate.view, g.y.view, g.w, c.eps, fused.view, &why))
    return "rejected: " + why;
  rmsnorm_tanh_residual_fp32(g.residual.view, g.gate.view, g.y.view, g.w, c.eps, fused.view);
  runtime(d).synchronize({});
  const auto n = element_values(normalized.view), gate = broadcast_values(d, g.gate.view, sizes),
             residual = element_values(g.residual.view), y = element_values(g.y.view);
  const auto w = c.weight ? element_values(g.weight.view) : std::vector<double>();
  const double u = unit_roundoff(t), eta = half_min_subnormal(t);
  const double largest = t == DType::f16 ? 65504.0 : 3.0e38;
  const size_t cols = size_t(c.D);
  std::vector<double> bound(n.size());
  for (size_t row = 0; row * cols < y.size(); ++row) {
    bool overflow = false;
    double mean_square = 0.0;
    for (size_t k = row * cols; k < (row + 1) * cols; ++k) {
      overflow |= y[k] * y[k] > largest;
      mean_square += y[k] * y[k] / double(c.D);
    }
    for (size_t k = row * cols; k < (row + 1) * cols; ++k) {
      // Outside the contract: rows where the chain's squares overflow the storage dtype (f16 |y| >=
      // 256) and its statistics become Inf (the fp32 op stays finite), and rows whose statistics
      // underflow it (mean(y^2) + eps < 16 eta).
      if (overflow || mean_square + c.eps < 16.0 * eta) {
        bound[k] = kOutsideContract;
        continue;
      }
      const double tg = std::fabs(std::tanh(gate[k])), tn = tg * std::fabs(n[k]);
      bound[k] = 10.0 * u * (tn + std::fabs(residual[k])) +
                 eta * (3.0 * tn / (mean_square + c.eps) + 2.0 * tg * ((c.weight ? std::fabs(w[k % cols]) : 0.0) + 1.0) +
                        2.0 * std::fabs(n[k]) + 4.0);
    }
  }
  return check_within(fused.view, chain.view, bound, max_ratio);
}

}  // namespace dfuse::test
