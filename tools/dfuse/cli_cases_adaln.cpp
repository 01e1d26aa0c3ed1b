// Cases for the adaLN family: modulate_scale_shift and residual_gate_add, with the operand
// layouts DiT blocks hand them (per batch, per token, per frame, chunk(6) slices, in place).
#include "dfuse/cli_cases.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/adaln.h"

namespace dfuse::cli {

namespace {

// temb.chunk(6): shift, scale, gate of the attention branch, then of the MLP branch.
constexpr int kChunks = 6;
constexpr int kGateChunk = 2;

const CaseOp kModulate{
    "diffusion.modulate_scale_shift",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      modulate_scale_shift(in[0], in[1], in[2], out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::modulate_scale_shift_chain(in[0], in[1], in[2], out, ws, s);
    },
};

const CaseOp kResidualGate{
    "diffusion.residual_gate_add",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      residual_gate_add(in[0], in[1], in[2], out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::residual_gate_add_chain(in[0], in[1], in[2], out, ws, s);
    },
};

// ---- modulate_scale_shift: x, scale, shift --------------------------------------------------

Case modulate(const TokenShape& s, Modulation m, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  std::vector<OperandSpec> inputs = {dense("x", x)};
  std::string label = s.name;
  append_scale_shift(s, m, inputs, label);
  return kModulate.make(label, dtype, std::move(inputs), x, values);
}

Case modulate_per_frame(const FrameShape& s, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.frames, s.frame_tokens, s.hidden};
  const std::vector<int64_t> per_frame = {s.batch, s.frames, 1, s.hidden};
  std::string label = s.name + " per-frame";
  return kModulate.make(label, dtype, {dense("x", x), dense("scale", per_frame), dense("shift", per_frame)},
                        x, values);
}

Case in_place(Case c) {
  c.label += " in-place";
  c.in_place_input = 0;
  return c;
}

std::vector<Case> modulate_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(modulate(s, Modulation::chunk6, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models) {
    for (DType t : kCaseDtypes) cases.push_back(modulate(s, Modulation::chunk6, t));
  }
  const TokenShape& first = shapes.models.front();
  cases.push_back(modulate(first, Modulation::per_batch, DType::bf16));
  cases.push_back(modulate(first, Modulation::per_token, DType::bf16));
  cases.push_back(modulate(first, Modulation::chunk6, DType::bf16, Values::specials));
  cases.push_back(in_place(modulate(first, Modulation::per_batch, DType::bf16)));
  for (const auto& s : shapes.odd) {
    for (DType t : kCaseDtypes) {
      for (Modulation m : {Modulation::per_batch, Modulation::per_token, Modulation::chunk6}) {
        cases.push_back(modulate(s, m, t));
      }
      cases.push_back(modulate(s, Modulation::chunk6, t, Values::specials));
    }
    cases.push_back(in_place(modulate(s, Modulation::chunk6, DType::f32)));
  }
  for (const auto& s : shapes.frames) {
    for (DType t : kCaseDtypes) cases.push_back(modulate_per_frame(s, t));
    cases.push_back(modulate_per_frame(s, DType::bf16, Values::specials));
  }
  return cases;
}

// ---- residual_gate_add: residual, gate, update ----------------------------------------------

enum class Gating { per_batch, per_token, full, chunk6 };

Case residual_gate(const TokenShape& s, Gating g, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  std::vector<OperandSpec> inputs = {dense("residual", x)};
  std::string label = s.name;
  switch (g) {
    case Gating::per_batch:
      inputs.push_back(dense("gate", {s.batch, 1, s.hidden}));
      label += " gate per-batch";
      break;
    case Gating::per_token:
      inputs.push_back(dense("gate", {s.batch, s.tokens, 1}));
      label += " gate per-token";
      break;
    case Gating::full:
      inputs.push_back(dense("gate", x));
      label += " gate full";
      break;
    case Gating::chunk6:
      inputs.push_back(chunk_slice("gate", s.batch, s.hidden, kChunks, kGateChunk));
      label += " gate chunk6";
      break;
  }
  inputs.push_back(dense("update", x));
  return kResidualGate.make(label, dtype, std::move(inputs), x, values);
}

Case residual_gate_per_frame(const FrameShape& s, DType dtype) {
  const std::vector<int64_t> x = {s.batch, s.frames, s.frame_tokens, s.hidden};
  return kResidualGate.make(
      s.name + " gate per-frame", dtype,
      {dense("residual", x), dense("gate", {s.batch, s.frames, 1, s.hidden}), dense("update", x)}, x);
}

std::vector<Case> residual_gate_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(residual_gate(s, Gating::chunk6, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models) {
    for (DType t : kCaseDtypes) cases.push_back(residual_gate(s, Gating::chunk6, t));
  }
  const TokenShape& first = shapes.models.front();
  for (Gating g : {Gating::per_batch, Gating::per_token, Gating::full}) {
    cases.push_back(residual_gate(first, g, DType::bf16));
  }
  cases.push_back(residual_gate(first, Gating::chunk6, DType::bf16, Values::specials));
  cases.push_back(in_place(residual_gate(first, Gating::chunk6, DType::bf16)));
  for (const auto& s : shapes.odd) {
    for (DType t : kCaseDtypes) {
      for (Gating g : {Gating::per_batch, Gating::per_token, Gating::full, Gating::chunk6}) {
        cases.push_back(residual_gate(s, g, t));
      }
      cases.push_back(residual_gate(s, Gating::per_token, t, Values::specials));
    }
    cases.push_back(in_place(residual_gate(s, Gating::per_token, DType::f32)));
  }
  for (const auto& s : shapes.frames) {
    for (DType t : kCaseDtypes) cases.push_back(residual_gate_per_frame(s, t));
  }
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.modulate_scale_shift", &modulate_cases);
DFUSE_CLI_CASES("diffusion.residual_gate_add", &residual_gate_cases);

}  // namespace dfuse::cli
