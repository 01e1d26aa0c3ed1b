// Cases for the rope family: rope_rotate_half (diffusers' fp32-opmath chain with fp32 tables, and
// the storage-dtype chain with partial rotary dims), rope_interleaved_pairs (diffusers'
// use_real_unbind_dim=-1 chain, [B, H, S, D] with [S, D] tables and [B, S, H, D] with
// [1, S, 1, D]), interleaved_rope_fp64 (SANA-Video's paired
// Q/K RoPE with fp64 tables) and fused_inplace_qknorm_rope (both RMSNorm chains, in place on one
// dense [2, B, S, H, D] q|k tensor), on dense heads and on q/k slices of a packed QKV projection, at the
// head shapes of FLUX.1/FLUX.2/Qwen-Image, HunyuanVideo, LTX-2 and SANA-Video and odd ones; quick
// runs (a slow host) use few tokens.
#include "dfuse/cli_cases.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::cli {

namespace {

const CaseOp kRotateHalfFp32{
    "diffusion.rope_rotate_half",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      rope_rotate_half(in[0], in[1], in[2], out, RopeMath::fp32_opmath, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::rope_rotate_half_chain(in[0], in[1], in[2], out, RopeMath::fp32_opmath, ws, s);
    },
};

const CaseOp kRotateHalfStorage{
    "diffusion.rope_rotate_half",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      rope_rotate_half(in[0], in[1], in[2], out, RopeMath::storage_dtype, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::rope_rotate_half_chain(in[0], in[1], in[2], out, RopeMath::storage_dtype, ws, s);
    },
};

const CaseOp kInterleavedPairs{
    "diffusion.rope_interleaved_pairs",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      rope_interleaved_pairs(in[0], in[1], in[2], out, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::rope_interleaved_pairs_chain(in[0], in[1], in[2], out, ws, s);
    },
};

// out [2, ...]: q's result in out[0], k's in out[1].
TensorView output_half(const TensorView& out, int index) {
  auto* base = static_cast<char*>(out.data()) + index * out.stride(0) * int64_t(dtype_size(out.dtype()));
  return TensorView(base, out.dtype(), out.sizes() + 1, out.strides() + 1, out.dim() - 1, out.device());
}

const CaseOp kInterleavedFp64{
    "diffusion.interleaved_rope_fp64",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      interleaved_rope_fp64(in[0], in[1], in[2], in[3], output_half(out, 0), output_half(out, 1), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::interleaved_rope_fp64_chain(in[0], in[2], in[3], output_half(out, 0), ws, s);
      eager::interleaved_rope_fp64_chain(in[1], in[2], in[3], output_half(out, 1), ws, s);
    },
};

// inputs = {qk [2, ...] (q = qk[0], k = qk[1], written in place), q_weight, k_weight, cos, sin}.
template <RmsNormChain kChain, RopeMath kMath>
const CaseOp kQkNormRope{
    "diffusion.fused_inplace_qknorm_rope",
    [](std::span<const TensorView> in, const TensorView&, Stream s) {
      fused_inplace_qknorm_rope(kChain, output_half(in[0], 0), output_half(in[0], 1), &in[1], &in[2], 1e-6, in[3],
                                in[4], kMath, s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::qknorm_rope_chain(kChain, output_half(in[0], 0), &in[1], 1e-6, in[3], in[4], kMath, output_half(out, 0),
                               ws, s);
      eager::qknorm_rope_chain(kChain, output_half(in[0], 1), &in[2], 1e-6, in[3], in[4], kMath, output_half(out, 1),
                               ws, s);
    },
};

struct HeadShape {
  std::string name;
  int64_t batch, tokens, heads, head_dim;
};

// Tokens of a model shape: as the model has them, or few (and odd) on a quick run.
int64_t case_tokens(const CaseRequest& request, int64_t model_tokens) {
  return &request.shapes == &shape_table(true) ? std::min<int64_t>(model_tokens, 33) : model_tokens;
}

std::vector<HeadShape> model_shapes(const CaseRequest& r) {
  return {{"flux.1 4096+512", 1, case_tokens(r, 4608), 24, 128},
          {"flux.2 4096+512", 1, case_tokens(r, 4608), 48, 128},
          {"hunyuanvideo", 1, case_tokens(r, 32760), 24, 128},
          {"ltx-2", 1, case_tokens(r, 6144), 32, 128}};
}

std::vector<HeadShape> odd_shapes(const CaseRequest& r) {
  return {{"odd heads 1", 1, case_tokens(r, 4097), 1, 128},
          {"odd heads 3", 2, 7, 3, 128},
          {"odd heads 30", 1, case_tokens(r, 4097), 30, 128},
          {"odd tokens 1", 1, 1, 24, 96}};
}

// q (slot 0) or k (slot 1) heads [B, S, H, D]: dense, or the slot of a packed [B, S, 3, H, D] projection.
OperandSpec heads(std::string name, const HeadShape& s, bool packed, int slot) {
  if (!packed) return dense(std::move(name), {s.batch, s.tokens, s.heads, s.head_dim});
  const int64_t row = 3 * s.heads * s.head_dim;
  return {std::move(name),
          {s.batch, s.tokens, s.heads, s.head_dim},
          {s.tokens * row, row, s.head_dim, 1},
          slot * s.heads * s.head_dim,
          s.batch * s.tokens * row};
}

// A table [1, S, 1, width] (broadcast over batch and heads) of `dtype`, or of the case's dtype.
OperandSpec table(std::string name, const HeadShape& s, int64_t width, std::optional<DType> dtype) {
  OperandSpec t = dense(std::move(name), {1, s.tokens, 1, width});
  t.dtype = dtype;
  return t;
}

// ---- rope_rotate_half: x, cos, sin ----------------------------------------------------------------

Case rotate_half(const HeadShape& s, RopeMath math, int64_t rot, bool packed, DType dtype,
                 Values values = Values::finite) {
  const bool fp32 = math == RopeMath::fp32_opmath;
  const std::optional<DType> table_dtype = fp32 ? std::optional<DType>(DType::f32) : std::nullopt;
  std::string label = s.name + (fp32 ? " fp32-opmath" : " storage-dtype") +
                      (rot < s.head_dim ? " rot " + std::to_string(rot) : "") + (packed ? " packed" : "");
  return (fp32 ? kRotateHalfFp32 : kRotateHalfStorage)
      .make(std::move(label), dtype,
            {heads("x", s, packed, 0), table("cos", s, rot, table_dtype), table("sin", s, rot, table_dtype)},
            {s.batch, s.tokens, s.heads, s.head_dim}, values);
}

std::vector<Case> rotate_half_cases(const CaseRequest& request) {
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : model_shapes(request)) {
      cases.push_back(rotate_half(s, RopeMath::fp32_opmath, s.head_dim, false, DType::bf16));
      cases.push_back(rotate_half(s, RopeMath::fp32_opmath, s.head_dim, true, DType::bf16));
      cases.push_back(rotate_half(s, RopeMath::storage_dtype, s.head_dim / 2, false, DType::bf16));
    }
    return cases;
  }
  for (const auto& s : model_shapes(request)) {
    for (DType t : kCaseDtypes) {
      cases.push_back(rotate_half(s, RopeMath::fp32_opmath, s.head_dim, false, t));
      cases.push_back(rotate_half(s, RopeMath::storage_dtype, s.head_dim / 2, true, t));
    }
    cases.push_back(rotate_half(s, RopeMath::fp32_opmath, s.head_dim, true, DType::bf16, Values::specials));
  }
  for (const auto& s : odd_shapes(request)) {
    for (DType t : kCaseDtypes) {
      cases.push_back(rotate_half(s, RopeMath::fp32_opmath, s.head_dim - 2, true, t));
      cases.push_back(rotate_half(s, RopeMath::storage_dtype, s.head_dim, false, t, Values::specials));
    }
  }
  return cases;
}

// ---- interleaved_rope_fp64: q, k, freqs_cos, freqs_sin; out [2, B, S, H, D] ------------------------

Case interleaved(const HeadShape& s, bool packed, DType dtype, Values values = Values::finite) {
  return kInterleavedFp64.make(s.name + (packed ? " packed" : ""), dtype,
                               {heads("q", s, packed, 0), heads("k", s, packed, 1),
                                table("freqs_cos", s, s.head_dim, DType::f64),
                                table("freqs_sin", s, s.head_dim, DType::f64)},
                               {2, s.batch, s.tokens, s.heads, s.head_dim}, values);
}

std::vector<Case> interleaved_cases(const CaseRequest& request) {
  const HeadShape sana{"sana-video 480p", 2, case_tokens(request, 8190), 20, 112};
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    cases.push_back(interleaved(sana, false, DType::bf16));
    cases.push_back(interleaved(sana, true, DType::bf16));
    return cases;
  }
  for (DType t : kCaseDtypes) {
    cases.push_back(interleaved(sana, false, t));
    cases.push_back(interleaved(sana, true, t));
  }
  cases.push_back(interleaved(sana, false, DType::bf16, Values::specials));
  for (const auto& s : odd_shapes(request))
    for (DType t : kCaseDtypes) cases.push_back(interleaved(s, true, t, Values::specials));
  return cases;
}

// ---- rope_interleaved_pairs: x, cos, sin (fp32) -----------------------------------------------------

// x as FLUX passes it, [B, H, S, D] (dense, or q's slot of a packed projection transposed) with
// tables [S, D], or [B, S, H, D] with tables [1, S, 1, D].
Case interleaved_pairs(const HeadShape& s, bool heads_first, bool packed, DType dtype,
                       Values values = Values::finite) {
  std::string label = s.name + (heads_first ? " [B, H, S, D]" : " [B, S, H, D]") + (packed ? " packed" : "");
  if (!heads_first)
    return kInterleavedPairs.make(std::move(label), dtype,
                                  {heads("x", s, packed, 0), table("cos", s, s.head_dim, DType::f32),
                                   table("sin", s, s.head_dim, DType::f32)},
                                  {s.batch, s.tokens, s.heads, s.head_dim}, values);
  const std::vector<int64_t> shape = {s.batch, s.heads, s.tokens, s.head_dim};
  const int64_t row = 3 * s.heads * s.head_dim;
  OperandSpec x = packed ? OperandSpec{"x", shape, {s.tokens * row, s.head_dim, row, 1}, 0, s.batch * s.tokens * row}
                         : dense("x", shape);
  OperandSpec cos = dense("cos", {s.tokens, s.head_dim}), sin = dense("sin", {s.tokens, s.head_dim});
  cos.dtype = sin.dtype = DType::f32;
  return kInterleavedPairs.make(std::move(label), dtype, {std::move(x), std::move(cos), std::move(sin)}, shape,
                                values);
}

std::vector<Case> interleaved_pairs_cases(const CaseRequest& request) {
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) {
    for (const auto& s : model_shapes(request)) {
      cases.push_back(interleaved_pairs(s, true, false, DType::bf16));
      cases.push_back(interleaved_pairs(s, true, true, DType::bf16));
      cases.push_back(interleaved_pairs(s, false, true, DType::bf16));
    }
    return cases;
  }
  for (const auto& s : model_shapes(request)) {
    for (DType t : kCaseDtypes) {
      cases.push_back(interleaved_pairs(s, true, false, t));
      cases.push_back(interleaved_pairs(s, false, true, t));
    }
    cases.push_back(interleaved_pairs(s, true, true, DType::bf16, Values::specials));
  }
  for (const auto& s : odd_shapes(request))
    for (DType t : kCaseDtypes) {
      cases.push_back(interleaved_pairs(s, true, true, t, Values::specials));
      cases.push_back(interleaved_pairs(s, false, false, t));
    }
  return cases;
}

// ---- fused_inplace_qknorm_rope: qk [2, B, S, H, D] in place, q_weight, k_weight, cos, sin ---------

Case qknorm_rope(const HeadShape& s, RmsNormChain chain, RopeMath math, int64_t rot, DType dtype,
                 Values values = Values::finite) {
  const bool torch_chain = chain == RmsNormChain::torch_rms_norm, fp32 = math == RopeMath::fp32_opmath;
  const CaseOp& op = torch_chain ? (fp32 ? kQkNormRope<RmsNormChain::torch_rms_norm, RopeMath::fp32_opmath>
                                         : kQkNormRope<RmsNormChain::torch_rms_norm, RopeMath::storage_dtype>)
                                 : (fp32 ? kQkNormRope<RmsNormChain::diffusers_decomposed, RopeMath::fp32_opmath>
                                         : kQkNormRope<RmsNormChain::diffusers_decomposed, RopeMath::storage_dtype>);
  const std::optional<DType> table_dtype = fp32 ? std::optional<DType>(DType::f32) : std::nullopt;
  const std::vector<int64_t> qk = {2, s.batch, s.tokens, s.heads, s.head_dim};
  std::string label = s.name + " " + rms_norm_chain_name(chain) + (fp32 ? " fp32-opmath" : " storage-dtype") +
                      (rot < s.head_dim ? " rot " + std::to_string(rot) : "");
  Case c = op.make(std::move(label), dtype,
                   {dense("qk", qk), dense("q_weight", {s.head_dim}), dense("k_weight", {s.head_dim}),
                    table("cos", s, rot, table_dtype), table("sin", s, rot, table_dtype)},
                   qk, values);
  c.in_place_input = 0;
  return c;
}

std::vector<Case> qknorm_rope_cases(const CaseRequest& request) {
  std::vector<Case> cases;
  const RmsNormChain chains[] = {RmsNormChain::torch_rms_norm, RmsNormChain::diffusers_decomposed};
  if (request.purpose == Purpose::bench) {
    for (const auto& s : model_shapes(request))
      for (RmsNormChain chain : chains) cases.push_back(qknorm_rope(s, chain, RopeMath::fp32_opmath, 128, DType::bf16));
    return cases;
  }
  for (const auto& s : model_shapes(request))
    for (RmsNormChain chain : chains)
      for (DType t : kCaseDtypes) {
        cases.push_back(qknorm_rope(s, chain, RopeMath::fp32_opmath, s.head_dim, t));
        cases.push_back(qknorm_rope(s, chain, RopeMath::storage_dtype, s.head_dim / 2, t));
      }
  for (const auto& s : odd_shapes(request)) {
    if (s.head_dim != 128) continue;
    for (RmsNormChain chain : chains)
      for (DType t : kCaseDtypes)
        cases.push_back(qknorm_rope(s, chain, RopeMath::fp32_opmath, 96, t, Values::specials));
  }
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.rope_rotate_half", &rotate_half_cases);
DFUSE_CLI_CASES("diffusion.fused_inplace_qknorm_rope", &qknorm_rope_cases);
DFUSE_CLI_CASES("diffusion.interleaved_rope_fp64", &interleaved_cases);
DFUSE_CLI_CASES("diffusion.rope_interleaved_pairs", &interleaved_pairs_cases);

}  // namespace dfuse::cli
