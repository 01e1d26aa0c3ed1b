// Cases for the request-gated norm + epilogue ops with fp32 internals: norm_scale_shift (LayerNorm
// with and without affine, RMSNorm with and without weight; scale/shift per batch, per token, per
// frame, as scalars and chunk(6) slices), rmsnorm_modulate_fp32 (LTX-2's diffusers RMSNorm +
// modulate) and
// rmsnorm_tanh_residual_fp32. Their contract against the lossless chains is close, which the
// bitwise verify cannot check (the host/GPU tests and pytest check the bounds); verify compares
// them bit for bit against their fp32 chains (the chain on float copies, rounded once:
// dfuse/eager/norm_fp32.h), with x dense so that aten's path for x is that of its float copy.
#include <string>
#include <utility>

#include "dfuse/cli_cases.h"
#include "dfuse/eager/norm_fp32.h"
#include "dfuse/ops/norm.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse::cli {

namespace {

constexpr double kEps = 1e-6;

// Inputs {x, scale, shift} plus the weight (and, LayerNorm, the bias) when present.
template <NormKind N>
void fused_norm_scale_shift(std::span<const TensorView> in, const TensorView& out, Stream s) {
  const TensorView* w = in.size() > 3 ? &in[3] : nullptr;
  const TensorView* b = in.size() > 4 ? &in[4] : nullptr;
  norm_scale_shift(N, in[0], w, b, kEps, in[1], in[2], out, s);
}

template <NormKind N>
void fp32_chain(std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
  const TensorView* w = in.size() > 3 ? &in[3] : nullptr;
  const TensorView* b = in.size() > 4 ? &in[4] : nullptr;
  eager::norm_scale_shift_fp32_chain(N, in[0], w, b, kEps, in[1], in[2], out, ws, s);
}

const CaseOp kLayerNorm{"diffusion.norm_scale_shift", &fused_norm_scale_shift<NormKind::layer_norm>,
                        &fp32_chain<NormKind::layer_norm>};
const CaseOp kRmsNorm{"diffusion.norm_scale_shift", &fused_norm_scale_shift<NormKind::rms_norm>,
                      &fp32_chain<NormKind::rms_norm>};
const CaseOp kLtx2{
    "diffusion.rmsnorm_modulate_fp32",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      rmsnorm_modulate_fp32(in[0], in.size() > 3 ? &in[3] : nullptr, kEps, in[1], in[2], out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::rmsnorm_modulate_fp32_chain(in[0], in.size() > 3 ? &in[3] : nullptr, kEps, in[1], in[2], out, ws, s);
    },
};

enum class Affine { none, weight, weight_and_bias };

void append_affine(const TokenShape& s, Affine a, std::vector<OperandSpec>& inputs, std::string& label) {
  if (a == Affine::none) return;
  inputs.push_back(dense("weight", {s.hidden}));
  label += " weight";
  if (a == Affine::weight_and_bias) {
    inputs.push_back(dense("bias", {s.hidden}));
    label += "+bias";
  }
}

Case modulate_case(const CaseOp& op, const TokenShape& s, Modulation m, Affine a, DType dtype,
                   Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  std::vector<OperandSpec> inputs = {dense("x", x)};
  std::string label = s.name;
  append_scale_shift(s, m, inputs, label);
  append_affine(s, a, inputs, label);
  return op.make(label, dtype, std::move(inputs), x, values);
}

// x [B, F, HW, D] with scale/shift per frame [B, F, 1, D] (Wan), or a scalar [1].
Case frame_case(const CaseOp& op, const FrameShape& s, bool scalar, DType dtype) {
  const std::vector<int64_t> x = {s.batch, s.frames, s.frame_tokens, s.hidden};
  const std::vector<int64_t> mod = scalar ? std::vector<int64_t>{1} : std::vector<int64_t>{s.batch, s.frames, 1, s.hidden};
  return op.make(s.name + (scalar ? " scalar" : " per-frame"), dtype, {dense("x", x), dense("scale", mod),
                                                                      dense("shift", mod)},
                 x);
}

std::vector<Case> norm_scale_shift_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) {
      cases.push_back(modulate_case(kLayerNorm, s, Modulation::chunk6, Affine::none, DType::bf16));
      cases.push_back(modulate_case(kRmsNorm, s, Modulation::chunk6, Affine::weight, DType::bf16));
    }
    return cases;
  }
  for (const auto& s : shapes.models)
    for (DType t : kCaseDtypes) {
      cases.push_back(modulate_case(kLayerNorm, s, Modulation::chunk6, Affine::none, t));
      cases.push_back(modulate_case(kRmsNorm, s, Modulation::per_token, Affine::weight, t));
    }
  const TokenShape& first = shapes.models.front();
  cases.push_back(modulate_case(kLayerNorm, first, Modulation::per_batch, Affine::weight_and_bias, DType::bf16));
  cases.push_back(modulate_case(kRmsNorm, first, Modulation::per_batch, Affine::none, DType::bf16));
  cases.push_back(modulate_case(kLayerNorm, first, Modulation::chunk6, Affine::none, DType::bf16, Values::specials));
  cases.push_back(modulate_case(kRmsNorm, first, Modulation::chunk6, Affine::weight, DType::f16, Values::specials));
  Case in_place = modulate_case(kLayerNorm, first, Modulation::per_batch, Affine::none, DType::bf16);
  in_place.label += " in-place";
  in_place.in_place_input = 0;
  cases.push_back(std::move(in_place));
  for (const auto& f : shapes.frames)
    for (DType t : kCaseDtypes) {
      cases.push_back(frame_case(kLayerNorm, f, false, t));
      cases.push_back(frame_case(kRmsNorm, f, true, t));
    }
  for (const auto& s : shapes.odd)
    for (DType t : kCaseDtypes) {
      cases.push_back(modulate_case(kLayerNorm, s, Modulation::per_token, Affine::weight_and_bias, t));
      TokenShape odd_width = s;  // D % 4 == 2: aten's generic path
      odd_width.hidden -= 2;
      odd_width.name += " D-2";
      cases.push_back(modulate_case(kLayerNorm, odd_width, Modulation::chunk6, Affine::none, t));
      cases.push_back(modulate_case(kRmsNorm, odd_width, Modulation::per_batch, Affine::weight, t));
    }
  return cases;
}

// LTX-2 (hidden 4096) and the model widths: RMSNorm with its weight, chunk(6) and per-token values.
std::vector<Case> rmsnorm_modulate_fp32_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<TokenShape> widths = shapes.models;
  widths.push_back({"ltx-2", 1, request.shapes.models.front().tokens, 4096});
  std::vector<Case> cases;
  for (const auto& s : widths) {
    if (request.purpose == Purpose::bench) {
      cases.push_back(modulate_case(kLtx2, s, Modulation::chunk6, Affine::weight, DType::bf16));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(modulate_case(kLtx2, s, Modulation::per_token, Affine::weight, t));
    cases.push_back(modulate_case(kLtx2, s, Modulation::chunk6, Affine::none, DType::bf16));
  }
  if (request.purpose == Purpose::verify)
    for (const auto& s : shapes.odd)
      cases.push_back(modulate_case(kLtx2, s, Modulation::chunk6, Affine::weight, DType::bf16, Values::specials));
  return cases;
}

// ---- rmsnorm_tanh_residual_fp32 {residual, gate, y, weight} --------------------------------------------

const CaseOp kTanhResidual{
    "diffusion.rmsnorm_tanh_residual_fp32",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      rmsnorm_tanh_residual_fp32(in[0], in[1], in[2], &in[3], kEps, out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::rmsnorm_tanh_residual_fp32_chain(in[0], in[1], in[2], &in[3], kEps, out, ws, s);
    },
};

Case tanh_residual_case(const TokenShape& s, bool chunk6, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  const OperandSpec gate = chunk6 ? chunk_slice("gate", s.batch, s.hidden, 6, 2) : dense("gate", {s.batch, 1, s.hidden});
  return kTanhResidual.make(s.name + (chunk6 ? " chunk6" : " per-batch"), dtype,
                            {dense("residual", x), gate, dense("y", x), dense("weight", {s.hidden})}, x, values);
}

std::vector<Case> rmsnorm_tanh_residual_fp32_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  for (const auto& s : shapes.models) {
    if (request.purpose == Purpose::bench) {
      cases.push_back(tanh_residual_case(s, true, DType::bf16));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(tanh_residual_case(s, true, t));
    cases.push_back(tanh_residual_case(s, false, DType::bf16, Values::specials));
  }
  if (request.purpose == Purpose::verify)
    for (const auto& s : shapes.odd)
      for (DType t : kCaseDtypes) cases.push_back(tanh_residual_case(s, false, t));
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.norm_scale_shift", &norm_scale_shift_cases);
DFUSE_CLI_CASES("diffusion.rmsnorm_modulate_fp32", &rmsnorm_modulate_fp32_cases);
DFUSE_CLI_CASES("diffusion.rmsnorm_tanh_residual_fp32", &rmsnorm_tanh_residual_fp32_cases);

}  // namespace dfuse::cli
