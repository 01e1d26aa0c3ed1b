// Cases for the RMSNorm ops of the norm family: rmsnorm_scale_shift against F.rms_norm and
// rmsnorm_decomposed_scale_shift against the diffusers RMSNorm chain, with a weight or without, and
// the modulation layouts DiT blocks hand them (per batch, per token, chunk(6) slices, in place);
// rmsnorm_scale / rmsnorm_tanh_residual (storage-dtype RMSNorm); per-head QK RMSNorm of packed q/k.
#include "dfuse/cli_cases.h"
#include "dfuse/eager/rms_norm.h"
#include "dfuse/ops/rmsnorm.h"

namespace dfuse::cli {

namespace {

constexpr double kEps = 1e-6;
constexpr int kChunks = 6;

// Inputs {x, weight, scale, shift} or, without a weight, {x, scale, shift}.
template <RmsNormChain kChain>
void fused_scale_shift(std::span<const TensorView> in, const TensorView& out, Stream s) {
  const bool w = in.size() == 4;
  rmsnorm_scale_shift(kChain, in[0], w ? &in[1] : nullptr, kEps, in[w ? 2 : 1], in[w ? 3 : 2], out, s);
}

template <RmsNormChain kChain>
void eager_scale_shift(std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
  const bool w = in.size() == 4;
  eager::rmsnorm_scale_shift_chain(kChain, in[0], w ? &in[1] : nullptr, kEps, in[w ? 2 : 1], in[w ? 3 : 2], out, ws,
                                   s);
}

const CaseOp kTorchScaleShift{"diffusion.rmsnorm_scale_shift", &fused_scale_shift<RmsNormChain::torch_rms_norm>,
                              &eager_scale_shift<RmsNormChain::torch_rms_norm>};
const CaseOp kDecomposedScaleShift{"diffusion.rmsnorm_decomposed_scale_shift",
                                   &fused_scale_shift<RmsNormChain::diffusers_decomposed>,
                                   &eager_scale_shift<RmsNormChain::diffusers_decomposed>};

Case scale_shift(const CaseOp& op, const TokenShape& s, Modulation m, bool weight, DType dtype,
                 Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  std::vector<OperandSpec> inputs = {dense("x", x)};
  std::string label = s.name;
  if (weight) inputs.push_back(dense("weight", {s.hidden}));
  else label += " no-weight";
  append_scale_shift(s, m, inputs, label);
  return op.make(label, dtype, std::move(inputs), x, values);
}

std::vector<Case> scale_shift_cases(const CaseOp& op, const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(scale_shift(op, s, Modulation::chunk6, true, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models)
    for (DType t : kCaseDtypes) cases.push_back(scale_shift(op, s, Modulation::chunk6, true, t));
  const TokenShape& first = shapes.models.front();
  cases.push_back(scale_shift(op, first, Modulation::per_batch, false, DType::bf16));
  cases.push_back(scale_shift(op, first, Modulation::per_token, true, DType::bf16));
  cases.push_back(scale_shift(op, first, Modulation::chunk6, true, DType::bf16, Values::specials));
  Case in_place = scale_shift(op, first, Modulation::per_batch, true, DType::bf16);
  in_place.label += " in-place";
  in_place.in_place_input = 0;
  cases.push_back(in_place);
  for (const auto& s : shapes.odd)
    for (DType t : kCaseDtypes) {
      for (Modulation m : {Modulation::per_batch, Modulation::per_token, Modulation::chunk6})
        cases.push_back(scale_shift(op, s, m, true, t));
      cases.push_back(scale_shift(op, s, Modulation::chunk6, false, t));
    }
  return cases;
}

std::vector<Case> torch_scale_shift_cases(const CaseRequest& r) { return scale_shift_cases(kTorchScaleShift, r); }
std::vector<Case> decomposed_scale_shift_cases(const CaseRequest& r) {
  return scale_shift_cases(kDecomposedScaleShift, r);
}

// ---- rmsnorm_scale {x, weight, scale} and rmsnorm_tanh_residual {residual, gate, y, weight} --------------

const CaseOp kScale{
    "diffusion.rmsnorm_scale",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      rmsnorm_scale(in[0], &in[1], kEps, in[2], out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::rmsnorm_scale_chain(in[0], &in[1], kEps, in[2], out, ws, s);
    },
};

const CaseOp kTanhResidual{
    "diffusion.rmsnorm_tanh_residual",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      rmsnorm_tanh_residual(in[0], in[1], in[2], &in[3], kEps, out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::rmsnorm_tanh_residual_chain(in[0], in[1], in[2], &in[3], kEps, out, ws, s);
    },
};

// The per-batch operand: a dense [B, 1, D], or (chunk6) a slice of a [B, 1, 6D] table.
OperandSpec per_batch(const char* name, const TokenShape& s, bool chunk6, int chunk) {
  return chunk6 ? chunk_slice(name, s.batch, s.hidden, kChunks, chunk) : dense(name, {s.batch, 1, s.hidden});
}

Case storage_case(bool tanh_residual, const TokenShape& s, bool chunk6, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  const std::string label = s.name + (chunk6 ? " chunk6" : " per-batch");
  if (!tanh_residual)
    return kScale.make(label, dtype, {dense("x", x), dense("weight", {s.hidden}), per_batch("scale", s, chunk6, 1)},
                       x, values);
  return kTanhResidual.make(label, dtype,
                            {dense("residual", x), per_batch("gate", s, chunk6, 2), dense("y", x),
                             dense("weight", {s.hidden})},
                            x, values);
}

std::vector<Case> storage_cases(bool tanh_residual, const CaseRequest& request) {
  std::vector<Case> cases;
  for (const auto& s : request.shapes.models) {
    if (request.purpose == Purpose::bench) {
      cases.push_back(storage_case(tanh_residual, s, true, DType::bf16));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(storage_case(tanh_residual, s, true, t));
    cases.push_back(storage_case(tanh_residual, s, false, DType::bf16, Values::specials));
  }
  if (request.purpose == Purpose::verify)
    for (const auto& s : request.shapes.odd)
      for (DType t : kCaseDtypes) cases.push_back(storage_case(tanh_residual, s, false, t));
  return cases;
}

std::vector<Case> scale_cases(const CaseRequest& r) { return storage_cases(false, r); }
std::vector<Case> tanh_residual_cases(const CaseRequest& r) { return storage_cases(true, r); }

// ---- qk_rmsnorm(_native): q, k, q_weight, k_weight; the output is [2, B, S, H, Dh] = (q_out, k_out) ----

// out[i] of the [2, ...] output: q's result (0) or k's (1).
TensorView result(const TensorView& out, int i) {
  char* data = static_cast<char*>(out.data()) + i * out.stride(0) * int64_t(dtype_size(out.dtype()));
  return TensorView(data, out.dtype(), out.sizes() + 1, out.strides() + 1, out.dim() - 1, out.device());
}

template <RmsNormChain kChain>
void fused_qk(std::span<const TensorView> in, const TensorView& out, Stream s) {
  qk_rmsnorm(kChain, in[0], in[1], &in[2], &in[3], kEps, result(out, 0), result(out, 1), s);
}

template <RmsNormChain kChain>
void eager_qk(std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
  for (int i = 0; i < 2; ++i) {
    const TensorView o = result(out, i);
    if (kChain == RmsNormChain::torch_rms_norm)
      eager::rms_norm(in[i], &in[2 + i], kEps, o, s);
    else if (kChain == RmsNormChain::storage_dtype)
      eager::rms_norm_storage_dtype_chain(in[i], &in[2 + i], kEps, o, ws, s);
    else
      eager::rms_norm_decomposed_chain(in[i], &in[2 + i], kEps, o, ws, s);
  }
}

const CaseOp kQkNative{"diffusion.qk_rmsnorm_native", &fused_qk<RmsNormChain::diffusers_decomposed>,
                       &eager_qk<RmsNormChain::diffusers_decomposed>};
const CaseOp kQkStorage{"diffusion.qk_rmsnorm_storage_dtype", &fused_qk<RmsNormChain::storage_dtype>,
                        &eager_qk<RmsNormChain::storage_dtype>};
const CaseOp kQkTorch{"diffusion.qk_rmsnorm", &fused_qk<RmsNormChain::torch_rms_norm>,
                      &eager_qk<RmsNormChain::torch_rms_norm>};

// q and k of a packed [B, S, 3 * H * Dh] projection (chunk(3) then unflatten), heads of 128.
Case qk(const CaseOp& op, const TokenShape& s, DType dtype, Values values = Values::finite) {
  constexpr int64_t kHeadDim = 128;
  const int64_t heads = s.hidden / kHeadDim;
  const std::vector<int64_t> sizes = {s.batch, s.tokens, heads, kHeadDim};
  const std::vector<int64_t> strides = {s.tokens * 3 * s.hidden, 3 * s.hidden, kHeadDim, 1};
  const int64_t storage = s.batch * s.tokens * 3 * s.hidden;
  OperandSpec q{"q", sizes, strides, 0, storage}, k{"k", sizes, strides, s.hidden, storage};
  return op.make(s.name + " packed qkv", dtype, {q, k, dense("q_weight", {kHeadDim}), dense("k_weight", {kHeadDim})},
                 {2, s.batch, s.tokens, heads, kHeadDim}, values);
}

std::vector<Case> qk_cases(const CaseOp& op, const CaseRequest& request) {
  std::vector<Case> cases;
  for (const auto& s : request.shapes.models) {
    if (request.purpose == Purpose::bench) {
      cases.push_back(qk(op, s, DType::bf16));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(qk(op, s, t));
    cases.push_back(qk(op, s, DType::bf16, Values::specials));
  }
  if (request.purpose == Purpose::verify)
    for (const auto& s : request.shapes.odd)
      for (DType t : kCaseDtypes) cases.push_back(qk(op, s, t));
  return cases;
}

std::vector<Case> qk_native_cases(const CaseRequest& r) { return qk_cases(kQkNative, r); }
std::vector<Case> qk_torch_cases(const CaseRequest& r) { return qk_cases(kQkTorch, r); }
std::vector<Case> qk_storage_cases(const CaseRequest& r) { return qk_cases(kQkStorage, r); }

}  // namespace

DFUSE_CLI_CASES("diffusion.rmsnorm_scale_shift", &torch_scale_shift_cases);
DFUSE_CLI_CASES("diffusion.rmsnorm_decomposed_scale_shift", &decomposed_scale_shift_cases);

DFUSE_CLI_CASES("diffusion.rmsnorm_scale", &scale_cases);
DFUSE_CLI_CASES("diffusion.rmsnorm_tanh_residual", &tanh_residual_cases);
DFUSE_CLI_CASES("diffusion.qk_rmsnorm_native", &qk_native_cases);
DFUSE_CLI_CASES("diffusion.qk_rmsnorm", &qk_torch_cases);
DFUSE_CLI_CASES("diffusion.qk_rmsnorm_storage_dtype", &qk_storage_cases);

}  // namespace dfuse::cli
