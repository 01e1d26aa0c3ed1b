// Cases for scale_residual_norm_scale_shift (normalization family): both norms at model shapes
// (FLUX.1, Wan 2.1) and odd ones; gate/scale/shift per batch, per token (gate also [B,S,1]) and as
// chunk(6) slices; D % 4 != 0 and a misaligned RMSNorm weight (aten's generic path for r). The op's
// two outputs are the halves of one dense [2, B, S, D] output: r, then the modulated value.
#include <utility>

#include "dfuse/cli_cases.h"
#include "dfuse/eager/chains.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/ops/norm.h"

namespace dfuse::cli {

namespace {

constexpr double kEps = 1e-6;
// temb.chunk(6): shift, scale, gate of the attention branch, then of the MLP branch.
constexpr int kChunks = 6;
constexpr int kShiftChunk = 0;
constexpr int kScaleChunk = 1;
constexpr int kGateChunk = 2;

// The r and out halves of the [2, B, S, D] output.
std::pair<TensorView, TensorView> residual_norm_outputs(const TensorView& out) {
  const int64_t sizes[] = {out.size(1), out.size(2), out.size(3)};
  const int64_t strides[] = {out.stride(1), out.stride(2), out.stride(3)};
  const TensorView r = out.restrided(sizes, strides, 3);
  const TensorView modulated(static_cast<char*>(out.data()) + out.stride(0) * int64_t(dtype_size(out.dtype())),
                             out.dtype(), sizes, strides, 3, out.device());
  return {r, modulated};
}

// in = residual, gate, update, scale, shift[, weight].
template <ResidualNorm N, bool kWeight>
void fused(std::span<const TensorView> in, const TensorView& out, Stream s) {
  const auto [r, modulated] = residual_norm_outputs(out);
  scale_residual_norm_scale_shift(N, in[0], in[1], in[2], kWeight ? &in[5] : nullptr, kEps, in[3], in[4], r,
                                  modulated, s);
}

template <ResidualNorm N, bool kWeight>
void chain(std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
  const auto [r, modulated] = residual_norm_outputs(out);
  eager::residual_gate_add_chain(in[0], in[1], in[2], r, ws, s);
  if constexpr (N == ResidualNorm::layer_norm)
    eager::layernorm_modulate_chain(r, in[3], in[4], kEps, modulated, ws, s);
  else
    eager::rmsnorm_scale_shift_chain(RmsNormChain::torch_rms_norm, r, kWeight ? &in[5] : nullptr, kEps, in[3],
                                     in[4], modulated, ws, s);
}

constexpr const char* kOp = "diffusion.scale_residual_norm_scale_shift";
const CaseOp kLayerNorm{kOp, &fused<ResidualNorm::layer_norm, false>, &chain<ResidualNorm::layer_norm, false>};
const CaseOp kRmsNorm{kOp, &fused<ResidualNorm::rms_norm, true>, &chain<ResidualNorm::rms_norm, true>};
const CaseOp kRmsNormNoWeight{kOp, &fused<ResidualNorm::rms_norm, false>, &chain<ResidualNorm::rms_norm, false>};

enum class Layout { per_batch, per_token, chunk6 };

// `weight_offset`: the RMSNorm weight starts that many elements into its storage (misaligned when
// not a multiple of 4: aten's generic path).
Case residual_norm(const CaseOp& op, const TokenShape& s, Layout layout, DType dtype, Values values = Values::finite,
                   int64_t weight_offset = 0) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  std::string label = s.name + (&op == &kLayerNorm ? " layer_norm" : " rms_norm");
  std::vector<OperandSpec> inputs = {dense("residual", x)};
  switch (layout) {
    case Layout::per_batch:
      inputs.push_back(dense("gate", {s.batch, 1, s.hidden}));
      inputs.push_back(dense("update", x));
      inputs.push_back(dense("scale", {s.batch, 1, s.hidden}));
      inputs.push_back(dense("shift", {s.batch, 1, s.hidden}));
      label += " per-batch";
      break;
    case Layout::per_token:
      inputs.push_back(dense("gate", {s.batch, s.tokens, 1}));
      inputs.push_back(dense("update", x));
      inputs.push_back(dense("scale", x));
      inputs.push_back(dense("shift", x));
      label += " per-token";
      break;
    case Layout::chunk6:
      inputs.push_back(chunk_slice("gate", s.batch, s.hidden, kChunks, kGateChunk));
      inputs.push_back(dense("update", x));
      inputs.push_back(chunk_slice("scale", s.batch, s.hidden, kChunks, kScaleChunk));
      inputs.push_back(chunk_slice("shift", s.batch, s.hidden, kChunks, kShiftChunk));
      label += " chunk6";
      break;
  }
  if (&op == &kRmsNorm) {
    OperandSpec weight = dense("weight", {s.hidden});
    weight.offset = weight_offset;
    weight.storage_elements += weight_offset;
    if (weight_offset) label += " weight+" + std::to_string(weight_offset);
    inputs.push_back(std::move(weight));
  } else if (&op == &kRmsNormNoWeight) {
    label += " no-weight";
  }
  return op.make(label, dtype, std::move(inputs), {2, s.batch, s.tokens, s.hidden}, values);
}

std::vector<Case> residual_norm_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models)
      for (const CaseOp* op : {&kLayerNorm, &kRmsNorm})
        cases.push_back(residual_norm(*op, s, Layout::chunk6, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models)
    for (const CaseOp* op : {&kLayerNorm, &kRmsNorm})
      for (DType t : kCaseDtypes) cases.push_back(residual_norm(*op, s, Layout::chunk6, t));
  const TokenShape& first = shapes.models.front();
  for (const CaseOp* op : {&kLayerNorm, &kRmsNorm}) {
    cases.push_back(residual_norm(*op, first, Layout::per_batch, DType::bf16));
    cases.push_back(residual_norm(*op, first, Layout::per_token, DType::bf16));
    cases.push_back(residual_norm(*op, first, Layout::chunk6, DType::bf16, Values::specials));
  }
  cases.push_back(residual_norm(kRmsNormNoWeight, first, Layout::chunk6, DType::bf16));
  for (DType t : kCaseDtypes) cases.push_back(residual_norm(kRmsNorm, first, Layout::chunk6, t, Values::finite, 1));
  for (const auto& s : shapes.odd) {
    for (DType t : kCaseDtypes) {
      for (const CaseOp* op : {&kLayerNorm, &kRmsNorm}) {
        for (Layout l : {Layout::per_batch, Layout::per_token, Layout::chunk6})
          cases.push_back(residual_norm(*op, s, l, t));
        TokenShape odd_width = s;  // D % 4 == 2: the generic path
        odd_width.hidden -= 2;
        odd_width.name += " D-2";
        cases.push_back(residual_norm(*op, odd_width, Layout::per_batch, t));
        cases.push_back(residual_norm(*op, s, Layout::chunk6, t, Values::specials));
      }
    }
  }
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.scale_residual_norm_scale_shift", &residual_norm_cases);

}  // namespace dfuse::cli
