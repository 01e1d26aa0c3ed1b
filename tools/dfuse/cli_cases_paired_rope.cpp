// Cases for the paired Q/K RoPE ops of LTX-2, LTX-2.5 and Helios: ltx2_qknorm_split_rope (LTX-2's QK RMSNorm over the inner dim + split
// RoPE on q and k, one dense [2, B, S, C] q|k input, fp32 tables [B, H, S, D/2] laid out as
// diffusers' swapaxes(1, 2) view of [B, S, H, D/2]) at LTX-2's 32 x 128 video shape and odd ones, and
// ltx25_decoder_rope (the LTX-2.5 diffusion decoder's 3D RoPE on one dense [2, B, T, H, W, heads, D]
// q|k input with compact fp32 per-axis tables) at decoder stage grids, and helios_qk_rope (Helios'
// apply_rotary_emb_transposed in place on one dense [2, B, S, heads, D] q|k input with the [B, S, 2D]
// cos|sin table) at Helios' 40 x 128 shape; quick runs (a slow host) use few tokens.
#include <algorithm>

#include "dfuse/cli_cases.h"
#include "dfuse/eager/rope.h"
#include "dfuse/ops/rope.h"

namespace dfuse::cli {

namespace {

// Slot `index` of a [2, ...] q|k tensor (q = 0, k = 1).
TensorView slot(const TensorView& t, int index) {
  auto* base = static_cast<char*>(t.data()) + index * t.stride(0) * int64_t(dtype_size(t.dtype()));
  return TensorView(base, t.dtype(), t.sizes() + 1, t.strides() + 1, t.dim() - 1, t.device());
}

// inputs = {qk [2, B, S, C], q_weight [C], k_weight [C], cos, sin}; out [2, B, S, C]. Self-attention:
// k takes q's tables, as the processor passes them when key_rotary_emb is None.
const CaseOp kQkNormSplitRope{
    "diffusion.ltx2_qknorm_split_rope",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      ltx2_qknorm_split_rope(slot(in[0], 0), slot(in[0], 1), &in[1], &in[2], 1e-6, in[3], in[4], in[3], in[4],
                             slot(out, 0), slot(out, 1), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      eager::ltx2_qknorm_split_rope_chain(slot(in[0], 0), &in[1], 1e-6, in[3], in[4], slot(out, 0), ws, s);
      eager::ltx2_qknorm_split_rope_chain(slot(in[0], 1), &in[2], 1e-6, in[3], in[4], slot(out, 1), ws, s);
    },
};

struct TokenShape {
  std::string name;
  int64_t batch, tokens, heads, head_dim;
};

// Tokens of a model shape: as the model has them, or few (and odd) on a quick run.
int64_t case_tokens(const CaseRequest& request, int64_t model_tokens) {
  return &request.shapes == &shape_table(true) ? std::min<int64_t>(model_tokens, 33) : model_tokens;
}

// An fp32 table [B, H, S, D/2]: diffusers' swapaxes(1, 2) of a contiguous [B, S, H, D/2].
OperandSpec split_table(std::string name, const TokenShape& s) {
  const int64_t r = s.head_dim / 2;
  OperandSpec t{std::move(name),
                {s.batch, s.heads, s.tokens, r},
                {s.tokens * s.heads * r, r, s.heads * r, 1},
                0,
                s.batch * s.tokens * s.heads * r};
  t.dtype = DType::f32;
  return t;
}

Case qknorm_split_rope(const TokenShape& s, DType dtype, Values values = Values::finite) {
  const int64_t c = s.heads * s.head_dim;
  const std::vector<int64_t> qk = {2, s.batch, s.tokens, c};
  return kQkNormSplitRope.make(s.name, dtype,
                               {dense("qk", qk), dense("q_weight", {c}), dense("k_weight", {c}),
                                split_table("cos", s), split_table("sin", s)},
                               qk, values);
}

std::vector<Case> qknorm_split_rope_cases(const CaseRequest& request) {
  const TokenShape ltx2{"ltx-2 video", 1, case_tokens(request, 6144), 32, 128};
  std::vector<Case> cases;
  if (request.purpose == Purpose::bench) return {qknorm_split_rope(ltx2, DType::bf16)};
  for (DType t : kCaseDtypes) cases.push_back(qknorm_split_rope(ltx2, t));
  const TokenShape odd[] = {{"odd heads 1", 1, case_tokens(request, 4097), 1, 128},
                            {"odd heads 3", 2, 7, 3, 128},
                            {"odd heads 30", 1, case_tokens(request, 4097), 30, 128},
                            {"odd tokens 1 head 64", 1, 1, 32, 64}};
  for (const auto& s : odd)
    for (DType t : kCaseDtypes) cases.push_back(qknorm_split_rope(s, t, Values::specials));
  return cases;
}

// inputs = {qk [2, B, T, H, W, heads, D], cos_t, sin_t, cos_h, sin_h, cos_w, sin_w}; out like qk.
const CaseOp kDecoderRope{
    "diffusion.ltx25_decoder_rope",
    [](std::span<const TensorView> in, const TensorView& out, Stream s) {
      ltx25_decoder_rope(slot(in[0], 0), slot(in[0], 1), in[1], in[2], in[3], in[4], in[5], in[6], slot(out, 0),
                         slot(out, 1), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      for (int i = 0; i < 2; ++i)
        eager::ltx25_decoder_rope_chain(slot(in[0], i), in[1], in[2], in[3], in[4], in[5], in[6], slot(out, i), ws,
                                        s);
    },
};

struct GridShape {
  std::string name;
  int64_t batch, frames, height, width, heads, head_dim;
};

Case decoder_rope(const GridShape& s, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> qk = {2, s.batch, s.frames, s.height, s.width, s.heads, s.head_dim};
  const auto split = ltx25_decoder_rope_dim_split(s.head_dim);
  const int64_t positions[3] = {s.frames, s.height, s.width};
  std::vector<OperandSpec> inputs = {dense("qk", qk)};
  const char* names[3][2] = {{"cos_t", "sin_t"}, {"cos_h", "sin_h"}, {"cos_w", "sin_w"}};
  for (int a = 0; a < 3; ++a)
    for (const char* name : names[a]) {
      OperandSpec t = dense(name, {positions[a], split[a] / 2});
      t.dtype = DType::f32;
      inputs.push_back(std::move(t));
    }
  return kDecoderRope.make(s.name, dtype, std::move(inputs), qk, values);
}

std::vector<Case> decoder_rope_cases(const CaseRequest& request) {
  const bool quick = &request.shapes == &shape_table(true);
  const GridShape stage{"ltx-2.5 decoder 16x32x48", 1, quick ? 2 : 16, quick ? 3 : 32, quick ? 5 : 48, 8, 64};
  const GridShape stage128{"ltx-2.5 decoder head 128", 1, quick ? 2 : 8, quick ? 3 : 64, quick ? 4 : 96, 4, 128};
  if (request.purpose == Purpose::bench) return {decoder_rope(stage, DType::bf16)};
  std::vector<Case> cases;
  for (DType t : kCaseDtypes) {
    cases.push_back(decoder_rope(stage, t));
    cases.push_back(decoder_rope(stage128, t));
  }
  const GridShape odd[] = {{"odd heads 1 tokens 4097", 1, quick ? 3 : 17, 1, quick ? 5 : 241, 1, 64},
                           {"odd heads 3 tokens 7", 1, 7, 1, 1, 3, 64},
                           {"odd heads 30", 1, 3, 5, 7, 30, 64}};
  for (const auto& s : odd)
    for (DType t : kCaseDtypes) cases.push_back(decoder_rope(s, t, Values::specials));
  return cases;
}

// inputs = {qk [2, B, S, heads, D] (written in place), freqs [B, S, 2D]}; out like qk (the chain's).
const CaseOp kHeliosRope{
    "diffusion.helios_qk_rope",
    [](std::span<const TensorView> in, const TensorView&, Stream s) {
      helios_qk_rope(slot(in[0], 0), slot(in[0], 1), in[1], slot(in[0], 0), slot(in[0], 1), s);
    },
    [](std::span<const TensorView> in, const TensorView& out, eager::Workspace& ws, Stream s) {
      for (int i = 0; i < 2; ++i) eager::helios_rope_chain(slot(in[0], i), in[1], slot(out, i), ws, s);
    },
};

Case helios_rope(const TokenShape& s, DType dtype, Values values = Values::finite) {
  const std::vector<int64_t> qk = {2, s.batch, s.tokens, s.heads, s.head_dim};
  OperandSpec freqs = dense("freqs", {s.batch, s.tokens, 2 * s.head_dim});
  freqs.dtype = DType::f32;
  Case c = kHeliosRope.make(s.name, dtype, {dense("qk", qk), std::move(freqs)}, qk, values);
  c.in_place_input = 0;
  return c;
}

std::vector<Case> helios_rope_cases(const CaseRequest& request) {
  const TokenShape helios{"helios", 1, case_tokens(request, 8190), 40, 128};
  if (request.purpose == Purpose::bench) return {helios_rope(helios, DType::bf16)};
  std::vector<Case> cases;
  for (DType t : kCaseDtypes) cases.push_back(helios_rope(helios, t));
  const TokenShape odd[] = {{"odd heads 1", 1, case_tokens(request, 4097), 1, 128},
                            {"odd heads 3", 3, 7, 3, 128},
                            {"odd heads 30", 1, case_tokens(request, 4097), 30, 128},
                            {"odd tokens 1", 1, 1, 40, 128}};
  for (const auto& s : odd)
    for (DType t : kCaseDtypes) cases.push_back(helios_rope(s, t, Values::specials));
  return cases;
}

}  // namespace

DFUSE_CLI_CASES("diffusion.ltx2_qknorm_split_rope", &qknorm_split_rope_cases);
DFUSE_CLI_CASES("diffusion.helios_qk_rope", &helios_rope_cases);
DFUSE_CLI_CASES("diffusion.ltx25_decoder_rope", &decoder_rope_cases);

}  // namespace dfuse::cli
