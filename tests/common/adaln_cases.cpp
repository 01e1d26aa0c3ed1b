#include "common/adaln_cases.h"

#include "common/fused_vs_eager.h"
#include "common/tensors.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/adaln.h"

namespace dfuse::test {

namespace {

std::vector<int64_t> x_sizes(const AdalnCase& c) {
  if (c.F > 0) return {c.B, c.F, c.S, c.D};
  return {c.B, c.S, c.D};
}

TestTensor make_x(Device d, DType t, const AdalnCase& c, uint64_t seed) {
  auto sizes = x_sizes(c);
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= (i + 1 == sizes.size()) ? sizes[i] + c.x_row_pad : sizes[i];
  }
  return random_tensor(d, t, sizes, strides, c.x_offset, {seed, c.amplitude, c.specials});
}

// A broadcast operand in `mode` against x of case `c`; `chunk` picks the chunk(6) slice.
TestTensor make_operand(Device d, DType t, const AdalnCase& c, OperandMode mode, int chunk, uint64_t seed) {
  const bool four_d = c.F > 0;
  RandomSpec r{seed, 0.5, c.specials};
  switch (mode) {
    case OperandMode::per_batch:
      return random_tensor(d, t, four_d ? std::vector<int64_t>{c.B, 1, 1, c.D} : std::vector<int64_t>{c.B, 1, c.D},
                           {}, 0, r);
    case OperandMode::per_token:
      return random_tensor(d, t, x_sizes(c), {}, 0, r);
    case OperandMode::per_frame:
      return random_tensor(d, t, {c.B, c.F, 1, c.D}, {}, 0, r);
    case OperandMode::per_row:
      return random_tensor(d, t, four_d ? std::vector<int64_t>{c.B, c.F, c.S, 1} : std::vector<int64_t>{c.B, c.S, 1},
                           {}, 0, r);
    case OperandMode::chunk6:
      return random_tensor(d, t, {c.B, 1, c.D}, {6 * c.D, 6 * c.D, 1}, chunk * c.D, r, c.B * 6 * c.D);
  }
  return {};
}

}  // namespace

std::vector<AdalnCase> small_adaln_cases() {
  return {
      {.name = "per_batch", .B = 2, .S = 37, .D = 64, .mode = OperandMode::per_batch},
      {.name = "per_token", .B = 1, .S = 7, .D = 1536 / 8, .mode = OperandMode::per_token},
      {.name = "per_frame", .B = 2, .F = 3, .S = 5, .D = 48, .mode = OperandMode::per_frame},
      {.name = "per_row", .B = 3, .S = 9, .D = 40, .mode = OperandMode::per_row},
      {.name = "chunk6", .B = 3, .S = 11, .D = 96, .mode = OperandMode::chunk6},
      {.name = "odd_d", .B = 2, .S = 5, .D = 77, .mode = OperandMode::per_batch},
      {.name = "single_token", .B = 1, .S = 1, .D = 320, .mode = OperandMode::chunk6},
      {.name = "strided_x", .B = 2, .S = 6, .D = 64, .mode = OperandMode::per_token, .x_row_pad = 24},
      {.name = "misaligned_x", .B = 1, .S = 9, .D = 64, .mode = OperandMode::per_batch, .x_offset = 1},
      {.name = "specials", .B = 2, .S = 33, .D = 128, .mode = OperandMode::per_token, .specials = true},
      {.name = "in_place", .B = 2, .S = 17, .D = 72, .mode = OperandMode::chunk6, .in_place = true},
      {.name = "large_amplitude", .B = 1, .S = 13, .D = 256, .mode = OperandMode::per_batch, .amplitude = 300.0},
  };
}

std::vector<AdalnCase> model_adaln_cases() {
  return {
      {.name = "flux1_chunk6", .B = 1, .S = 4608, .D = 3072, .mode = OperandMode::chunk6},
      {.name = "flux1_per_token", .B = 1, .S = 4608, .D = 3072, .mode = OperandMode::per_token},
      {.name = "wan21_14b_rows", .B = 1, .S = 7560, .D = 5120, .mode = OperandMode::per_batch},
      {.name = "wan_per_frame", .B = 1, .F = 21, .S = 360, .D = 1536, .mode = OperandMode::per_frame},
      {.name = "d2560_s4097", .B = 1, .S = 4097, .D = 2560, .mode = OperandMode::chunk6},
      {.name = "d3840_b3_s7", .B = 3, .S = 7, .D = 3840, .mode = OperandMode::per_batch},
      {.name = "d1536_s1", .B = 1, .S = 1, .D = 1536, .mode = OperandMode::chunk6},
      {.name = "per_row_gate", .B = 3, .S = 4097, .D = 1536, .mode = OperandMode::per_row},
      {.name = "strided_x", .B = 2, .S = 4097, .D = 3072, .mode = OperandMode::per_batch, .x_row_pad = 3072},
      {.name = "misaligned", .B = 1, .S = 4097, .D = 3072, .mode = OperandMode::per_batch, .x_offset = 3},
      {.name = "specials", .B = 1, .S = 4608, .D = 3072, .mode = OperandMode::chunk6, .specials = true},
      {.name = "in_place", .B = 1, .S = 4608, .D = 3072, .mode = OperandMode::chunk6, .in_place = true},
  };
}

std::string run_modulate_case(Device d, DType t, const AdalnCase& c, uint64_t seed) {
  if (c.mode == OperandMode::per_row) return "";  // a gate layout; modulate takes [.., D] rows
  auto x = make_x(d, t, c, seed);
  auto scale = make_operand(d, t, c, c.mode, 1, seed + 1);
  auto shift = make_operand(d, t, c, c.mode, 0, seed + 2);
  return compare_fused_with_eager(
      d, t, x_sizes(c), c.in_place ? &x.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_modulate_scale_shift(x.view, scale.view, shift.view, out, why);
      },
      [&](const TensorView& out) { modulate_scale_shift(x.view, scale.view, shift.view, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::modulate_scale_shift_chain(x.view, scale.view, shift.view, out, ws);
      });
}

std::string run_residual_gate_case(Device d, DType t, const AdalnCase& c, uint64_t seed) {
  if (c.mode == OperandMode::per_frame && c.F == 0) return "";
  auto residual = make_x(d, t, c, seed);
  auto gate = make_operand(d, t, c, c.mode, 2, seed + 1);
  auto update = random_tensor(d, t, x_sizes(c), {}, 0, {seed + 2, c.amplitude, c.specials});
  return compare_fused_with_eager(
      d, t, x_sizes(c), c.in_place ? &residual.view : nullptr,
      [&](const TensorView& out, std::string* why) {
        return can_use_residual_gate_add(residual.view, gate.view, update.view, out, why);
      },
      [&](const TensorView& out) { residual_gate_add(residual.view, gate.view, update.view, out); },
      [&](const TensorView& out, eager::Workspace& ws) {
        eager::residual_gate_add_chain(residual.view, gate.view, update.view, out, ws);
      });
}

}  // namespace dfuse::test
