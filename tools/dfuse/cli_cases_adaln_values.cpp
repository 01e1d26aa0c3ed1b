// Cases for the adaLN value ops: temb_table_slices (Wan's fp32 table + temb, per batch [B, 6, D]
// and per token [B, S, 6, D]), ltx2_ada_values (nine-way split, per batch and per token, table in
// the timestep's dtype or fp32) and scaled_residual_bf16 (bf16 residual, fp32 gate per frame or
// per token). A multi-output op writes its n dense slices into one [n, ...] output, slice k at
// out[k]. timestep_embedding has a close contract, which the bitwise verify cannot check: its
// bound is tested by the host/GPU tests and pytest.
#include <algorithm>
#include <vector>

#include "dfuse/cli_cases.h"
#include "dfuse/eager/adaln_values.h"
#include "dfuse/ops/adaln.h"

namespace dfuse::cli {

namespace {

// Per-token modulation tensors grow with tokens x parts x hidden; model token counts beyond this
// (Wan 2.1 14B's 75600) are cut to it (Wan 2.2 TI2V 5B at 704p, 121 frames: 27280 tokens).
constexpr int64_t kMaxPerTokenRows = 27280;

// The parts out[k] of a stacked [n, ...] output.
std::vector<TensorView> parts(const TensorView& out) {
  std::vector<TensorView> p;
  for (int64_t k = 0; k < out.size(0); ++k) {
    auto* base = static_cast<char*>(out.data()) + k * out.stride(0) * int64_t(dtype_size(out.dtype()));
    p.emplace_back(base, out.dtype(), out.sizes() + 1, out.strides() + 1, out.dim() - 1, out.device());
  }
  return p;
}

const CaseOp kTembSlices{
    "diffusion.temb_table_slices",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      temb_table_slices(in[0], in[1], parts(out), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::temb_table_slices_chain(in[0], in[1], parts(out), ws, s);
    },
};

const CaseOp kLtx2{
    "diffusion.ltx2_ada_values",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      ltx2_ada_values(in[0], in[1], parts(out), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::ltx2_ada_values_chain(in[0], in[1], parts(out), ws, s);
    },
};

const CaseOp kScaledResidual{
    "diffusion.scaled_residual_bf16",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      scaled_residual_bf16(in[0], in[1], in[2], out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::scaled_residual_bf16_chain(in[0], in[1], in[2], out, ws, s);
    },
};

OperandSpec f32(OperandSpec o) {
  o.dtype = DType::f32;
  return o;
}

// ---- temb_table_slices: table (fp32), temb -------------------------------------------------------

Case temb_slices(const TokenShape& s, bool per_token, DType dtype, Values values = Values::finite) {
  const int64_t tokens = std::min(s.tokens, kMaxPerTokenRows);
  const std::vector<int64_t> temb =
      per_token ? std::vector<int64_t>{s.batch, tokens, 6, s.hidden} : std::vector<int64_t>{s.batch, 6, s.hidden};
  std::vector<int64_t> out = {6};
  out.insert(out.end(), temb.begin(), temb.end());
  out[out.size() - 2] = 1;
  const std::vector<int64_t> table =
      per_token ? std::vector<int64_t>{1, 1, 6, s.hidden} : std::vector<int64_t>{1, 6, s.hidden};
  Case c = kTembSlices.make(s.name + (per_token ? " per-token " + std::to_string(tokens) : " per-batch"), dtype,
                            {f32(dense("table", table)), dense("temb", temb)}, out, values);
  c.out_dtype = DType::f32;
  return c;
}

std::vector<Case> temb_slices_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(temb_slices(s, true, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models)
    for (DType t : kCaseDtypes)
      for (bool per_token : {false, true}) cases.push_back(temb_slices(s, per_token, t));
  for (const auto& s : shapes.odd) {
    cases.push_back(temb_slices(s, true, DType::bf16));
    cases.push_back(temb_slices(s, true, DType::bf16, Values::specials));
  }
  return cases;
}

// ---- ltx2_ada_values: table, timestep ------------------------------------------------------------

constexpr int64_t kLtx2Parts = 9;
constexpr int64_t kLtx2MaxTokens = 6144;  // per-token timesteps of LTX-2 at 768x512, 121 frames

Case ltx2(const TokenShape& s, bool per_token, DType dtype, bool fp32_table, Values values = Values::finite) {
  const int64_t tokens = per_token ? std::min(s.tokens, kLtx2MaxTokens) : 1;
  OperandSpec table = dense("table", {kLtx2Parts, s.hidden});
  if (fp32_table) table = f32(table);
  std::string label =
      s.name + (per_token ? " per-token " + std::to_string(tokens) : " per-batch") + (fp32_table ? " fp32 table" : "");
  return kLtx2.make(label, dtype, {table, dense("timestep", {s.batch, tokens, kLtx2Parts * s.hidden})},
                    {kLtx2Parts, s.batch, tokens, s.hidden}, values);
}

std::vector<Case> ltx2_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(ltx2(s, true, DType::bf16, false));
    return cases;
  }
  for (const auto& s : shapes.models)
    for (DType t : kCaseDtypes)
      for (bool per_token : {false, true}) cases.push_back(ltx2(s, per_token, t, false));
  for (const auto& s : shapes.odd) {
    cases.push_back(ltx2(s, true, DType::bf16, true));
    cases.push_back(ltx2(s, true, DType::f16, true));
    cases.push_back(ltx2(s, true, DType::bf16, false, Values::specials));
  }
  return cases;
}

// ---- scaled_residual_bf16: x, update, gate (fp32) -------------------------------------------------

Case scaled_residual_per_frame(const FrameShape& s, Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.frames, s.frame_tokens, s.hidden};
  return kScaledResidual.make(s.name + " gate per-frame", DType::bf16,
                              {dense("x", x), dense("update", x), f32(dense("gate", {s.batch, s.frames, 1, s.hidden}))},
                              x, values);
}

Case scaled_residual_per_token(const TokenShape& s) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  return kScaledResidual.make(s.name + " gate per-token", DType::bf16,
                              {dense("x", x), dense("update", x), f32(dense("gate", x))}, x);
}

std::vector<Case> scaled_residual_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.frames) cases.push_back(scaled_residual_per_frame(s));
    return cases;
  }
  for (const auto& s : shapes.frames) {
    cases.push_back(scaled_residual_per_frame(s));
    cases.push_back(scaled_residual_per_frame(s, Values::specials));
    Case in_place = scaled_residual_per_frame(s);
    in_place.label += " in-place";
    in_place.in_place_input = 0;
    cases.push_back(in_place);
  }
  for (const auto& s : shapes.models) cases.push_back(scaled_residual_per_token(s));
  for (const auto& s : shapes.odd) cases.push_back(scaled_residual_per_token(s));
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.temb_table_slices", &temb_slices_cases);
DFUSE_CLI_CASES("diffusion.ltx2_ada_values", &ltx2_cases);
DFUSE_CLI_CASES("diffusion.scaled_residual_bf16", &scaled_residual_cases);

}  // namespace dfuse::cli
