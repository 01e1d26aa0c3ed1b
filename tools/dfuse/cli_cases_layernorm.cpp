// Cases for the LayerNorm ops of the normalization family: layernorm_modulate at model shapes
// (FLUX.1, Wan 2.1) and odd ones, scale/shift per batch, per token and as chunk(6) slices, and x
// views that send aten to its generic LayerNorm path (misaligned by one element, D % 4 != 0);
// qk_head_layernorm on [B, S, H, Dh] heads, dense and as views of a packed projection (its two
// outputs are the halves of one dense [2, B, S, H, Dh] output); fp32_layernorm_bf16 with f32
// weight/bias, aligned and misaligned.
#include <utility>

#include "dfuse/cli_cases.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/norm.h"

namespace dfuse::cli {

namespace {

// The eps of the models' norm1/norm2 (FLUX.1, Wan 2.1: nn.LayerNorm(..., eps=1e-6)).
constexpr double kEps = 1e-6;

const CaseOp kLayernormModulate{
    "diffusion.layernorm_modulate",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      layernorm_modulate(in[0], in[1], in[2], kEps, out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::layernorm_modulate_chain(in[0], in[1], in[2], kEps, out, ws, s);
    },
};

const CaseOp kLayernormFolded{
    "diffusion.layernorm_folded_modulate",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      layernorm_folded_modulate(in[0], in[1], in[2], kEps, out, s);
    },
    // The reference of a request-gated fold: F.layer_norm(x, (D,), 1 + scale, shift, eps), bit-exact.
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::layernorm_folded_modulate_chain(in[0], in[1], in[2], kEps, out, ws, s);
    },
};

// x of `s` (with `hidden` overridden for odd widths), starting `x_offset` elements into its storage.
Case layernorm_modulate(const TokenShape& s, Modulation m, DType dtype, Values values = Values::finite,
                        int64_t x_offset = 0, const CaseOp& op = kLayernormModulate) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  OperandSpec xs = dense("x", x);
  std::string label = s.name;
  if (x_offset > 0) {
    xs.offset = x_offset;
    xs.storage_elements += x_offset;
    label += " x+" + std::to_string(x_offset);
  }
  std::vector<OperandSpec> inputs = {xs};
  append_scale_shift(s, m, inputs, label);
  return op.make(label, dtype, std::move(inputs), x, values);
}

std::vector<Case> layernorm_modulate_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(layernorm_modulate(s, Modulation::chunk6, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models)
    for (DType t : kCaseDtypes) cases.push_back(layernorm_modulate(s, Modulation::chunk6, t));
  const TokenShape& first = shapes.models.front();
  cases.push_back(layernorm_modulate(first, Modulation::per_batch, DType::bf16));
  cases.push_back(layernorm_modulate(first, Modulation::per_token, DType::bf16));
  cases.push_back(layernorm_modulate(first, Modulation::chunk6, DType::bf16, Values::specials));
  for (DType t : kCaseDtypes) cases.push_back(layernorm_modulate(first, Modulation::chunk6, t, Values::finite, 1));
  Case in_place = layernorm_modulate(first, Modulation::per_batch, DType::bf16);
  in_place.label += " in-place";
  in_place.in_place_input = 0;
  cases.push_back(std::move(in_place));
  for (const auto& s : shapes.odd) {
    for (DType t : kCaseDtypes) {
      for (Modulation m : {Modulation::per_batch, Modulation::per_token, Modulation::chunk6})
        cases.push_back(layernorm_modulate(s, m, t));
      TokenShape odd_width = s;  // D % 4 == 2: the generic path
      odd_width.hidden -= 2;
      odd_width.name += " D-2";
      cases.push_back(layernorm_modulate(odd_width, Modulation::per_batch, t));
      cases.push_back(layernorm_modulate(s, Modulation::chunk6, t, Values::specials));
    }
  }
  return cases;
}

// ---- qk_head_layernorm: q, k, q_weight, q_bias, k_weight, k_bias; out = [q_out; k_out] ----------

// The q and k halves of the [2, B, S, H, Dh] output.
std::pair<TensorView, TensorView> qk_outputs(const TensorView& out) {
  const int64_t sizes[] = {out.size(1), out.size(2), out.size(3), out.size(4)};
  const int64_t strides[] = {out.stride(1), out.stride(2), out.stride(3), out.stride(4)};
  const TensorView q_out = out.restrided(sizes, strides, 4);
  const TensorView k_out(static_cast<char*>(out.data()) + out.stride(0) * int64_t(dtype_size(out.dtype())),
                         out.dtype(), sizes, strides, 4, out.device());
  return {q_out, k_out};
}

const CaseOp kQkHeadLayernorm{
    "diffusion.qk_head_layernorm",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      const auto [q_out, k_out] = qk_outputs(out);
      qk_head_layernorm(in[0], in[1], &in[2], &in[3], &in[4], &in[5], kEps, q_out, k_out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace&, Stream s) {
      const auto [q_out, k_out] = qk_outputs(out);
      eager::qk_head_layernorm_chain(in[0], in[1], &in[2], &in[3], &in[4], &in[5], kEps, q_out, k_out, s);
    },
};

struct HeadShape {
  std::string name;
  int64_t batch, tokens, heads, head_dim;
};

Case qk_head_layernorm(const HeadShape& s, bool packed, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.heads, s.head_dim};
  std::vector<OperandSpec> inputs;
  if (packed) {  // q, k, v = projection.chunk(3, dim=-1), unflattened to heads
    const int64_t hd = s.heads * s.head_dim, row = 3 * hd;
    const std::vector<int64_t> strides = {s.tokens * row, row, s.head_dim, 1};
    inputs.push_back({"q", x, strides, 0, s.batch * s.tokens * row});
    inputs.push_back({"k", x, strides, hd, s.batch * s.tokens * row});
  } else {
    inputs.push_back(dense("q", x));
    inputs.push_back(dense("k", x));
  }
  for (const char* name : {"q_weight", "q_bias", "k_weight", "k_bias"}) inputs.push_back(dense(name, {s.head_dim}));
  return kQkHeadLayernorm.make(s.name + (packed ? " packed" : ""), dtype, std::move(inputs),
                               {2, s.batch, s.tokens, s.heads, s.head_dim}, values);
}

std::vector<Case> qk_head_layernorm_cases(const CaseRequest& request) {
  std::vector<Case> cases;
  // The hidden size of each model shape split into heads of 128 (FLUX.1: 24, Wan 2.1 14B: 40).
  std::vector<HeadShape> shapes;
  for (const auto& s : request.shapes.models) shapes.push_back({s.name, s.batch, s.tokens, s.hidden / 128, 128});
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes) cases.push_back(qk_head_layernorm(s, true, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes)
    for (DType t : kCaseDtypes)
      for (bool packed : {false, true}) cases.push_back(qk_head_layernorm(s, packed, t));
  for (const auto& s : request.shapes.odd)
    for (DType t : kCaseDtypes) {
      cases.push_back(qk_head_layernorm({s.name + " Dh64", s.batch, s.tokens, s.hidden / 64, 64}, false, t));
      cases.push_back(qk_head_layernorm({s.name + " Dh126", s.batch, s.tokens, 3, 126}, false, t));  // generic path
      cases.push_back(qk_head_layernorm({s.name, s.batch, s.tokens, s.hidden / 128, 128}, true, t, Values::specials));
    }
  return cases;
}

// ---- layernorm_folded_modulate: x, scale, shift (one row each) -------------------------------------

std::vector<Case> layernorm_folded_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  const auto make = [](const TokenShape& s, DType t, Values values = Values::finite, int64_t x_offset = 0) {
    return layernorm_modulate(s, Modulation::chunk6, t, values, x_offset, kLayernormFolded);
  };
  for (const auto& m : shapes.models) {
    TokenShape s = m;
    s.batch = 1;  // one scale/shift row: LayerNorm's weight/bias
    if (request.purpose == Purpose::bench) {
      cases.push_back(make(s, DType::bf16));
      continue;
    }
    for (DType t : kCaseDtypes) cases.push_back(make(s, t));
  }
  if (request.purpose == Purpose::bench) return cases;
  TokenShape first = shapes.models.front();
  first.batch = 1;
  cases.push_back(make(first, DType::bf16, Values::specials));
  cases.push_back(make(first, DType::bf16, Values::finite, 1));
  for (const auto& o : shapes.odd) {
    TokenShape s = o;
    s.batch = 1;
    for (DType t : kCaseDtypes) cases.push_back(make(s, t));
  }
  return cases;
}

// ---- fp32_layernorm_bf16: x, weight, bias (f32) ----------------------------------------------------

const CaseOp kFp32LayerNorm{
    "diffusion.fp32_layernorm_bf16",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      fp32_layernorm_bf16(in[0], &in[1], &in[2], kEps, out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::fp32_layernorm_chain(in[0], &in[1], &in[2], kEps, out, ws, s);
    },
};

// x bf16/f16 [B, S, D]; weight and bias f32 [D] (`weight_offset` floats into their storage: a
// misaligned weight sends aten to the generic path).
Case fp32_layernorm(const TokenShape& s, DType dtype, Values values = Values::finite, int64_t weight_offset = 0) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  OperandSpec weight = dense("weight", {s.hidden}), bias = dense("bias", {s.hidden});
  for (OperandSpec* a : {&weight, &bias}) {
    a->dtype = DType::f32;
    a->offset = weight_offset;
    a->storage_elements += weight_offset;
  }
  std::string label = s.name + (weight_offset ? " weight+" + std::to_string(weight_offset) : "");
  return kFp32LayerNorm.make(label, dtype, {dense("x", x), weight, bias}, x, values);
}

std::vector<Case> fp32_layernorm_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(fp32_layernorm(s, DType::bf16));
    return cases;
  }
  for (DType t : {DType::bf16, DType::f16}) {
    for (const auto& s : shapes.models) cases.push_back(fp32_layernorm(s, t));
    cases.push_back(fp32_layernorm(shapes.models.front(), t, Values::specials));
    cases.push_back(fp32_layernorm(shapes.models.front(), t, Values::finite, 1));
    for (const auto& s : shapes.odd) {
      cases.push_back(fp32_layernorm(s, t));
      TokenShape odd_width = s;  // D % 4 == 2: the generic path
      odd_width.hidden -= 2;
      odd_width.name += " D-2";
      cases.push_back(fp32_layernorm(odd_width, t));
    }
  }
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.layernorm_modulate", &layernorm_modulate_cases);
DFUSE_CLI_CASES("diffusion.qk_head_layernorm", &qk_head_layernorm_cases);
DFUSE_CLI_CASES("diffusion.fp32_layernorm_bf16", &fp32_layernorm_cases);
DFUSE_CLI_CASES("diffusion.layernorm_folded_modulate", &layernorm_folded_cases);

}  // namespace dfuse::cli
