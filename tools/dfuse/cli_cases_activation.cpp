// Cases for the activation family: silu_mul (gate and up projections as separate tensors or as
// the halves of one packed projection), bias_silu (channels last and channel first), bias_glu
// (with and without a bias) and gelu_tanh_cat (attention output dense or as transposed heads),
// at the shape table's model and odd shapes.
#include "dfuse/cli_cases.h"
#include "dfuse/eager/chains.h"
#include "dfuse/ops/activation.h"

namespace dfuse::cli {

namespace {

const CaseOp kSiluMul{
    "diffusion.silu_mul",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) { silu_mul(in[0], in[1], out, s); },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::silu_mul_chain(in[0], in[1], out, ws, s);
    },
};

const CaseOp kBiasSilu{
    "diffusion.bias_silu",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) { bias_silu(in[0], in[1], out, s); },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::bias_silu_chain(in[0], in[1], out, ws, s);
    },
};

// inputs = {x} or {x, bias}.
const TensorView* optional_bias(std::span<const TensorView> in) { return in.size() > 1 ? &in[1] : nullptr; }

const CaseOp kBiasGlu{
    "diffusion.bias_glu",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      bias_glu(in[0], optional_bias(in), out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::bias_glu_chain(in[0], optional_bias(in), out, ws, s);
    },
};

// inputs = {attn, mlp}.
const CaseOp kGeluTanhCat{
    "diffusion.gelu_tanh_cat",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) { gelu_tanh_cat(in[0], in[1], out, s); },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::gelu_tanh_cat_chain(in[0], in[1], out, ws, s);
    },
};

// Half `index` of a packed [batch, tokens, 2 * hidden] projection: p[..., :hidden] or p[..., hidden:].
OperandSpec packed_half(std::string name, const TokenShape& s, int index) {
  const int64_t row = 2 * s.hidden;
  return {std::move(name),
          {s.batch, s.tokens, s.hidden},
          {s.tokens * row, row, 1},
          index * s.hidden,
          s.batch * s.tokens * row};
}

// ---- silu_mul: a, b -------------------------------------------------------------------------

Case silu_mul(const TokenShape& s, bool packed, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  if (packed)
    return kSiluMul.make(s.name + " packed", dtype, {packed_half("a", s, 0), packed_half("b", s, 1)}, x,
                         values);
  return kSiluMul.make(s.name, dtype, {dense("a", x), dense("b", x)}, x, values);
}

std::vector<Case> silu_mul_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) {
      cases.push_back(silu_mul(s, false, DType::bf16));
      cases.push_back(silu_mul(s, true, DType::bf16));
    }
    return cases;
  }
  for (const auto& s : shapes.models) {
    for (DType t : kCaseDtypes) cases.push_back(silu_mul(s, false, t));
    cases.push_back(silu_mul(s, true, DType::bf16));
  }
  cases.push_back(silu_mul(shapes.models.front(), true, DType::bf16, Values::specials));
  for (const auto& s : shapes.odd) {
    for (DType t : kCaseDtypes) {
      cases.push_back(silu_mul(s, false, t));
      cases.push_back(silu_mul(s, true, t, Values::specials));
    }
  }
  return cases;
}

// ---- bias_silu: x, bias ---------------------------------------------------------------------

// Channels last: x [batch, tokens, hidden], bias [hidden]. Channel first: x [batch, hidden,
// tokens], bias [hidden, 1] (a 1x1 conv's output with H*W = tokens).
Case bias_silu(const TokenShape& s, bool channel_first, DType dtype, Values values = Values::finite) {
  if (channel_first) {
    const std::vector<int64_t> x = {s.batch, s.hidden, s.tokens};
    return kBiasSilu.make(s.name + " channel-first", dtype, {dense("x", x), dense("bias", {s.hidden, 1})}, x,
                          values);
  }
  const std::vector<int64_t> x = {s.batch, s.tokens, s.hidden};
  return kBiasSilu.make(s.name, dtype, {dense("x", x), dense("bias", {s.hidden})}, x, values);
}

std::vector<Case> bias_silu_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(bias_silu(s, false, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models) {
    for (DType t : kCaseDtypes) cases.push_back(bias_silu(s, false, t));
    cases.push_back(bias_silu(s, true, DType::bf16));
  }
  for (const auto& s : shapes.odd) {
    for (DType t : kCaseDtypes) {
      cases.push_back(bias_silu(s, false, t));
      cases.push_back(bias_silu(s, true, t, Values::specials));
    }
  }
  return cases;
}

// ---- bias_glu: x [batch, tokens, 2 * hidden], bias [2 * hidden] or none ------------------------

Case bias_glu(const TokenShape& s, bool with_bias, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> out = {s.batch, s.tokens, s.hidden};
  std::vector<OperandSpec> inputs = {dense("x", {s.batch, s.tokens, 2 * s.hidden})};
  if (with_bias) inputs.push_back(dense("bias", {2 * s.hidden}));
  return kBiasGlu.make(s.name + (with_bias ? "" : " no-bias"), dtype, std::move(inputs), out, values);
}

std::vector<Case> bias_glu_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : shapes.models) cases.push_back(bias_glu(s, true, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models) {
    for (DType t : kCaseDtypes) cases.push_back(bias_glu(s, true, t));
    cases.push_back(bias_glu(s, false, DType::bf16));
  }
  for (const auto& s : shapes.odd) {
    for (DType t : kCaseDtypes) {
      cases.push_back(bias_glu(s, true, t));
      cases.push_back(bias_glu(s, false, t, Values::specials));
    }
  }
  return cases;
}

// ---- gelu_tanh_cat: attn [batch, tokens, hidden] or heads, mlp [batch, tokens, 4 * hidden] ------

// heads: attn is the attention output's [B, H, S, D] transposed to [B, S, H, D] (head dim 128), as
// FLUX.1's single-stream processor leaves it before its reshape.
Case gelu_tanh_cat(const TokenShape& s, bool heads, DType dtype, Values values = Values::finite) {
  const int64_t mlp_width = 4 * s.hidden, head_dim = 128, h = s.hidden / head_dim;
  OperandSpec attn = dense("attn", {s.batch, s.tokens, s.hidden});
  if (heads)
    attn = {"attn heads",
            {s.batch, s.tokens, h, head_dim},
            {h * s.tokens * head_dim, head_dim, s.tokens * head_dim, 1},
            0,
            s.batch * s.tokens * s.hidden};
  return kGeluTanhCat.make(s.name + (heads ? " heads" : ""), dtype,
                           {std::move(attn), dense("mlp", {s.batch, s.tokens, mlp_width})},
                           {s.batch, s.tokens, s.hidden + mlp_width}, values);
}

std::vector<Case> gelu_tanh_cat_cases(const CaseRequest& request) {
  const ShapeTable& shapes = request.shapes;
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    cases.push_back(gelu_tanh_cat(shapes.models.front(), true, DType::bf16));
    return cases;
  }
  for (const auto& s : shapes.models) {
    for (DType t : kCaseDtypes) cases.push_back(gelu_tanh_cat(s, true, t));
    cases.push_back(gelu_tanh_cat(s, false, DType::bf16));
  }
  for (const auto& s : shapes.odd) {
    for (DType t : kCaseDtypes) {
      cases.push_back(gelu_tanh_cat(s, false, t));
      cases.push_back(gelu_tanh_cat(s, true, t, Values::specials));
    }
  }
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.gelu_tanh_cat", &gelu_tanh_cat_cases);
DFUSE_CLI_CASES("diffusion.silu_mul", &silu_mul_cases);
DFUSE_CLI_CASES("diffusion.bias_silu", &bias_silu_cases);
DFUSE_CLI_CASES("diffusion.bias_glu", &bias_glu_cases);

}  // namespace dfuse::cli
